"""One contract suite for every AgentMemoryStore / ConversationSummaryStore backend (contract §3)."""

from __future__ import annotations

import threading
import time

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import AgentMemoryStore, LoadStatus, TranscriptEntry, TranscriptKind

KEY = "Teacher"
OTHER = "scope-v1-" + "ab" * 32


def _state(memory: str = "likes swords") -> AgentMemoryState:
    return AgentMemoryState(
        memory=memory,
        last_system_prompt="You are a teacher.",
        system_prompt_memory_snapshot="likes",
        system_prompt_memory_version=1,
        max_memory_versions=5,
        versions=(
            MemoryVersion(1, 1_700_000_000, "write", "likes", "chars 0->5 (+5)"),
            MemoryVersion(2, 1_700_000_100, "append", memory, f"chars 5->{len(memory)} (+{len(memory) - 5})"),
        ),
    )


def _append_line(line: str):
    def fn(state: AgentMemoryState) -> AgentMemoryState:
        return state.evolve(memory=f"{state.memory}\n{line}" if state.memory else line)

    return fn


def test_store_implements_the_protocol(store):
    assert isinstance(store, AgentMemoryStore)


# -- memory document -------------------------------------------------------


def test_unknown_key_is_not_found(store):
    result = store.try_load(KEY)
    assert result.status is LoadStatus.NOT_FOUND and result.state is None


def test_save_then_load_round_trips_every_field(store):
    store.save(KEY, _state())
    result = store.try_load(KEY)
    assert result.status is LoadStatus.LOADED
    assert result.state == _state()


def test_save_replaces_and_keys_are_isolated(store):
    store.save(KEY, _state("one"))
    store.save(KEY, _state("two"))
    store.save(OTHER, _state("other"))
    assert store.try_load(KEY).state.memory == "two"
    assert store.try_load(OTHER).state.memory == "other"


def test_mutate_on_missing_key_gets_a_fresh_state(store):
    seen = []

    def fn(state):
        seen.append(state)
        return state.evolve(memory="first")

    after = store.mutate(KEY, fn)
    assert seen == [AgentMemoryState()]
    assert after.memory == "first"
    assert store.try_load(KEY).state == after


def test_mutate_gets_the_current_state(store):
    store.save(KEY, _state())
    after = store.mutate(KEY, _append_line("hates bows"))
    assert after.memory == "likes swords\nhates bows"
    assert after.versions == _state().versions
    assert store.try_load(KEY).state == after


def test_mutate_returning_none_changes_nothing(store):
    store.save(KEY, _state())
    assert store.mutate(KEY, lambda s: None) == _state()
    assert store.try_load(KEY).state == _state()


def test_mutate_returning_none_on_missing_key_creates_nothing(store):
    assert store.mutate(KEY, lambda s: None) == AgentMemoryState()
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_mutate_that_raises_changes_nothing(store):
    store.save(KEY, _state())

    def boom(state):
        raise RuntimeError("model tool failed")

    with pytest.raises(RuntimeError, match="model tool failed"):
        store.mutate(KEY, boom)
    assert store.try_load(KEY).state == _state()


def test_mutate_is_atomic_under_threads(store):
    threads, per_thread = 4, 15
    start = threading.Barrier(threads)

    def worker(n: int) -> None:
        start.wait()
        for i in range(per_thread):
            store.mutate(KEY, _append_line(f"t{n}-{i}"))

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    lines = store.try_load(KEY).state.memory.split("\n")
    assert sorted(lines) == sorted(f"t{n}-{i}" for n in range(threads) for i in range(per_thread))
    for n in range(threads):  # each thread's own appends stay in order
        mine = [line for line in lines if line.startswith(f"t{n}-")]
        assert mine == [f"t{n}-{i}" for i in range(per_thread)]


def test_clear_removes_memory_but_leaves_chat_and_transcript(store):
    store.save(KEY, _state())
    store.append_chat_message(KEY, "user", "hello")
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", "{}", call_id="c1")])
    store.clear(KEY)
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND
    assert [m.content for m in store.get_chat_history(KEY)] == ["hello"]
    assert [r.content for r in store.get_transcript(KEY)] == ["hello", "{}"]


def test_clear_chat_history_removes_chat_and_transcript_but_leaves_memory(store):
    store.save(KEY, _state())
    store.append_chat_message(KEY, "user", "hello")
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", "ok", call_id="c1")])
    store.clear_chat_history(KEY)
    assert store.get_chat_history(KEY) == []
    assert store.get_transcript(KEY) == []
    assert store.try_load(KEY).state == _state()


def test_clear_of_unknown_key_is_harmless(store):
    store.clear(KEY)
    store.clear_chat_history(KEY)
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND
    assert store.get_chat_history(KEY) == []


# -- chat history ----------------------------------------------------------


def test_chat_history_is_oldest_first_with_roles_and_increasing_order(store):
    before = int(time.time())
    for i in range(5):
        store.append_chat_message(KEY, "user" if i % 2 == 0 else "assistant", f"m{i}")
    history = store.get_chat_history(KEY)
    assert [(m.role, m.content) for m in history] == [
        ("user", "m0"), ("assistant", "m1"), ("user", "m2"), ("assistant", "m3"), ("user", "m4"),
    ]
    orders = [m.order for m in history]
    assert orders == sorted(orders) and len(set(orders)) == 5 and orders[0] > 0
    assert all(before <= m.timestamp <= int(time.time()) + 1 for m in history)


@pytest.mark.parametrize(("max_messages", "expected"), [(0, ["m0", "m1", "m2", "m3"]), (2, ["m2", "m3"]),
                                                         (1, ["m3"]), (10, ["m0", "m1", "m2", "m3"])])
def test_max_messages_windows_the_newest(store, max_messages, expected):
    for i in range(4):
        store.append_chat_message(KEY, "user", f"m{i}")
    assert [m.content for m in store.get_chat_history(KEY, max_messages)] == expected


def test_session_only_messages_are_readable_in_process(store):
    store.append_chat_message(KEY, "user", "kept", persist=True)
    store.append_chat_message(KEY, "assistant", "volatile", persist=False)
    assert [m.content for m in store.get_chat_history(KEY)] == ["kept", "volatile"]


def test_persisted_only_leaves_out_rows_appended_with_persist_false(store):
    store.append_chat_message(KEY, "user", "kept")
    store.append_chat_message(KEY, "assistant", "volatile", persist=False)
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", "volatile row")], persist=False)
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", "kept row")])
    everything = store.get_transcript(KEY)
    assert [r.content for r in everything] == ["kept", "volatile", "volatile row", "kept row"]
    orders = [r.order for r in everything]
    assert orders == sorted(orders) and len(set(orders)) == 4  # session rows interleave in order
    assert [r.content for r in store.get_transcript(KEY, persisted_only=True)] == ["kept", "kept row"]
    assert [m.content for m in store.get_chat_history(KEY, persisted_only=True)] == ["kept"]


def test_chat_messages_are_transcript_rows_with_the_chat_flag(store):
    store.append_chat_message(KEY, "user", "hi")
    store.append_chat_message(KEY, "assistant", "hello")
    store.append_chat_message(KEY, "system", "note")
    rows = store.get_transcript(KEY)
    assert [(r.kind, r.name, r.content, r.is_chat_message) for r in rows] == [
        (TranscriptKind.USER, "user", "hi", True),
        (TranscriptKind.ASSISTANT, "assistant", "hello", True),
        (TranscriptKind.USER, "system", "note", True),  # a role that is not assistant is a user row
    ]


# -- transcript ------------------------------------------------------------


def test_transcript_rows_keep_kind_name_call_id_and_chat_flag(store):
    rows = [
        TranscriptEntry(TranscriptKind.USER, "user", "forge me a sword", is_chat_message=True),
        TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", '{"action":"append"}', call_id="call_1"),
        TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", '{"Success":true}', call_id="call_1"),
        TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "Done.", is_chat_message=True),
    ]
    store.append_transcript(KEY, rows)
    got = store.get_transcript(KEY)
    assert [(r.kind, r.name, r.content, r.call_id, r.is_chat_message) for r in got] == [
        (r.kind, r.name, r.content, r.call_id, r.is_chat_message) for r in rows
    ]
    orders = [r.order for r in got]
    assert orders == sorted(orders) and len(set(orders)) == 4
    # Chat-flagged transcript rows are the chat history; tool rows are not.
    assert [(m.role, m.content) for m in store.get_chat_history(KEY)] == [
        ("user", "forge me a sword"), ("assistant", "Done."),
    ]


def test_transcript_keeps_given_timestamps_and_stamps_missing_ones(store):
    before = int(time.time())
    store.append_transcript(KEY, [
        TranscriptEntry(TranscriptKind.USER, "user", "old", timestamp=1_600_000_000, is_chat_message=True),
        TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "now", is_chat_message=True),
    ])
    old, new = store.get_transcript(KEY)
    assert old.timestamp == 1_600_000_000
    assert before <= new.timestamp <= int(time.time()) + 1
    assert store.get_chat_history(KEY)[0].timestamp == 1_600_000_000


def test_max_entries_windows_the_newest(store):
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", f"r{i}") for i in range(5)])
    assert [r.content for r in store.get_transcript(KEY, 2)] == ["r3", "r4"]
    assert len(store.get_transcript(KEY, 0)) == 5


# -- caps ------------------------------------------------------------------


def test_chat_cap_keeps_the_newest_messages(store_factory):
    store = store_factory(chat_cap=3, transcript_cap=50)
    for i in range(40):
        store.append_chat_message(KEY, "user", f"m{i}")
    assert [m.content for m in store.get_chat_history(KEY)] == ["m37", "m38", "m39"]
    assert [m.content for m in store.get_chat_history(KEY, 2)] == ["m38", "m39"]


def test_transcript_cap_keeps_the_newest_rows(store_factory):
    store = store_factory(chat_cap=50, transcript_cap=4)
    for i in range(60):
        store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", f"r{i}")])
    assert [r.content for r in store.get_transcript(KEY)] == ["r56", "r57", "r58", "r59"]


def test_chat_messages_outlive_the_transcript_window(store_factory):
    # A row leaves only when it has left both windows: old chat stays readable as chat.
    store = store_factory(chat_cap=5, transcript_cap=4)
    for i in range(3):
        store.append_chat_message(KEY, "user", f"m{i}")
    for i in range(60):
        store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", f"r{i}")])
    assert [m.content for m in store.get_chat_history(KEY)] == ["m0", "m1", "m2"]
    assert [r.content for r in store.get_transcript(KEY)][-4:] == ["r56", "r57", "r58", "r59"]


# -- summaries -------------------------------------------------------------


def test_summary_store_round_trip_replace_and_clear(summaries):
    assert summaries.load_summary(KEY) is None
    summaries.save_summary(KEY, "Previous conversation summary:\n- user: hi")
    summaries.save_summary(OTHER, "other")
    assert summaries.load_summary(KEY) == "Previous conversation summary:\n- user: hi"
    summaries.save_summary(KEY, "replaced")
    assert summaries.load_summary(KEY) == "replaced"
    summaries.clear_summary(KEY)
    assert summaries.load_summary(KEY) is None
    assert summaries.load_summary(OTHER) == "other"
    summaries.clear_summary(KEY)  # clearing twice is harmless


def test_a_summary_saved_with_persist_false_is_left_out_of_persisted_only(summaries):
    summaries.save_summary(KEY, "session summary", persist=False)
    assert summaries.load_summary(KEY) == "session summary"
    assert summaries.load_summary(KEY, persisted_only=True) is None
    summaries.clear_summary(KEY)
    assert summaries.load_summary(KEY) is None


# -- bad input -------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_key_is_an_error_and_writes_nothing(store, summaries, key):
    calls = [
        lambda: store.save(key, _state()),
        lambda: store.mutate(key, _append_line("x")),
        lambda: store.append_chat_message(key, "user", "x"),
        lambda: store.append_transcript(key, [TranscriptEntry(TranscriptKind.USER, "user", "x")]),
        lambda: store.try_load(key),
        lambda: summaries.save_summary(key, "x"),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError, match="key"):
            call()
    assert store.get_chat_history(KEY) == [] and store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_blank_chat_role_is_an_error(store):
    with pytest.raises(InvalidArgumentError, match="role"):
        store.append_chat_message(KEY, "  ", "x")
    assert store.get_chat_history(KEY) == []


def test_negative_windows_are_errors(store):
    with pytest.raises(InvalidArgumentError, match="max_messages"):
        store.get_chat_history(KEY, -1)
    with pytest.raises(InvalidArgumentError, match="max_entries"):
        store.get_transcript(KEY, -1)


def test_a_bad_transcript_row_appends_nothing(store):
    rows = [TranscriptEntry(TranscriptKind.USER, "user", "fine", is_chat_message=True),
            TranscriptEntry(7, "tool", "bad kind")]  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="kind"):
        store.append_transcript(KEY, rows)
    assert store.get_transcript(KEY) == []


def test_mutation_must_return_a_state(store):
    with pytest.raises(InvalidArgumentError):
        store.mutate(KEY, lambda s: "not a state")
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND
