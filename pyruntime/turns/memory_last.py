"""The memory-last request layout (pure): the whole memory, one block, right before the player's line.

For models too small to find a memory block across a saved history (the writer design's models;
issue 25, measured with SmolLM2-135M in `bench/recall_layouts.py`, docs/design/memory-writer.md). With
today's head layout (`prompt.assemble_messages`: the snapshot and its update notes before and inside
the history) SmolLM2-135M answered 12 of the memory eval's 65 recall questions in a new process with
the history saved; with the memory last, 32. Everything else is `assemble_messages`' layout: the
summary after the system prompt, the history, the tail where it was first sent.

The memory is the current document, consolidated every turn (no snapshot and notes: a small model
read "Added to the memory since the block above" as something to say). It costs the last exchange and
the block again each turn; the prewarm evaluates that while the player reads the reply
(turns/prewarm.py), so the reply itself evaluates only the player's line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.prompt import TailBlocks, assemble_messages, block, context_message

# Not "## Memory": SmolLM2 took that noun as its own identity ("as a memory AI", "The memory changed to ...":
# 7 of 65 recall replies). Measured with the block last and the earlier sessions left out (recall of 65,
# bench/recall_layouts.py on the memory eval's saves): "## Notes about the player" 40, "## What you know
# about the player" 38, "## Memory" 37, "## Your notes about the player" 37, "## About the player" 36,
# "What you remember about the player:" 34, "What you know about the player:" 31 (docs/design/memory-writer.md).
LAST_MEMORY_HEADING = "## Notes about the player"


def memory_block(memory: str) -> str:
    """The memory message of the memory-last layout, or "" without a memory."""
    return block(LAST_MEMORY_HEADING, memory)


def assemble_memory_last(
    *,
    system_prompt: str,
    summary: str = "",
    history: Sequence[HistoryMessage | Mapping[str, str]] = (),
    tail: TailBlocks = TailBlocks(),
    user_payload: str = "",
    system_messages_after_first: bool = True,
    tail_after: int | None = None,
    notes_after: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """The messages of one request (`assemble_messages`' signature), `tail.memory` last before the payload.

    `tail.memory` is the whole current memory (the orchestrator consolidates it every turn in this
    layout); notes and a folded update block, if any were planned, are not sent: the memory says it all.
    """
    without_memory = replace(tail, memory="", memory_updates="", memory_folded=None, memory_notes=())
    messages = assemble_messages(system_prompt=system_prompt, summary=summary, history=history, tail=without_memory,
                                 system_messages_after_first=system_messages_after_first, tail_after=tail_after)
    text = memory_block(tail.memory)
    if text:
        messages.append(context_message(text, system_messages_after_first=system_messages_after_first))
    if user_payload:
        messages.append({"role": "user", "content": user_payload})
    return messages
