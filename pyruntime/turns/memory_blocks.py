"""The `## Memory` snapshot and `## Memory (updates)` blocks of a turn (spec section 7), pure.

The snapshot is the memory as first sent to the model. Later turns send the same snapshot plus
only what changed since, so the memory text the model saw earlier never changes under it; the
snapshot is consolidated (snapshot := current memory) only when a compaction or an overflow retry
rewrites the prompt anyway.

The cache-stable layout sends what changed as notes, one per change, each sent once and left where
it was (issue 13): a note's text is rebuilt every turn from the memory versions it spans, so the
same bytes go out turn after turn and after a restart, and only the versions need remembering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyruntime.memory.state import AgentMemoryState
from pyruntime.turns.prompt import MemoryNote

APPENDED_FRAMING = "Added to the memory since the block above:"
REPLACED_FRAMING = (
    "The memory changed since the block above. This is the full current memory; it overrides the "
    "## Memory block and any earlier update:"
)
CLEARED_TEXT = ("The memory was cleared since the block above; it is empty now. Ignore the ## Memory block and "
                "any earlier update.")


@dataclass(frozen=True)
class MemoryBlocks:
    """The two memory blocks of a request and the snapshot to store."""

    snapshot_block: str  # body of `## Memory` ("" = no block)
    updates_block: str  # body of `## Memory (updates)` ("" = no block)
    snapshot: str  # AgentMemoryState.system_prompt_memory_snapshot after this turn
    snapshot_version: int  # AgentMemoryState.system_prompt_memory_version after this turn
    snapshot_changed: bool  # the stored snapshot fields must be updated
    notes: tuple[MemoryNote, ...] = ()  # the updates as notes: those sent before, then one for a new change


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


def memory_notes(state: AgentMemoryState, sent: Sequence[int]) -> tuple[MemoryNote, ...] | None:
    """The notes of versions `sent` (rebuilt from the retained versions), then one for what changed since.

    None when they cannot be rebuilt (a version no longer retained, or a memory no version records,
    as after an import): the caller consolidates instead.
    """
    contents = {v.version: v.content_after for v in state.versions}
    before, before_version = state.system_prompt_memory_snapshot, state.system_prompt_memory_version
    notes: list[MemoryNote] = []
    for version in sent:
        after = contents.get(version)
        if after is None or version <= before_version or after == before:
            return None
        notes.append(MemoryNote(version, memory_updates_text(before, after)))
        before, before_version = after, version
    if state.memory != before:
        latest = state.latest_version
        if latest <= before_version or contents.get(latest) != state.memory:
            return None
        notes.append(MemoryNote(latest, memory_updates_text(before, state.memory)))
    return tuple(notes)


def plan_memory_blocks(state: AgentMemoryState | None, *, consolidate: bool = False,
                       sent_notes: Sequence[int] = ()) -> MemoryBlocks:
    """The blocks for the memory `state` (None = no document); `consolidate` folds the updates into the snapshot.

    `sent_notes`: the versions of the notes sent since the snapshot (`NoteAnchor.version`).
    """
    state = state or AgentMemoryState()
    current = state.memory
    stored, stored_version = state.system_prompt_memory_snapshot, state.system_prompt_memory_version
    # An empty snapshot means nothing was sent yet: the first non-empty memory becomes the snapshot.
    notes = None if consolidate or not stored else memory_notes(state, sent_notes)
    if notes is None:
        snapshot = current
        version = state.latest_version if (current or stored) else stored_version
        return MemoryBlocks(
            snapshot_block=snapshot,
            updates_block="",
            snapshot=snapshot,
            snapshot_version=version,
            snapshot_changed=(snapshot, version) != (stored, stored_version),
        )
    return MemoryBlocks(
        snapshot_block=stored,
        updates_block=memory_updates_text(stored, current),
        snapshot=stored,
        snapshot_version=stored_version,
        snapshot_changed=False,
        notes=notes,
    )
