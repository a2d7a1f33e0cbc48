"""The `## Memory` snapshot and `## Memory (updates)` blocks of a turn (contract §7), pure.

The snapshot is the memory as first sent to the model. Later turns send the same snapshot plus
only what changed since, so the memory text the model saw earlier never changes under it.

The cache-stable layout (docs/design/prompt-layout.md) sends each change as a note, sent once and left
where it was (`prompt.place_notes`); a compaction, which rewrites everything after the summary anyway,
folds the notes into one updates block right after the summary, and the snapshot before the summary
stays byte-identical, so the model keeps its cached state of both. Only a rewrite of the memory (not an
append), an overflow retry or a block that can no longer be rebuilt consolidates the snapshot (snapshot :=
current memory). Every text is rebuilt each turn from the memory versions it spans, so the same bytes
go out turn after turn and after a restart, and only version numbers are remembered.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from pyruntime.memory.state import AgentMemoryState
from pyruntime.turns.planning.prompt import MemoryNote

APPENDED_FRAMING = "Added to the memory since the block above:"
REPLACED_FRAMING = (
    "The memory changed since the block above. This is the full current memory; it overrides the "
    "## Memory block and any earlier update:"
)
CLEARED_TEXT = ("The memory was cleared since the block above; it is empty now. Ignore the ## Memory block and "
                "any earlier update.")


class NoteFold(enum.Enum):
    """What happens to the changes sent since the snapshot, by the kind of request."""

    KEEP = "keep"  # a turn that appends: the notes stay where they were sent, a new change is a new note
    INTO_HEAD = "head"  # a compaction: every change since the snapshot is one block after the summary
    INTO_SNAPSHOT = "snapshot"  # an overflow retry: the snapshot := the current memory


@dataclass(frozen=True)
class MemoryBlocks:
    """The memory blocks of a request and the snapshot to store."""

    snapshot_block: str  # body of `## Memory` ("" = no block)
    updates_block: str  # the whole delta since the snapshot as one body (the design note's tail block)
    snapshot: str  # AgentMemoryState.system_prompt_memory_snapshot after this turn
    snapshot_version: int  # AgentMemoryState.system_prompt_memory_version after this turn
    snapshot_changed: bool  # the stored snapshot fields must be updated
    folded: MemoryNote | None = None  # the changes a compaction folded, as the head's updates block
    notes: tuple[MemoryNote, ...] = ()  # the changes since: the notes sent before, then one for a new change


def memory_updates_text(snapshot: str, current: str) -> str:
    """The delta from `snapshot` to `current`: appended lines, or the full memory marked as overriding."""
    if current == snapshot:
        return ""
    if not current.strip():
        return CLEARED_TEXT
    if current.startswith(snapshot):
        added = current[len(snapshot):].strip("\n")
        if added.strip():
            return f"{APPENDED_FRAMING}\n{added}"
    return f"{REPLACED_FRAMING}\n{current}"


class _NotRebuildable(Exception):
    """What was sent cannot be sent again byte for byte (a version no longer retained, a memory no version
    records, as after an import): the snapshot is consolidated instead."""


def _change(contents: dict[int, str], before: tuple[str, int], version: int) -> MemoryNote:
    """The block taking the model from `before` (text, version) to memory version `version`."""
    after = contents.get(version)
    if after is None or version <= before[1] or after == before[0]:
        raise _NotRebuildable
    return MemoryNote(version, memory_updates_text(before[0], after))


def _change_to_current(state: AgentMemoryState, contents: dict[int, str], before: tuple[str, int]) -> MemoryNote:
    """The block taking the model from `before` to the current memory, which the newest version must record."""
    if contents.get(state.latest_version) != state.memory:
        raise _NotRebuildable
    return _change(contents, before, state.latest_version)


def _folded_now(state: AgentMemoryState, contents: dict[int, str],
                up_to: int = 0) -> tuple[MemoryNote | None, tuple[MemoryNote, ...]]:
    """A compaction's updates block: every change since the snapshot (up to version `up_to`, when given and
    older than the current memory: the changes after it are a note), when they only appended to it."""
    snapshot = (state.system_prompt_memory_snapshot, state.system_prompt_memory_version)
    if 0 < up_to < state.latest_version and up_to >= snapshot[1] and up_to in contents:
        folded = None if up_to == snapshot[1] else _change(contents, snapshot, up_to)
        if folded is not None and not folded.text.startswith(APPENDED_FRAMING):
            raise _NotRebuildable
        before = (contents[up_to], up_to)
        notes = () if state.memory == before[0] else (_change_to_current(state, contents, before),)
        return folded, notes
    if state.memory == snapshot[0]:
        return None, ()
    folded = _change_to_current(state, contents, snapshot)
    if not folded.text.startswith(APPENDED_FRAMING):
        raise _NotRebuildable  # a rewrite: the snapshot and the whole memory after it would say it twice
    return folded, ()


def _sent_again(state: AgentMemoryState, contents: dict[int, str], head_version: int,
                sent_notes: Sequence[int]) -> tuple[MemoryNote | None, tuple[MemoryNote, ...]]:
    """The head's updates block and the notes sent before, rebuilt, then a note for what changed since."""
    before = (state.system_prompt_memory_snapshot, state.system_prompt_memory_version)
    folded = None
    if head_version:
        folded = _change(contents, before, head_version)
        before = (contents[head_version], head_version)
    notes = []
    for version in sent_notes:
        notes.append(_change(contents, before, version))
        before = (contents[version], version)
    if state.memory != before[0]:
        notes.append(_change_to_current(state, contents, before))
    return folded, tuple(notes)


def plan_memory_blocks(state: AgentMemoryState | None, *, fold: NoteFold = NoteFold.KEEP, head_version: int = 0,
                       sent_notes: Sequence[int] = (), fold_up_to: int = 0) -> MemoryBlocks:
    """The blocks for the memory `state` (None = no document), by `fold`.

    `head_version` and `sent_notes`: the memory versions of the head's updates block (0: none) and of
    the notes this conversation's last request carried (`PromptAnchors`). `fold_up_to` (a compaction
    prepared between turns): the memory version its head was evaluated with; a change the game
    made since is a note after the history, so the new head stays the one already evaluated.
    """
    state = state or AgentMemoryState()
    current = state.memory
    stored, stored_version = state.system_prompt_memory_snapshot, state.system_prompt_memory_version
    # An empty snapshot means nothing was sent yet: the first non-empty memory becomes the snapshot.
    if fold is not NoteFold.INTO_SNAPSHOT and stored:
        contents = {v.version: v.content_after for v in state.versions}
        try:
            if fold is NoteFold.INTO_HEAD:
                folded, notes = _folded_now(state, contents, fold_up_to)
            else:
                folded, notes = _sent_again(state, contents, head_version, sent_notes)
        except _NotRebuildable:
            pass
        else:
            return MemoryBlocks(
                snapshot_block=stored,
                updates_block=memory_updates_text(stored, current),
                snapshot=stored,
                snapshot_version=stored_version,
                snapshot_changed=False,
                folded=folded,
                notes=notes,
            )
    version = state.latest_version if (current or stored) else stored_version
    return MemoryBlocks(
        snapshot_block=current,
        updates_block="",
        snapshot=current,
        snapshot_version=version,
        snapshot_changed=(current, version) != (stored, stored_version),
    )
