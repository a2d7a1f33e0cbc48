"""Recording rules: tool results per ToolResultMemory, the hint once, persistence, no reply without its hint."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from pyruntime.errors import PersistenceError
from pyruntime.policy import ToolResultMemory
from pyruntime.stores import AgentMemoryPersistenceMode, TranscriptKind, open_stores
from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.turns.recording import TurnRecord, record_turn, recorded_result, truncate_middle, turn_rows
from pyruntime.turns.rounds.rules import CallOutcome, ExecutedCall

OK = ExecutedCall("c1", "roll", '{"sides":6}', CallOutcome(True, "x" * 300, "rolled a " + "6" * 300))
BAD = ExecutedCall("c2", "roll", '{"sides":5}', CallOutcome(False, "bad sides", "bad sides"))


def test_modes_keep_what_they_promise() -> None:
    assert recorded_result(OK, ToolResultMemory.NONE) is None
    assert recorded_result(OK, ToolResultMemory.ERRORS_ONLY) is None
    bad = recorded_result(BAD, ToolResultMemory.ERRORS_ONLY)
    assert bad is not None and bad.line == "roll (error): bad sides"
    compact = recorded_result(OK, ToolResultMemory.COMPACT_SUMMARY)
    assert compact is not None and compact.line.startswith("roll (ok): rolled a 666")
    assert compact.line.endswith("…[+80 chars]") and compact.chars_dropped == 80  # 320 chars, 240 kept
    full = recorded_result(ExecutedCall("c", "t", "{}", CallOutcome(True, "a" * 1500 + "b" * 1500, "")),
                           ToolResultMemory.FULL)
    assert full is not None and full.transcript_content == "a" * 1000 + "...[truncated 1000 chars]..." + "b" * 1000
    assert truncate_middle("short") == ("short", 0)


def test_turn_rows_and_persistence(tmp_path: Path) -> None:
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    scoped = stores.scoped()
    record = TurnRecord("hello", [[OK, BAD]], "<think>hmm</think>Hi there")
    record_turn(scoped, "Smith", record, ToolResultMemory.ERRORS_ONLY, persist=True)
    chat = [(m.role, m.content) for m in scoped.get_chat_history("Smith")]
    assert chat == [("user", "hello"), ("tool", "Tool results:\nroll (error): bad sides"), ("assistant", "Hi there")]
    rows = [(r.kind, r.name, r.call_id) for r in scoped.get_transcript("Smith") if not r.is_chat_message]
    assert rows == [(TranscriptKind.TOOL_CALL, "roll", "c1"), (TranscriptKind.TOOL_CALL, "roll", "c2"),
                    (TranscriptKind.TOOL_RESULT, "roll", "c2")]
    history_file = tmp_path / "CoreAI" / "AgentMemory" / "Smith.history.jsonl"
    lines = [json.loads(x) for x in history_file.read_text().splitlines()]
    assert [x["k"] for x in lines] == [0, 2, 2, 3, 0, 1]

    record_turn(scoped, "Temp", TurnRecord("hi", (), "yo"), ToolResultMemory.FULL, persist=False)
    assert [m.content for m in scoped.get_chat_history("Temp")] == ["hi", "yo"]
    assert not (tmp_path / "CoreAI" / "AgentMemory" / "Temp.history.jsonl").exists()


def test_no_reply_without_hint_and_failed_turn_keeps_only_the_hint() -> None:
    scoped = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None).scoped()
    record_turn(scoped, "R", TurnRecord("", (), "orphan"), ToolResultMemory.FULL, persist=True)
    assert scoped.get_chat_history("R") == []
    record_turn(scoped, "R", TurnRecord("asked", (), None), ToolResultMemory.FULL, persist=True)
    assert [(m.role, m.content) for m in scoped.get_chat_history("R")] == [("user", "asked")]


def test_a_turn_is_one_durable_append_of_every_row(tmp_path: Path) -> None:
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    record_turn(stores.scoped(), "Smith", TurnRecord("hello", [[OK], [BAD]], "done"), ToolResultMemory.FULL,
                persist=True)
    assert isinstance(stores.memory, FileAgentMemoryStore) and stores.memory.stats.history_appends == 1
    rows = turn_rows(TurnRecord("hello", [[OK], [BAD]], "done"), ToolResultMemory.FULL).rows
    stored = stores.scoped().get_transcript("Smith")
    assert [(r.kind, r.name, r.content, r.is_chat_message) for r in stored] == [
        (r.kind, r.name, r.content, r.is_chat_message) for r in rows
    ]
    assert [r.name for r in rows] == ["user", "roll", "roll", "tool", "roll", "roll", "tool", "assistant"]


def test_when_the_batch_cannot_be_written_the_hint_alone_is_kept(tmp_path: Path, monkeypatch) -> None:
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    real_fsync = os.fsync
    failures: list[int] = []

    def fsync_failing_once(fd: int) -> None:
        if not failures:  # the first durable write of the turn (the whole batch) does not become durable
            failures.append(fd)
            raise OSError(errno.EIO, "injected I/O error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_failing_once)
    with pytest.raises(PersistenceError):
        record_turn(stores.scoped(), "Smith", TurnRecord("hello", [[OK]], "Hi there"), ToolResultMemory.FULL,
                    persist=True)
    monkeypatch.undo()
    assert failures, "the injected fault was hit"
    # The failed append left nothing behind; the hint went in on its own, exactly once, with no reply.
    assert [(m.role, m.content) for m in stores.scoped().get_chat_history("Smith")] == [("user", "hello")]
    assert [r.content for r in stores.scoped().get_transcript("Smith")] == ["hello"]


def test_an_empty_or_reasoning_only_reply_is_recorded_as_an_empty_assistant_message(tmp_path: Path) -> None:
    # Failed before: no assistant row, so two user messages followed each other in the history.
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    scoped = stores.scoped()
    record_turn(scoped, "Smith", TurnRecord("hello", (), ""), ToolResultMemory.FULL, persist=True)
    record_turn(scoped, "Smith", TurnRecord("again", (), "<think>only thoughts</think>"), ToolResultMemory.FULL,
                persist=True)
    chat = [(m.role, m.content) for m in scoped.get_chat_history("Smith")]
    assert chat == [("user", "hello"), ("assistant", ""), ("user", "again"), ("assistant", "")]
    reopened = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path).scoped()
    assert [(m.role, m.content) for m in reopened.get_chat_history("Smith")] == chat  # survives the file round trip
