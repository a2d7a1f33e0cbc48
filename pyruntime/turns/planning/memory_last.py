"""The memory-last request layout (pure): the whole memory after the history, before the player's line.

For models too small to find a memory block across a saved history (the writer design's models;
measured with SmolLM2-135M in `bench/recall_layouts.py`, docs/benchmarks.md#recall-layouts). With the
head layout of `prompt.assemble_messages` (the snapshot and its update notes before and inside the
history) SmolLM2-135M answered 12 of the memory eval's 65 recall questions in a new process with the
history saved; with the memory last, 32. Everything else is `assemble_messages`' layout: the
summary after the system prompt, the history, the tail where it was first sent.

The memory is the current document, consolidated every turn (no snapshot and notes: a small model
read "Added to the memory since the block above" as something to say).

Where the block goes, per turn (turns/between/block_pace.py decides, by the player's pace): right before the
player's line, or (`memory_with_tail`) where it was first sent. Before the line it costs the block and the
last exchange again after every reply (the prewarm evaluates them while the player reads; a player who
answers sooner waits for that). Where it was first sent (with the tail, which stays there too:
`prompt.place_tail`; the planner anchors the tail and the block together, so a fold or an edit that is
not an append puts both last again) turns append only, and lines appended since (a fact the writer or
the game added) are each one more block under the same heading, right before the player's line where
they were first sent (`place_memory_with_tail`): an append costs its own lines. A turn whose block moved
keeps it as such a run (`anchors_of_the_block_that_moves`), so switching between the two moves nothing.
Measured in docs/benchmarks.md#the-memory-block-moves-stays-auto.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Unpack

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.planning.prompt import (
    MemoryNote,
    NoteAnchor,
    Placement,
    PromptAnchors,
    PromptParts,
    TailAnchor,
    TailBlocks,
    assemble_messages,
    block,
    context_message,
    history_message,
    last_order,
    place_notes,
    place_tail,
)

# Not "## Memory": SmolLM2 took that noun as its own identity ("as a memory AI", "The memory changed to ...":
# 7 of 65 recall replies). Measured with the block last and the earlier sessions left out (recall of 65,
# bench/recall_layouts.py on the memory eval's saves): "## Notes about the player" 40, "## What you know
# about the player" 38, "## Memory" 37, "## Your notes about the player" 37, "## About the player" 36,
# "What you remember about the player:" 34, "What you know about the player:" 31 (docs/benchmarks.md#recall-layouts).
LAST_MEMORY_HEADING = "## Notes about the player"
# Blocks of appended lines kept where they were first sent; one more puts the whole memory last again as
# one block (a fold does that anyway, every few turns past the window).
MAX_MEMORY_ADDITIONS = 4


def memory_block(memory: str) -> str:
    """The memory message of the memory-last layout, or "" without a memory."""
    return block(LAST_MEMORY_HEADING, memory)


def assemble_memory_last(*, system_prompt: str, memory_with_tail: bool = False,
                         **parts: Unpack[PromptParts]) -> list[dict[str, Any]]:
    """The messages of one request (`assemble_messages`' parts), `tail.memory` right after the tail
    (`memory_with_tail`) or last before the payload.

    `tail.memory` is the whole current memory (the orchestrator consolidates it every turn in this
    layout); notes and a folded update block, if any were planned, are not sent: the memory says it all.
    With `memory_with_tail`, `tail.memory` is the part sent with the tail and `tail.memory_notes` the
    lines appended since, each after the first `notes_after` history messages (`place_memory_with_tail`).
    """
    history, tail = list(parts.get("history", ())), parts.get("tail", TailBlocks())
    tail_after, notes_after = parts.get("tail_after"), parts.get("notes_after")
    system_messages_after_first = parts.get("system_messages_after_first", True)
    at = len(history) if tail_after is None or not memory_with_tail else max(0, min(tail_after, len(history)))
    without_memory = replace(tail, memory="", memory_updates="", memory_folded=None, memory_notes=())
    messages: list[dict[str, Any]] = assemble_messages(
        system_prompt=system_prompt, summary=parts.get("summary", ""), history=history[:at], tail=without_memory,
        system_messages_after_first=system_messages_after_first, tail_after=None if memory_with_tail else tail_after)
    blocks = [(at, tail.memory)]
    if memory_with_tail:
        places = notes_after if notes_after is not None else [len(history)] * len(tail.memory_notes)
        blocks += [(max(at, min(after, len(history))), note.text)
                   for after, note in zip(places, tail.memory_notes, strict=True)]
    sent = at
    for after, memory in blocks:
        messages.extend(history_message(message) for message in history[sent:after])
        sent = max(sent, after)
        text = memory_block(memory)
        if text:
            messages.append(context_message(text, system_messages_after_first=system_messages_after_first))
    messages.extend(history_message(message) for message in history[sent:])
    if user_payload := parts.get("user_payload", ""):
        messages.append({"role": "user", "content": user_payload})
    return messages


def memory_anchor_text(tail_text: str, memory: str) -> str:
    """The text the tail's anchor is kept for when the memory block goes with the tail: either one changing
    puts both right before the player's line again (`prompt.place_tail`)."""
    return "\n\n".join(t for t in (tail_text, memory_block(memory)) if t)


def _lines(memory: str) -> list[str]:
    return memory.strip("\n").split("\n") if memory.strip() else []


def _appended_runs(lines: Sequence[str], placed: int, anchors: Sequence[NoteAnchor]) -> list[MemoryNote]:
    """The lines after the first `placed`, in the runs the anchors kept (their `version`: the line count each
    brings the block to), then the lines appended since as one more run."""
    runs: list[MemoryNote] = []
    start = placed
    for anchor in anchors:
        if not start < anchor.version <= len(lines):
            break
        runs.append(MemoryNote(anchor.version, "\n".join(lines[start:anchor.version])))
        start = anchor.version
    if start < len(lines):
        runs.append(MemoryNote(len(lines), "\n".join(lines[start:])))
    return runs


def place_memory_with_tail(anchors: PromptAnchors | None, tail: TailBlocks, tail_text: str,
                           history: Sequence[HistoryMessage], *, compacted: bool) -> Placement:
    """Where the tail and `tail.memory` (the whole memory) go when the block stays with the tail; the
    placement's tail has the lines sent with the tail as `memory` and each run appended since as a note.

    The tail and the block stay where they were first sent while the memory only grows by lines after
    theirs; each run of lines appended since is a block of its own, kept where it was first sent. A fold,
    an edit that is not an append, a tail whose message is gone or more than `MAX_MEMORY_ADDITIONS` runs
    put the whole memory last again, as one block.
    """
    lines = _lines(tail.memory)

    def anchor_text(count: int) -> str:
        return memory_anchor_text(tail_text, "\n".join(lines[:count]))

    placed, runs = len(lines), []
    if anchors is not None and not compacted:
        placed = next((count for count in range(len(lines), -1, -1) if anchors.tail.matches(anchor_text(count))),
                      len(lines))
        runs = _appended_runs(lines, placed, anchors.notes)
        if len(runs) > MAX_MEMORY_ADDITIONS:
            placed, runs = len(lines), []
    tail_after, kept = place_tail(anchors.tail if anchors is not None else None, anchor_text(placed), history,
                                  compacted=compacted)
    if runs and anchors is not None and kept is not anchors.tail:  # its message is gone: all of it goes last
        placed, runs = len(lines), []
        tail_after, kept = place_tail(None, anchor_text(placed), history, compacted=compacted)
    notes_after, note_anchors = place_notes(anchors.notes if anchors is not None else (), runs, history)
    sent = replace(tail, memory="\n".join(lines[:placed]), memory_notes=tuple(runs))
    return Placement(sent, tail_after, notes_after, PromptAnchors(kept, note_anchors))


def anchors_of_the_block_that_moves(tail_anchor: TailAnchor, memory: str,
                                    history: Sequence[HistoryMessage]) -> PromptAnchors:
    """The anchors a turn whose block moved keeps: its tail where it stays, the whole memory as one run right
    after the history, so a next turn whose block stays (between/block_pace.py) finds it where this one sent it."""
    lines = _lines(memory)
    if not lines:
        return PromptAnchors(tail_anchor)
    return PromptAnchors(tail_anchor, (NoteAnchor(last_order(history), len(lines)),))
