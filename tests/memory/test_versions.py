"""Version snapshots: numbering, timestamps, notes, retention, listing, revert and diff (contract §2)."""

from __future__ import annotations

import pytest

from pyruntime.errors import NotFoundError
from pyruntime.memory import (
    AgentMemoryState,
    MemoryTool,
    MemoryToolAction,
    MemoryVersion,
    diff_versions,
    list_versions,
    record_version,
    revert_memory,
    version_note,
)
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore
from tests.support.loads import loaded

from .conftest import KEY, NOW, StepClock

# -- record_version (pure) ---------------------------------------------------------------------


def test_first_version_is_one_with_int_seconds_and_a_size_note() -> None:
    state = record_version(AgentMemoryState(), "write", "hello world", NOW)
    assert state.memory == "hello world"
    assert state.versions == (MemoryVersion(1, 1_700_000_000, "write", "hello world", "chars 0->11 (+11)"),)


def test_versions_count_up_and_notes_show_shrinking() -> None:
    state = record_version(AgentMemoryState(), MemoryToolAction.Append, "abcdef", NOW)
    state = record_version(state, MemoryToolAction.StrReplace, "abc", NOW + 5)
    assert [(v.version, v.action, v.timestamp, v.note) for v in state.versions] == [
        (1, "append", 1_700_000_000, "chars 0->6 (+6)"), (2, "str_replace", 1_700_000_005, "chars 6->3 (-3)")]


@pytest.mark.parametrize(("before", "after", "note"), [(0, 0, "chars 0->0 (+0)"), (11, 0, "chars 11->0 (-11)"),
                                                        (5, 16000, "chars 5->16000 (+15995)")])
def test_version_note_format(before: int, after: int, note: str) -> None:
    assert version_note(before, after) == note


def test_only_the_newest_max_memory_versions_are_kept_and_numbering_continues() -> None:
    state = AgentMemoryState(max_memory_versions=3)
    for n in range(1, 6):
        state = record_version(state, "append", "x" * n, NOW)
    assert [v.version for v in state.versions] == [3, 4, 5]
    assert state.latest_version == 5
    assert state.max_memory_versions == 3


@pytest.mark.parametrize("configured", [0, -1])
def test_max_memory_versions_below_one_means_30(configured: int) -> None:
    state = AgentMemoryState(max_memory_versions=configured)
    for n in range(35):
        state = record_version(state, "append", str(n), NOW)
    assert [v.version for v in state.versions] == list(range(6, 36))


def test_a_lowered_limit_trims_old_versions_on_the_next_record() -> None:
    state = AgentMemoryState()
    for n in range(10):
        state = record_version(state, "append", str(n), NOW)
    state = record_version(state.evolve(max_memory_versions=2), "clear", "", NOW)
    assert [v.version for v in state.versions] == [10, 11]


def test_versions_out_of_order_are_kept_oldest_first() -> None:
    loaded = AgentMemoryState(versions=(MemoryVersion(7, 0, "a", "", ""), MemoryVersion(3, 0, "a", "", "")))
    assert [v.version for v in record_version(loaded, "write", "x", NOW).versions] == [3, 7, 8]


def test_a_custom_note_replaces_the_size_note() -> None:
    state = record_version(AgentMemoryState(), "revert", "x", NOW, note="Reverted to version 1.")
    assert state.versions[0].note == "Reverted to version 1."


# -- through the tool and the store ------------------------------------------------------------


def _three_versions(store: InMemoryAgentMemoryStore, clock: StepClock) -> MemoryTool:
    tool = MemoryTool(store, KEY, clock=clock)
    for arguments in ({"action": "write", "content": "a\nb"}, {"action": "append", "content": "c"},
                      {"action": "str_replace", "old_text": "b", "new_text": "B"}):
        assert tool.execute(arguments).success
    return tool


def test_list_versions_oldest_first_with_the_tool_clock(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    _three_versions(store, clock)
    assert list_versions(store, KEY) == [
        MemoryVersion(1, 1_700_000_000, "write", "a\nb", "chars 0->3 (+3)"),
        MemoryVersion(2, 1_700_000_001, "append", "a\nb\nc", "chars 3->5 (+2)"),
        MemoryVersion(3, 1_700_000_002, "str_replace", "a\nB\nc", "chars 5->5 (+0)"),
    ]


def test_list_versions_of_an_unknown_key_is_empty(store: InMemoryAgentMemoryStore) -> None:
    assert list_versions(store, "nobody") == []


def test_the_tool_honours_the_stored_retention(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    store.save(KEY, AgentMemoryState(max_memory_versions=2))
    tool = MemoryTool(store, KEY, clock=clock)
    for n in range(4):
        tool.execute({"action": "append", "content": f"fact {n}"})
    assert [v.version for v in list_versions(store, KEY)] == [3, 4]


def test_revert_restores_a_snapshot_as_a_new_version(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    _three_versions(store, clock)
    result = revert_memory(store, KEY, 1, clock=clock)
    assert result.to_json() == (
        '{"Success":true,"Message":"DONE: reverted to version 1. Memory is 3 chars, version 4.","Error":null,'
        '"Version":4,"MemoryLength":3,"Memory":"a\\nb"}')
    newest = list_versions(store, KEY)[-1]
    assert newest == MemoryVersion(4, 1_700_000_003, "revert", "a\nb", "Reverted to version 1.")
    assert loaded(store.try_load(KEY)).memory == "a\nb"


def test_revert_of_an_unknown_version_is_a_clear_failure(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    _three_versions(store, clock)
    before = store.try_load(KEY).state
    result = revert_memory(store, KEY, 9, clock=clock)
    assert (result.success, result.version, result.memory_length, result.memory) == (False, 3, 5, None)
    assert result.error == "cannot revert: version 9 is not retained (retained versions: 1, 2, 3)"
    assert store.try_load(KEY).state == before


def test_revert_of_an_unknown_key_creates_nothing(store: InMemoryAgentMemoryStore) -> None:
    result = revert_memory(store, "nobody", 1)
    assert (result.success, result.error) == (False, "cannot revert: no memory document exists for this key")
    assert store.try_load("nobody").status is LoadStatus.NOT_FOUND


def test_a_trimmed_version_cannot_be_reverted_to(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    store.save(KEY, AgentMemoryState(max_memory_versions=2))
    _three_versions(store, clock)
    assert revert_memory(store, KEY, 1).error == "cannot revert: version 1 is not retained (retained versions: 2, 3)"


def test_diff_between_two_retained_versions(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    _three_versions(store, clock)
    assert diff_versions(store, KEY, 1, 3) == (
        "--- version 1\n+++ version 3\n@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n+B\n+c\n"
        "\\ No newline at end of file\n")
    assert diff_versions(store, KEY, 0, 1) == (
        "--- version 0\n+++ version 1\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n")
    assert diff_versions(store, KEY, 2, 2) == ""


def test_diff_of_unknown_versions_names_them(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    _three_versions(store, clock)
    with pytest.raises(NotFoundError) as err:
        diff_versions(store, KEY, 7, -1)
    assert str(err.value) == ("version(s) 7, -1 not retained (retained versions: 1, 2, 3; "
                              "0 is the empty document)")
    with pytest.raises(NotFoundError, match="^no memory document exists for this key$"):
        diff_versions(store, "nobody", 0, 1)
