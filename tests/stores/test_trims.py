"""Trims are visible: each append that pushes rows out of a history window makes one event and one log line,
and the store's callback gets the events after the key's lock is released, in order, once each."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore
from pyruntime.stores.trim_notices import TrimEvent

KEY = "BlacksmithNPC"


@pytest.fixture(params=["file", "in_memory"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """A store of the backend under test with the given caps and trim callback."""

    def make(chat_cap: int, transcript_cap: int, on_trim: Callable[[TrimEvent], None]) -> Any:
        if request.param == "file":
            return FileAgentMemoryStore(tmp_path / "CoreAI", chat_cap=chat_cap, transcript_cap=transcript_cap,
                                        on_trim=on_trim)
        return InMemoryAgentMemoryStore(chat_cap=chat_cap, transcript_cap=transcript_cap, on_trim=on_trim)

    return make


@pytest.mark.parametrize("persist", [True, False])
def test_every_message_pushed_out_of_the_window_is_one_event(make_store, persist):
    events: list[TrimEvent] = []
    store = make_store(2, 100, events.append)
    for i in range(5):
        store.append_chat_message(KEY, "user", f"turn {i}", persist=persist)
    assert events == [TrimEvent(KEY, 1, 2, 2, 0, i, 100, not persist) for i in (3, 4, 5)]


def test_rows_pushed_out_of_the_transcript_window_are_reported_too(make_store):
    events: list[TrimEvent] = []
    store = make_store(10, 3, events.append)
    store.append_chat_message(KEY, "user", "hello")
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_CALL, "craft", "{}", "c1"),
                                  TranscriptEntry(TranscriptKind.TOOL_RESULT, "craft", "ok", "c1"),
                                  TranscriptEntry(TranscriptKind.TOOL_CALL, "craft", "{}", "c2")])
    assert events == [TrimEvent(KEY, 0, 1, 10, 1, 3, 3)]  # one append, one event: the greeting left the transcript
    assert [m.content for m in store.get_chat_history(KEY)] == ["hello"]  # ... but not the chat window


def test_a_callback_reads_and_writes_the_same_key_and_its_own_trims_come_after_it(make_store):
    delivered: list[tuple[int, str, list[str]]] = []
    depth = [0]

    def on_trim(event: TrimEvent) -> None:
        depth[0] += 1
        try:
            seen = [m.content for m in store.get_chat_history(KEY)]  # the key is not locked any more
            delivered.append((depth[0], event.key, seen))
            if len(delivered) == 1:
                store.append_chat_message(KEY, "assistant", "noted")  # trims again: delivered after this returns
        finally:
            depth[0] -= 1

    store = make_store(1, 100, on_trim)
    store.append_chat_message(KEY, "user", "first")
    store.append_chat_message(KEY, "user", "second")
    assert delivered == [(1, KEY, ["second"]), (1, KEY, ["noted"])]  # depth 1: never nested


def test_concurrent_appends_deliver_each_trim_once_and_never_two_callbacks_at_a_time(make_store):
    running, most = [0], [0]
    guard = threading.Lock()
    events: list[TrimEvent] = []

    def on_trim(event: TrimEvent) -> None:
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        events.append(event)
        with guard:
            running[0] -= 1

    store = make_store(10, 1000, on_trim)
    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(store.append_chat_message, KEY, "user", f"m{i}") for i in range(60)]:
            done.result(60)
    assert sum(e.chat_dropped for e in events) == 50 and len(events) == 50
    assert most[0] == 1


def test_a_failing_callback_fails_neither_the_append_nor_later_events(make_store, caplog):
    events: list[TrimEvent] = []

    def on_trim(event: TrimEvent) -> None:
        events.append(event)
        if len(events) == 1:
            raise RuntimeError("the game's callback broke on 'secret player text'")

    store = make_store(1, 100, on_trim)
    with caplog.at_level(logging.WARNING, logger="pyruntime.stores"):
        for text in ("a", "b", "c"):
            store.append_chat_message(KEY, "user", text)
    assert len(events) == 2 and [m.content for m in store.get_chat_history(KEY)] == ["c"]
    assert "RuntimeError" in caplog.text and "secret" not in caplog.text


def test_the_log_names_counts_and_caps_never_the_key_or_content(make_store, caplog):
    store = make_store(1, 100, lambda event: None)
    with caplog.at_level(logging.INFO, logger="pyruntime.stores"):
        for i in range(3):
            store.append_chat_message(KEY, "user", f"PRIVATE {i}", persist=False)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "reached its cap" in r.getMessage()]
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]  # the note's cap warns once, then info
    assert all("left the window of 1" in text and "session-only" in text for _, text in lines)
    assert KEY not in caplog.text and "PRIVATE" not in caplog.text
