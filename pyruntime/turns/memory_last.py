"""The memory-last request layout (pure): the whole memory, one block, right before the player's line.

For models too small to find a memory block across a saved history (the writer design's models;
issue 25, measured with SmolLM2-135M in `bench/recall_layouts.py`, docs/design/memory-writer.md). With
today's head layout (`prompt.assemble_messages`: the snapshot and its update notes before and inside
the history) SmolLM2-135M answered 12 of the memory eval's 65 recall questions in a new process with
the history saved; with the memory last, 32. Everything else is `assemble_messages`' layout: the
summary after the system prompt, the history, the tail where it was first sent.

The memory is the current document, consolidated every turn (no snapshot and notes: a small model
read "Added to the memory since the block above" as something to say).

Where the block goes: right before the player's line on every turn (the default). That costs the block
and the last exchange again on every turn: the prewarm evaluates them while the player reads the reply,
and a player who answers within a second or two waits for that prewarm in the conversation's slot
(issue 24: TTFT p50 2.2x the naive game's). `memory_with_tail` (the orchestrator's `memory_last_stays`)
puts it right after the tail instead, which stays where it was first sent (`prompt.place_tail`; the
planner anchors the tail and the block together, so an edit or a fold puts both last again): turns
append only (TTFT p50 1.17x), but a game's edit re-evaluates the block and every exchange since
(largest turn 12.9x the median against 2.0x). Measured in docs/design/compaction.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.prompt import TailBlocks, assemble_messages, block, context_message, history_message

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
    memory_with_tail: bool = False,
) -> list[dict[str, Any]]:
    """The messages of one request (`assemble_messages`' signature), `tail.memory` right after the tail
    (`memory_with_tail`) or last before the payload.

    `tail.memory` is the whole current memory (the orchestrator consolidates it every turn in this
    layout); notes and a folded update block, if any were planned, are not sent: the memory says it all.
    """
    history = list(history)
    at = len(history) if tail_after is None or not memory_with_tail else max(0, min(tail_after, len(history)))
    without_memory = replace(tail, memory="", memory_updates="", memory_folded=None, memory_notes=())
    messages = assemble_messages(system_prompt=system_prompt, summary=summary, history=history[:at],
                                 tail=without_memory, system_messages_after_first=system_messages_after_first,
                                 tail_after=None if memory_with_tail else tail_after)
    text = memory_block(tail.memory)
    if text:
        messages.append(context_message(text, system_messages_after_first=system_messages_after_first))
    messages.extend(history_message(message) for message in history[at:])
    if user_payload:
        messages.append({"role": "user", "content": user_payload})
    return messages


def memory_anchor_text(tail_text: str, memory: str) -> str:
    """The text the tail's anchor is kept for when the memory block goes with the tail: either one changing
    puts both right before the player's line again (`prompt.place_tail`)."""
    return "\n\n".join(t for t in (tail_text, memory_block(memory)) if t)
