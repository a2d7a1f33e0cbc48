"""Pure planning of the `## Memory` snapshot and `## Memory (updates)` blocks."""

from __future__ import annotations

from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.turns.planning.memory_blocks import (
    APPENDED_FRAMING,
    CLEARED_TEXT,
    REPLACED_FRAMING,
    NoteFold,
    memory_updates_text,
    plan_memory_blocks,
)
from pyruntime.turns.planning.prompt import MemoryNote


def _state(memory: str, version: int, snapshot: str = "", snapshot_version: int = 0) -> AgentMemoryState:
    versions = tuple(MemoryVersion(v, 0, "write", memory, "") for v in range(1, version + 1))
    return AgentMemoryState(memory=memory, versions=versions, system_prompt_memory_snapshot=snapshot,
                            system_prompt_memory_version=snapshot_version)


def test_no_memory_no_blocks() -> None:
    for state in (None, AgentMemoryState()):
        blocks = plan_memory_blocks(state)
        assert (blocks.snapshot_block, blocks.updates_block, blocks.snapshot_changed) == ("", "", False)


def test_first_send_takes_the_snapshot() -> None:
    blocks = plan_memory_blocks(_state("likes swords", 1))
    assert blocks.snapshot_block == "likes swords"
    assert blocks.updates_block == ""
    assert (blocks.snapshot, blocks.snapshot_version, blocks.snapshot_changed) == ("likes swords", 1, True)


def test_unchanged_memory_keeps_the_snapshot() -> None:
    blocks = plan_memory_blocks(_state("likes swords", 1, "likes swords", 1))
    assert (blocks.snapshot_block, blocks.updates_block, blocks.snapshot_changed) == ("likes swords", "", False)


def test_appended_lines_are_the_delta() -> None:
    blocks = plan_memory_blocks(_state("likes swords\nhates rain", 2, "likes swords", 1))
    assert blocks.snapshot_block == "likes swords"
    assert blocks.updates_block == f"{APPENDED_FRAMING}\nhates rain"
    assert not blocks.snapshot_changed


def test_rewritten_memory_is_sent_in_full_as_overriding() -> None:
    blocks = plan_memory_blocks(_state("likes axes", 2, "likes swords", 1))
    assert blocks.snapshot_block == "likes swords"
    assert blocks.updates_block == f"{REPLACED_FRAMING}\nlikes axes"
    assert memory_updates_text("likes swords", "") == CLEARED_TEXT


def test_consolidation_folds_updates_into_the_snapshot() -> None:
    blocks = plan_memory_blocks(_state("likes swords\nhates rain", 2, "likes swords", 1), fold=NoteFold.INTO_SNAPSHOT)
    assert blocks.snapshot_block == "likes swords\nhates rain"
    assert blocks.updates_block == ""
    assert (blocks.snapshot_version, blocks.snapshot_changed) == (2, True)


def _edited(*memories: str, snapshot_at: int = 1) -> AgentMemoryState:
    """A memory written `memories` in turn (versions 1..n), its snapshot taken at version `snapshot_at`."""
    versions = tuple(MemoryVersion(v, 0, "write", m, "") for v, m in enumerate(memories, 1))
    return AgentMemoryState(memory=memories[-1], versions=versions,
                            system_prompt_memory_snapshot=memories[snapshot_at - 1],
                            system_prompt_memory_version=snapshot_at)


def test_each_change_is_a_note_rebuilt_from_the_versions_it_spans() -> None:
    state = _edited("likes swords", "likes swords\nhates rain", "likes swords\nhates rain\nowns a boat")
    # Nothing sent since the snapshot: one note for the whole change.
    assert plan_memory_blocks(state).notes == (
        MemoryNote(3, f"{APPENDED_FRAMING}\nhates rain\nowns a boat"),)
    # Version 2 was sent as a note: its text again, byte for byte, then one note for what came since.
    blocks = plan_memory_blocks(state, sent_notes=(2,))
    assert blocks.notes == (MemoryNote(2, f"{APPENDED_FRAMING}\nhates rain"),
                            MemoryNote(3, f"{APPENDED_FRAMING}\nowns a boat"))
    assert (blocks.snapshot_block, blocks.snapshot_changed) == ("likes swords", False)
    assert blocks.updates_block == f"{APPENDED_FRAMING}\nhates rain\nowns a boat"  # the design note's one block
    assert plan_memory_blocks(state, sent_notes=(2, 3)).notes == blocks.notes  # no change since: no new note
    rewritten = _edited("likes swords", "likes swords\nhates rain", "likes axes")
    assert plan_memory_blocks(rewritten, sent_notes=(2,)).notes[1] == MemoryNote(3, f"{REPLACED_FRAMING}\nlikes axes")


def test_notes_that_cannot_be_rebuilt_consolidate_the_snapshot() -> None:
    state = _edited("likes swords", "likes swords\nhates rain", "likes swords\nhates rain\nowns a boat")
    pruned = state.evolve(versions=state.versions[2:])  # version 2 no longer retained
    unrecorded = state.evolve(memory="set by an import")  # a memory no version records
    stale = state.evolve(system_prompt_memory_version=2)  # a note not newer than the snapshot
    for changed, sent in ((pruned, (2,)), (unrecorded, (2,)), (stale, (2,))):
        blocks = plan_memory_blocks(changed, sent_notes=sent)
        assert (blocks.notes, blocks.updates_block) == ((), "")
        assert (blocks.snapshot_block, blocks.snapshot_changed) == (changed.memory, True)
    assert plan_memory_blocks(state, fold=NoteFold.INTO_SNAPSHOT, sent_notes=(2,)).notes == ()


def test_a_compaction_folds_the_notes_into_one_block_and_keeps_the_snapshot() -> None:
    state = _edited("likes swords", "likes swords\nhates rain", "likes swords\nhates rain\nowns a boat")
    blocks = plan_memory_blocks(state, fold=NoteFold.INTO_HEAD, sent_notes=(2,))
    assert blocks.folded == MemoryNote(3, f"{APPENDED_FRAMING}\nhates rain\nowns a boat") and blocks.notes == ()
    assert (blocks.snapshot_block, blocks.snapshot_changed) == ("likes swords", False)
    # Later turns send the folded block again byte for byte, then a note per change since.
    later = _edited("likes swords", "likes swords\nhates rain", "likes swords\nhates rain\nowns a boat",
                    "likes swords\nhates rain\nowns a boat\nfears bees")
    again = plan_memory_blocks(later, head_version=3)
    assert again.folded == blocks.folded
    assert again.notes == (MemoryNote(4, f"{APPENDED_FRAMING}\nfears bees"),)
    assert plan_memory_blocks(later, fold=NoteFold.INTO_HEAD, head_version=3).folded == MemoryNote(
        4, f"{APPENDED_FRAMING}\nhates rain\nowns a boat\nfears bees")
    # Nothing changed since the snapshot: no block.
    assert plan_memory_blocks(_edited("likes swords"), fold=NoteFold.INTO_HEAD).folded is None
    # A rewrite is not folded after the snapshot (both would be sent): the snapshot is consolidated.
    rewritten = plan_memory_blocks(_edited("likes swords", "likes axes"), fold=NoteFold.INTO_HEAD)
    assert (rewritten.folded, rewritten.snapshot_block, rewritten.snapshot_changed) == (None, "likes axes", True)
    # A folded block whose version is gone cannot be sent again: consolidated too.
    pruned = later.evolve(versions=later.versions[3:])
    assert plan_memory_blocks(pruned, head_version=3).snapshot_changed


def test_a_compaction_prepared_between_turns_folds_the_memory_it_was_warmed_with_and_notes_what_came_after() -> None:
    # The game edited the memory after the next turn's head was evaluated; that head stays as evaluated.
    later = _edited("likes swords", "likes swords\nhates rain", "likes swords\nhates rain\nowns a boat")
    blocks = plan_memory_blocks(later, fold=NoteFold.INTO_HEAD, fold_up_to=2)
    assert blocks.folded == MemoryNote(2, f"{APPENDED_FRAMING}\nhates rain")
    assert blocks.notes == (MemoryNote(3, f"{APPENDED_FRAMING}\nowns a boat"),)
    assert (blocks.snapshot_block, blocks.snapshot_changed) == ("likes swords", False)
    # The next turn rebuilds both from their versions, byte for byte.
    again = plan_memory_blocks(later, head_version=2, sent_notes=(3,))
    assert (again.folded, again.notes) == (blocks.folded, blocks.notes)
    # Warmed before any change since the snapshot: no folded block, the change is a note.
    fresh = plan_memory_blocks(later, fold=NoteFold.INTO_HEAD, fold_up_to=1)
    assert fresh.folded is None and fresh.notes == (MemoryNote(3, f"{APPENDED_FRAMING}\nhates rain\nowns a boat"),)
    # Nothing changed since it was warmed (or no version given): every change is folded, as before.
    folded = plan_memory_blocks(later, fold=NoteFold.INTO_HEAD, fold_up_to=3).folded
    assert folded is not None and folded.version == 3
    assert plan_memory_blocks(later, fold=NoteFold.INTO_HEAD).notes == ()
