"""The `memory` tool against the real file store: durable edits, a failed write, an unreadable document."""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pyruntime.errors import MemoryUnreadableError
from pyruntime.memory import MemoryTool, diff_versions, list_versions, revert_memory
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.file_store import FileAgentMemoryStore
from tests.support.loads import loaded

from .conftest import KEY, StepClock

EVERY_ACTION: list[dict[str, Any]] = [
    {"action": "read"},
    {"action": "write", "content": "new"},
    {"action": "append", "content": "more"},
    {"action": "clear"},
    {"action": "str_replace", "old_text": "a", "new_text": "b"},
    {"action": "insert", "content": "x", "line": 1},
    {"action": "delete", "old_text": "a"},
    {"action": "rename", "old_text": "a", "new_text": "b"},
]


@pytest.fixture
def file_store(tmp_path: Path) -> FileAgentMemoryStore:
    return FileAgentMemoryStore(tmp_path)


@contextmanager
def file_size_limit(max_bytes: int) -> Iterator[None]:
    """Make the OS refuse to grow any file past max_bytes (EFBIG): a real failed write, even as root."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_edits_are_on_disk_when_the_call_returns(file_store: FileAgentMemoryStore, tmp_path: Path) -> None:
    tool = MemoryTool(file_store, KEY, clock=StepClock())
    assert tool.execute({"action": "write", "content": "Crafts: Iron Blade"}).success
    assert tool.execute({"action": "rename", "old_text": "Crafts", "new_text": "Items"}).success
    reopened = FileAgentMemoryStore(tmp_path)
    assert loaded(reopened.try_load(KEY)).memory == "Items: Iron Blade"
    assert [(v.version, v.action) for v in list_versions(reopened, KEY)] == [(1, "write"), (2, "rename")]
    assert revert_memory(reopened, KEY, 1).memory == "Crafts: Iron Blade"
    assert loaded(FileAgentMemoryStore(tmp_path).try_load(KEY)).latest_version == 3


def test_a_write_that_does_not_become_durable_is_a_failure(file_store: FileAgentMemoryStore) -> None:
    tool = MemoryTool(file_store, KEY, max_memory_chars=0, clock=StepClock())
    assert tool.execute({"action": "write", "content": "small fact"}).success
    path = file_store.memory_path(KEY)
    before = path.read_bytes()
    with file_size_limit(4096):
        result = tool.execute({"action": "append", "content": "x" * 20_000})
    assert result.success is False and result.error is not None
    assert result.error.startswith("the change could not be saved (PersistenceError")
    assert result.error.endswith("nothing was changed")
    assert (result.version, result.memory_length, result.memory) == (1, 10, None)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left behind
    assert tool.execute({"action": "read"}).memory == "small fact"


def test_an_unreadable_document_fails_every_action_and_stays_byte_identical(
        file_store: FileAgentMemoryStore) -> None:
    path = file_store.memory_path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    garbage = b'{"memory": "a half-written docu'
    path.write_bytes(garbage)
    assert file_store.try_load(KEY).status is LoadStatus.FAILED
    tool = MemoryTool(file_store, KEY)
    for arguments in EVERY_ACTION:
        result = tool.execute(arguments)
        assert result.success is False and result.error is not None, arguments
        assert result.error.startswith("memory could not be read"), arguments
        assert "empty" not in result.error and "DONE" not in result.to_json()
        assert path.read_bytes() == garbage, arguments
    failed_revert = revert_memory(file_store, KEY, 1)
    assert failed_revert.success is False and failed_revert.error is not None
    assert failed_revert.error.startswith("cannot revert: memory could not be read")
    with pytest.raises(MemoryUnreadableError):
        list_versions(file_store, KEY)
    with pytest.raises(MemoryUnreadableError):
        diff_versions(file_store, KEY, 0, 1)
    assert path.read_bytes() == garbage
