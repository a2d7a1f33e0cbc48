"""The `## Memory` snapshot and `## Memory (updates)` blocks of a turn (spec section 7), pure.

The snapshot is the memory as first sent to the model. Later turns send the same snapshot plus
only what changed since, so the memory text the model saw earlier never changes under it; the
snapshot is consolidated (snapshot := current memory) only when a compaction or an overflow retry
rewrites the prompt anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyruntime.memory.state import AgentMemoryState

APPENDED_FRAMING = "Added to the memory since the block above:"
REPLACED_FRAMING = (
    "The memory changed since the block above. This is the full current memory; it overrides the "
    "## Memory block:"
)
CLEARED_TEXT = "The memory was cleared since the block above; it is empty now. Ignore the ## Memory block."


@dataclass(frozen=True)
class MemoryBlocks:
    """The two memory blocks of a request and the snapshot to store."""

    snapshot_block: str  # body of `## Memory` ("" = no block)
    updates_block: str  # body of `## Memory (updates)` ("" = no block)
    snapshot: str  # AgentMemoryState.system_prompt_memory_snapshot after this turn
    snapshot_version: int  # AgentMemoryState.system_prompt_memory_version after this turn
    snapshot_changed: bool  # the stored snapshot fields must be updated


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


def plan_memory_blocks(state: AgentMemoryState | None, *, consolidate: bool = False) -> MemoryBlocks:
    """The blocks for the memory `state` (None = no document); `consolidate` folds the updates into the snapshot."""
    state = state or AgentMemoryState()
    current = state.memory
    stored, stored_version = state.system_prompt_memory_snapshot, state.system_prompt_memory_version
    # An empty snapshot means nothing was sent yet: the first non-empty memory becomes the snapshot.
    take = consolidate or not stored
    if take:
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
    )
