"""Pure planning of the `## Memory` snapshot and `## Memory (updates)` blocks."""

from __future__ import annotations

from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.turns.memory_blocks import (
    APPENDED_FRAMING,
    CLEARED_TEXT,
    REPLACED_FRAMING,
    memory_updates_text,
    plan_memory_blocks,
)


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
    blocks = plan_memory_blocks(_state("likes swords\nhates rain", 2, "likes swords", 1), consolidate=True)
    assert blocks.snapshot_block == "likes swords\nhates rain"
    assert blocks.updates_block == ""
    assert (blocks.snapshot_version, blocks.snapshot_changed) == (2, True)
