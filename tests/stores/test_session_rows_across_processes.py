"""Session-only rows (persist=False) among the rows of other processes on the same save folder: ordered by when
they were appended, and removed by a clear from any of them (the key's shared order counter, `order_counter`)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.stores.order_counter import counter_path

KEY = "BlacksmithNPC"
REPO = Path(__file__).resolve().parents[2]

PEER = """
import sys
from pathlib import Path
from pyruntime.stores.file_store import FileAgentMemoryStore
store = FileAgentMemoryStore(Path(sys.argv[1]))
if sys.argv[2] == "append":
    store.append_chat_message(sys.argv[3], "user", sys.argv[4])
else:
    store.clear_chat_history(sys.argv[3])
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def peer(root: Path, *args: str) -> None:
    """Another game process (or the editor) on the same save folder, doing one thing."""
    subprocess.run([sys.executable, "-c", PEER, str(root), *args], check=True, timeout=120, cwd=REPO)


def test_a_session_row_sorts_before_a_later_row_of_another_process(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "saved")
    store.append_chat_message(KEY, "assistant", "this process only", persist=False)
    peer(root, "append", KEY, "from the other process")
    store.append_chat_message(KEY, "user", "mine again", persist=False)
    history = store.get_chat_history(KEY)
    assert [m.content for m in history] == ["saved", "this process only", "from the other process", "mine again"]
    assert [m.order for m in history] == sorted(m.order for m in history) and len({m.order for m in history}) == 4
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["saved", "from the other process"]


def test_a_clear_in_another_process_removes_this_process_session_rows(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "saved")
    store.append_chat_message(KEY, "assistant", "this process only", persist=False)
    peer(root, "clear", KEY)
    assert store.get_chat_history(KEY) == [] and store.get_transcript(KEY) == []
    store.append_chat_message(KEY, "user", "after the clear", persist=False)
    peer(root, "append", KEY, "saved after the clear")
    assert [m.content for m in store.get_chat_history(KEY)] == ["after the clear", "saved after the clear"]


def test_the_counter_holds_no_content_and_a_damaged_one_orders_persisted_rows_still(root, caplog):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "SECRET session line", persist=False)
    assert not any(b"SECRET" in p.read_bytes() for p in root.rglob("*") if p.is_file())
    with store._keys.locked(KEY) as ks:  # where this key's counter lives
        counter = counter_path(ks.lock_path)
    record = counter.read_bytes()
    assert len(record) == 64 and (json.loads(record)["o"], json.loads(record)["c"]) == (1, 0)

    counter.write_bytes(b"\x00garbage")
    with caplog.at_level(logging.WARNING, logger="pyruntime.stores"):
        store.append_chat_message(KEY, "user", "saved 1")
        store.append_chat_message(KEY, "user", "saved 2")
    assert "order counter is damaged" in caplog.text
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["saved 1", "saved 2"]


def test_a_half_written_counter_reads_as_damaged_not_as_other_numbers(root, caplog):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "one", persist=False)
    store.append_chat_message(KEY, "user", "two", persist=False)
    with store._keys.locked(KEY) as ks:  # where this key's counter lives
        counter = counter_path(ks.lock_path)
    record = counter.read_bytes()
    # A record whose numbers were torn between two writes (the cleared-through value of another one).
    counter.write_bytes(record.replace(b'"c":0', b'"c":1'))
    with caplog.at_level(logging.WARNING, logger="pyruntime.stores"):
        assert [m.content for m in store.get_chat_history(KEY)] == ["one", "two"]  # nothing taken as cleared
    assert "damaged" in caplog.text
