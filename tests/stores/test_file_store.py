"""FileAgentMemoryStore / FileConversationSummaryStore on real files: layout, caps, overlay, migration, logs."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError, UnsafeKeyError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import LoadStatus, TranscriptEntry, TranscriptKind
from pyruntime.stores.file_layout import decode_memory_document, file_stem, parse_history
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore, TrimEvent
from tests.support.loads import loaded

GOLDEN = Path(__file__).parent / "golden"
KEY = "Teacher"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def rows_of(path: Path):
    parsed = parse_history(path.read_bytes())
    assert parsed.skipped == 0 and not parsed.torn_tail
    return parsed.rows


# -- layout on disk ----------------------------------------------------------


def test_save_writes_the_golden_memory_document(root):
    from tests.stores.test_file_layout import GOLDEN_STATE

    store = FileAgentMemoryStore(root)
    store.save(KEY, GOLDEN_STATE)
    assert (root / "AgentMemory" / "Teacher.json").read_bytes() == (GOLDEN / "Teacher.json").read_bytes()


def test_transcript_appends_write_the_golden_history_file(root):
    store = FileAgentMemoryStore(root)
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.USER, "user", "Hallo, Lehrerin ✏", None, 1_700_000_000,
                                                  is_chat_message=True)])
    store.append_transcript(
        KEY,
        [
            TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", '{"action":"append","content":"likes swords"}',
                            "call_1", 1_700_000_001),
            TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", "DONE: appended", "call_1", 1_700_000_002),
        ],
    )
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "Gut!\n\tWie geht's?", None,
                                                  1_700_000_003, is_chat_message=True)])
    history_file = root / "AgentMemory" / "Teacher.history.jsonl"
    assert history_file.read_bytes() == (GOLDEN / "Teacher.history.jsonl").read_bytes()
    assert [m.content for m in store.get_chat_history(KEY)] == ["Hallo, Lehrerin ✏", "Gut!\n\tWie geht's?"]


def test_summary_store_writes_the_golden_file(root):
    summaries = FileConversationSummaryStore(root)
    summaries.save_summary("A/B", "Previous conversation summary:\n- user: hi ✓")
    path = root / "ConversationSummaries" / f"{file_stem('A/B')}.json"
    assert path.read_bytes() == (GOLDEN / "summary.json").read_bytes()
    assert FileConversationSummaryStore(root).load_summary("A/B") == "Previous conversation summary:\n- user: hi ✓"
    summaries.clear_summary("A/B")
    assert not path.exists() and summaries.load_summary("A/B") is None


def test_chat_rows_carry_kind_role_time_order_and_chat_flag(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "hi")
    store.append_chat_message(KEY, "Assistant", "hello")
    store.append_chat_message(KEY, "system", "note")
    lines = [json.loads(line) for line in store.history_path(KEY).read_text("utf-8").splitlines()]
    assert [(r["k"], r["r"], r["c"], r["o"], r["m"]) for r in lines] == [
        (0, "user", "hi", 1, True),
        (1, "Assistant", "hello", 2, True),
        (0, "system", "note", 3, True),
    ]
    assert all(isinstance(r["t"], int) and r["t"] > 1_600_000_000 and "id" not in r for r in lines)


def test_lock_files_stay_out_of_the_data_folder(root):
    store = FileAgentMemoryStore(root)
    store.save(KEY, AgentMemoryState(memory="m"))
    store.append_chat_message(KEY, "user", "hi")
    assert sorted(os.listdir(root / "AgentMemory")) == ["Teacher.history.jsonl", "Teacher.json"]


def test_keys_with_unsafe_characters_live_under_their_stem(root):
    store = FileAgentMemoryStore(root)
    store.save("A/B", AgentMemoryState(memory="ab"))
    assert (root / "AgentMemory" / f"{file_stem('A/B')}.json").exists()
    assert loaded(store.try_load("A/B")).memory == "ab"
    assert store.try_load("A_B").status is LoadStatus.NOT_FOUND


# -- appends are O(1) and leave <stem>.json alone -----------------------------


def test_appends_only_grow_the_history_file_and_never_touch_the_memory_document(root):
    store = FileAgentMemoryStore(root)
    store.save(KEY, AgentMemoryState(memory="m"))
    memory_stat = os.stat(store.memory_path(KEY))
    previous = b""
    for i in range(40):
        store.append_chat_message(KEY, "user", f"message {i}")
        data = store.history_path(KEY).read_bytes()
        assert data.startswith(previous) and data.count(b"\n") == i + 1
        previous = data
    after = os.stat(store.memory_path(KEY))
    assert (after.st_ino, after.st_mtime_ns) == (memory_stat.st_ino, memory_stat.st_mtime_ns)
    assert store.stats.history_rewrites == 0 and store.stats.history_appends == 40


def test_another_store_sees_appends_without_rereading_everything(root):
    writer, reader = FileAgentMemoryStore(root), FileAgentMemoryStore(root)
    writer.append_chat_message(KEY, "user", "one")
    assert [m.content for m in reader.get_chat_history(KEY)] == ["one"]
    writer.append_chat_message(KEY, "assistant", "two")
    reader.append_chat_message(KEY, "user", "three")
    assert [(m.content, m.order) for m in writer.get_chat_history(KEY)] == [("one", 1), ("two", 2), ("three", 3)]


# -- caps and lazy rewrite -----------------------------------------------------


def tool_row(i: int) -> TranscriptEntry:
    return TranscriptEntry(TranscriptKind.TOOL_RESULT, "lookup", f"result {i}", f"call_{i}")


def test_history_is_rewritten_only_after_enough_stale_rows(root):
    events: list[TrimEvent] = []
    store = FileAgentMemoryStore(root, chat_cap=3, transcript_cap=16, on_trim=events.append)
    assert store.rewrite_threshold == 16
    inodes = set()
    for i in range(32):  # 32 rows, 16 stale (not more than the threshold): still appends only
        store.append_transcript(KEY, [tool_row(i)])
        inodes.add(os.stat(store.history_path(KEY)).st_ino)
    assert len(inodes) == 1 and store.stats.history_rewrites == 0
    assert len(rows_of(store.history_path(KEY))) == 32
    assert [e.content for e in store.get_transcript(KEY)] == [f"result {i}" for i in range(16, 32)]

    store.append_transcript(KEY, [tool_row(32)])  # 17 stale rows, past the threshold: one rewrite
    assert os.stat(store.history_path(KEY)).st_ino not in inodes
    assert store.stats.history_rewrites == 1
    assert [r.content for r in rows_of(store.history_path(KEY))] == [f"result {i}" for i in range(17, 33)]
    # One trim per append that pushed a row out of the transcript window; the rewrite itself reports none.
    assert events == [TrimEvent(KEY, chat_dropped=0, chat_kept=0, chat_cap=3, transcript_dropped=1,
                                transcript_kept=16, transcript_cap=16)] * 17
    assert store.stats.trims == 17 and store.stats.rows_dropped == 17


def test_default_threshold_is_an_eighth_of_the_transcript_cap(root):
    assert FileAgentMemoryStore(root).rewrite_threshold == 250
    assert FileAgentMemoryStore(root, transcript_cap=100).rewrite_threshold == 16


def test_a_row_leaves_the_file_only_when_out_of_both_windows(root):
    store = FileAgentMemoryStore(root, chat_cap=2, transcript_cap=16)
    store.append_chat_message(KEY, "user", "old chat")
    for i in range(40):
        store.append_transcript(KEY, [tool_row(i)])
    # The chat message left the transcript window long ago but is still in the chat window.
    assert store.stats.history_rewrites >= 1
    contents = [r.content for r in rows_of(store.history_path(KEY))]
    assert contents[0] == "old chat"
    reopened = FileAgentMemoryStore(root, chat_cap=2, transcript_cap=16)
    assert [m.content for m in reopened.get_chat_history(KEY)] == ["old chat"]

    store.append_chat_message(KEY, "user", "newer 1")
    store.append_chat_message(KEY, "user", "newer 2")  # "old chat" leaves the chat window now
    for i in range(40, 80):
        store.append_transcript(KEY, [tool_row(i)])
    contents = [r.content for r in rows_of(store.history_path(KEY))]
    assert "old chat" not in contents and "newer 1" in contents and "newer 2" in contents
    assert [m.content for m in store.get_chat_history(KEY)] == ["newer 1", "newer 2"]


def test_chat_cap_windows_reads_before_the_file_is_trimmed(root):
    store = FileAgentMemoryStore(root, chat_cap=5, transcript_cap=200)
    for i in range(12):
        store.append_chat_message(KEY, "user", f"m{i}")
    assert store.stats.history_rewrites == 0  # only 7 stale rows
    assert [m.content for m in store.get_chat_history(KEY)] == [f"m{i}" for i in range(7, 12)]
    assert [m.content for m in store.get_chat_history(KEY, 2)] == ["m10", "m11"]


def test_trimming_warns_once_then_logs_each_trim_with_counts_and_caps_only(root, caplog):
    store = FileAgentMemoryStore(root, chat_cap=1, transcript_cap=16)
    with caplog.at_level(logging.INFO, logger="pyruntime.stores"):
        for i in range(33):
            store.append_transcript(KEY, [tool_row(i)])
    trims = [(r.levelno, r.getMessage()) for r in caplog.records if "reached its cap" in r.getMessage()]
    line = ("History reached its cap: 0 chat message(s) left the window of 1 (0 kept), 1 row(s) left the transcript "
            "window of 16 (16 kept)")
    assert trims == [(logging.WARNING, line)] + [(logging.INFO, line)] * 16


# -- persist=False ---------------------------------------------------------------


def test_unpersisted_messages_never_reach_a_file_even_on_rewrites(root):
    store = FileAgentMemoryStore(root, chat_cap=50, transcript_cap=16)
    store.append_chat_message(KEY, "user", "kept 1")
    store.append_chat_message(KEY, "user", "PRIVATE 1", persist=False)
    store.append_chat_message(KEY, "assistant", "kept 2")
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_CALL, "t", "PRIVATE 2", "c")], persist=False)
    for i in range(40):  # forces rewrites
        store.append_transcript(KEY, [tool_row(i)])
    assert store.stats.history_rewrites >= 1
    history = store.history_path(KEY).read_bytes()
    assert b"PRIVATE" not in history
    assert [m.content for m in store.get_chat_history(KEY)] == ["kept 1", "PRIVATE 1", "kept 2"]
    orders = [m.order for m in store.get_chat_history(KEY)]
    assert orders == sorted(orders) and len(set(orders)) == 3
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["kept 1", "kept 2"]

    store.clear_chat_history(KEY)
    assert store.get_chat_history(KEY) == [] and store.get_transcript(KEY) == []


def test_unpersisted_messages_alone_create_no_file(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "only here", persist=False)
    assert not store.history_path(KEY).exists()
    assert [m.content for m in store.get_chat_history(KEY)] == ["only here"]


# -- clear -----------------------------------------------------------------------


def test_clear_deletes_only_the_memory_document(root):
    store = FileAgentMemoryStore(root)
    store.save(KEY, AgentMemoryState(memory="m"))
    store.append_chat_message(KEY, "user", "hi")
    store.clear(KEY)
    assert not store.memory_path(KEY).exists() and store.history_path(KEY).exists()
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_clear_chat_history_deletes_the_history_file_only(root):
    store = FileAgentMemoryStore(root)
    store.save(KEY, AgentMemoryState(memory="m"))
    store.append_chat_message(KEY, "user", "hi")
    store.clear_chat_history(KEY)
    assert not store.history_path(KEY).exists() and store.memory_path(KEY).exists()
    store.append_chat_message(KEY, "user", "again")
    # Orders go on after a clear (as in the PostgreSQL store): no cleared row's order is handed out again.
    assert [(m.content, m.order) for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == [("again", 2)]


# -- bad input writes nothing ----------------------------------------------------------


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_keys_write_nothing(root, key):
    store = FileAgentMemoryStore(root)
    calls = [
        lambda: store.save(key, AgentMemoryState(memory="m")),
        lambda: store.mutate(key, lambda s: s.evolve(memory="m")),
        lambda: store.append_chat_message(key, "user", "hi"),
        lambda: store.append_transcript(key, [tool_row(0)]),
        lambda: store.clear(key),
        lambda: FileConversationSummaryStore(root).save_summary(key, "s"),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError):
            call()
    assert not root.exists()


@pytest.mark.parametrize("key", [".", ".."])
def test_keys_outside_the_root_are_refused(root, key):
    store = FileAgentMemoryStore(root)
    with pytest.raises(UnsafeKeyError):
        store.save(key, AgentMemoryState(memory="m"))
    with pytest.raises(UnsafeKeyError):
        store.append_chat_message(key, "user", "hi")
    assert not root.exists()


def test_malformed_arguments_are_refused(root):
    store = FileAgentMemoryStore(root)
    with pytest.raises(InvalidArgumentError, match="role"):
        store.append_chat_message(KEY, " ", "hi")
    with pytest.raises(InvalidArgumentError, match="max_messages"):
        store.get_chat_history(KEY, -1)
    with pytest.raises(InvalidArgumentError, match="chat_cap"):
        FileAgentMemoryStore(root, chat_cap=0)
    assert not store.history_path(KEY).exists()


# -- legacy migration -------------------------------------------------------------------


def install_legacy(root: Path) -> Path:
    folder = root / "AgentMemory"
    folder.mkdir(parents=True)
    path = folder / "Teacher.json"
    shutil.copy(GOLDEN / "legacy_Teacher.json", path)
    return path


def test_legacy_conversation_is_migrated_on_first_touch_without_loss(root):
    path = install_legacy(root)
    store = FileAgentMemoryStore(root)
    history = store.get_chat_history(KEY)
    assert [(m.role, m.content, m.timestamp) for m in history] == [
        ("user", "hello", 1_700_000_000),
        ("assistant", "hi there", 1_700_000_005),
        ("user", "bye", 1_700_000_009),
    ]
    transcript = store.get_transcript(KEY)
    assert [(e.kind, e.name, e.content, e.call_id) for e in transcript] == [
        (TranscriptKind.USER, "user", "hello", None),
        (TranscriptKind.TOOL_CALL, "memory", "{}", "c1"),
        (TranscriptKind.TOOL_RESULT, "memory", "DONE", "c1"),
        (TranscriptKind.ASSISTANT, "assistant", "hi there", None),
        (TranscriptKind.USER, "user", "bye", None),
    ]
    document = json.loads(path.read_bytes())
    assert document["chatHistoryJson"] == "" and document["transcriptEntriesJson"] == ""
    assert document["memory"] == "likes swords"
    assert store.stats.legacy_migrations == 1
    # New rows follow the migrated ones; a second store does not migrate again.
    store.append_chat_message(KEY, "user", "new")
    again = FileAgentMemoryStore(root)
    assert [m.content for m in again.get_chat_history(KEY)] == ["hello", "hi there", "bye", "new"]
    assert again.stats.legacy_migrations == 0


def test_a_mutation_first_touch_keeps_the_legacy_conversation(root):
    install_legacy(root)
    store = FileAgentMemoryStore(root)
    after = store.mutate(KEY, lambda s: s.evolve(memory=s.memory + "\nhates bows"))
    assert after.memory == "likes swords\nhates bows"
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["hello", "hi there", "bye"]


def test_migration_interrupted_between_its_two_writes_adds_rows_once(root):
    path = install_legacy(root)
    FileAgentMemoryStore(root).get_chat_history(KEY)
    shutil.copy(GOLDEN / "legacy_Teacher.json", path)  # as if the crash came before <stem>.json was rewritten
    assert len(FileAgentMemoryStore(root).get_transcript(KEY)) == 5


def test_clear_chat_history_also_removes_a_legacy_conversation(root):
    install_legacy(root)
    store = FileAgentMemoryStore(root)
    store.clear_chat_history(KEY)
    assert FileAgentMemoryStore(root).get_chat_history(KEY) == []
    assert loaded(FileAgentMemoryStore(root).try_load(KEY)).memory == "likes swords"


# -- logs carry no personal data ---------------------------------------------------------


def test_logs_never_name_keys_stems_or_content(root, caplog):
    key = "SecretRole/Ärger"
    stem = file_stem(key)
    store = FileAgentMemoryStore(root, chat_cap=1, transcript_cap=16)
    with caplog.at_level(logging.DEBUG):
        store.save(key, AgentMemoryState(memory="SECRETMEMORY"))
        for i in range(40):
            store.append_chat_message(key, "user", f"SECRETCONTENT {i}")
        with store.history_path(key).open("ab") as f:
            f.write(b'{"k":0,"r":"user","c":"SECRETTORN')
        FileAgentMemoryStore(root).get_chat_history(key)
        store.memory_path(key).write_bytes(b'{"memory":"SECRETBROKEN')
        assert "SECRET" not in (store.try_load(key).reason or "")
        store.clear(key)
        legacy = {"memory": "x", "chatHistoryJson": json.dumps([{"role": "user", "content": "SECRETLEGACY"}])}
        store.memory_path(key).write_text(json.dumps(legacy))
        FileAgentMemoryStore(root).get_chat_history(key)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) >= 4  # trim, skipped line, unreadable removed, migration
    for message in messages:
        assert "SECRET" not in message and "Ärger" not in message and stem not in message


def test_versions_survive_a_round_trip_through_the_file(root):
    store = FileAgentMemoryStore(root)
    state = AgentMemoryState(memory="b", versions=(MemoryVersion(1, 5, "write", "a", "n1"),
                                                   MemoryVersion(2, 6, "append", "b", "n2")))
    store.save(KEY, state)
    assert decode_memory_document(store.memory_path(KEY).read_bytes()).state == state
    assert FileAgentMemoryStore(root).try_load(KEY).state == state


def test_millisecond_timestamps_are_stored_as_seconds(root):
    store = FileAgentMemoryStore(root)
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.USER, "user", "x", timestamp=1_700_000_000_999)])
    assert json.loads(store.history_path(KEY).read_text("utf-8"))["t"] == 1_700_000_000
