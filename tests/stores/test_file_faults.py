"""Faults and concurrency of the file store on real files: corruption, torn lines, failed fsyncs, SIGKILL, races."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pyruntime.errors import MemoryUnreadableError, PersistenceError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.file_layout import decode_memory_document, parse_history
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore
from tests.support.loads import loaded

KEY = "Teacher"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under folder with its bytes (to prove that nothing changed)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def data_files(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".locks")}


def add_line(line: str):
    """A mutation that appends a line and records a version, like the memory tool does."""

    def fn(state: AgentMemoryState) -> AgentMemoryState:
        memory = f"{state.memory}\n{line}" if state.memory else line
        version = MemoryVersion(state.latest_version + 1, 1_700_000_000, "append", memory, "n")
        return state.evolve(memory=memory, versions=state.versions + (version,), max_memory_versions=100000)

    return fn


# -- an unreadable <stem>.json --------------------------------------------------------


def test_corrupt_memory_document_fails_to_load_and_is_never_overwritten(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "hi")
    path = store.memory_path(KEY)
    corrupt = b'{"memory":"private notes about the play'
    path.write_bytes(corrupt)

    result = store.try_load(KEY)
    assert result.status is LoadStatus.FAILED and result.reason and "private" not in result.reason
    with pytest.raises(MemoryUnreadableError):
        store.mutate(KEY, add_line("x"))
    assert path.read_bytes() == corrupt
    assert [m.content for m in store.get_chat_history(KEY)] == ["hi"]  # history unaffected

    store.save(KEY, AgentMemoryState(memory="healed"))
    assert loaded(store.try_load(KEY)).memory == "healed"


def test_clear_removes_a_corrupt_memory_document_with_a_warning(root, caplog):
    store = FileAgentMemoryStore(root)
    store.memory_path(KEY).parent.mkdir(parents=True)
    store.memory_path(KEY).write_bytes(b"\x00\x01garbage")
    store.clear(KEY)
    assert not store.memory_path(KEY).exists()
    assert any("unreadable" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert store.mutate(KEY, add_line("fresh")).memory == "fresh"


# -- torn history lines ----------------------------------------------------------------


def test_torn_tail_is_skipped_and_repaired_on_the_next_write(root, caplog):
    store = FileAgentMemoryStore(root)
    for i in range(3):
        store.append_chat_message(KEY, "user", f"m{i}")
    path = store.history_path(KEY)
    with path.open("ab") as f:
        f.write(b'{"k":0,"r":"user","c":"half a li')
    inode = os.stat(path).st_ino

    reader = FileAgentMemoryStore(root)
    assert [m.content for m in reader.get_chat_history(KEY)] == ["m0", "m1", "m2"]
    assert any("skipped 1 unreadable line" in r.getMessage() for r in caplog.records)
    assert os.stat(path).st_ino == inode  # reading does not write

    reader.append_chat_message(KEY, "assistant", "m3")
    assert os.stat(path).st_ino != inode
    parsed = parse_history(path.read_bytes())
    assert parsed.skipped == 0 and not parsed.torn_tail
    assert [r.content for r in parsed.rows] == ["m0", "m1", "m2", "m3"]
    # The store that wrote before the tear notices the rewrite too.
    store.append_chat_message(KEY, "user", "m4")
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["m0", "m1", "m2", "m3", "m4"]


def test_corrupt_middle_line_is_skipped_and_dropped_on_rewrite(root):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "a")
    path = store.history_path(KEY)
    with path.open("ab") as f:
        f.write(b"not json at all\n")
    other = FileAgentMemoryStore(root)
    other.append_chat_message(KEY, "user", "b")
    assert path.read_bytes().count(b"\n") == 2 and b"not json" not in path.read_bytes()
    assert [m.content for m in store.get_chat_history(KEY)] == ["a", "b"]


# -- failed durable writes change nothing --------------------------------------------------


def failing_fsync(monkeypatch, *, only_dirs: bool = False):
    real = os.fsync

    def fsync(fd):
        if not only_dirs or stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "injected I/O error")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_failed_fsync_of_a_mutation_raises_and_changes_nothing(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.mutate(KEY, add_line("one"))
    before = data_files(root)
    failing_fsync(monkeypatch)
    with pytest.raises(PersistenceError):
        store.mutate(KEY, add_line("two"))
    monkeypatch.undo()
    assert data_files(root) == before
    assert loaded(store.try_load(KEY)).memory == "one"


def test_failed_directory_fsync_puts_the_old_document_back(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.mutate(KEY, add_line("one"))
    before = data_files(root)
    failing_fsync(monkeypatch, only_dirs=True)
    with pytest.raises(PersistenceError):
        store.mutate(KEY, add_line("two"))
    with pytest.raises(PersistenceError):
        store.save("Other", AgentMemoryState(memory="new"))
    monkeypatch.undo()
    assert data_files(root) == before


def test_failed_fsync_of_an_append_truncates_back(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "kept")
    before = data_files(root)
    failing_fsync(monkeypatch)
    with pytest.raises(PersistenceError):
        store.append_chat_message(KEY, "user", "lost")
    with pytest.raises(PersistenceError):
        store.append_chat_message("NewKey", "user", "lost")
    monkeypatch.undo()
    assert data_files(root) == before
    assert [m.content for m in store.get_chat_history(KEY)] == ["kept"]
    store.append_chat_message(KEY, "user", "next")
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["kept", "next"]


def test_append_failing_part_way_leaves_the_file_as_it_was(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "kept")
    before = store.history_path(KEY).read_bytes()
    real_write = os.write
    calls = []

    def short_then_fail(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:7]))  # a partial write...
        raise OSError(errno.ENOSPC, "injected: disk full")  # ...then the disk is full

    monkeypatch.setattr(os, "write", short_then_fail)
    with pytest.raises(PersistenceError):
        store.append_chat_message(KEY, "user", "a long message that does not fit")
    monkeypatch.undo()
    assert len(calls) == 2
    assert store.history_path(KEY).read_bytes() == before


def test_failed_rewrite_of_the_history_changes_nothing(root, monkeypatch):
    store = FileAgentMemoryStore(root, chat_cap=1, transcript_cap=16)
    for i in range(31):
        store.append_chat_message(KEY, "user", f"m{i}")
    before = data_files(root)
    failing_fsync(monkeypatch)
    with pytest.raises(PersistenceError):
        store.append_chat_message(KEY, "user", "m31")  # would trigger the trim rewrite
    monkeypatch.undo()
    assert data_files(root) == before
    assert store.stats.history_rewrites == 0


def test_failed_summary_write_changes_nothing(root, monkeypatch):
    summaries = FileConversationSummaryStore(root)
    summaries.save_summary(KEY, "old")
    before = data_files(root)
    failing_fsync(monkeypatch)
    with pytest.raises(PersistenceError):
        summaries.save_summary(KEY, "new")
    monkeypatch.undo()
    assert data_files(root) == before and summaries.load_summary(KEY) == "old"


def test_no_temporary_files_are_left_behind(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.save(KEY, AgentMemoryState(memory="a"))
    failing_fsync(monkeypatch)
    with pytest.raises(PersistenceError):
        store.save(KEY, AgentMemoryState(memory="b"))
    monkeypatch.undo()
    assert sorted(os.listdir(root / "AgentMemory")) == ["Teacher.json"]


# -- concurrency ------------------------------------------------------------------------


def test_threads_on_two_store_instances_lose_nothing(root):
    stores = [FileAgentMemoryStore(root), FileAgentMemoryStore(root)]
    per_thread = 25

    def work(t: int) -> None:
        store = stores[t % 2]
        for i in range(per_thread):
            store.mutate(KEY, add_line(f"t{t}-{i}"))
            store.append_chat_message(KEY, "user", f"t{t}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check_nothing_lost(root, [f"t{t}" for t in range(4)], per_thread)


WORKER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.file_store import FileAgentMemoryStore

root, name, count = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
caps = dict(chat_cap=int(sys.argv[5]), transcript_cap=int(sys.argv[6])) if len(sys.argv) > 5 else {}
store = FileAgentMemoryStore(root, **caps)

def add_line(line):
    def fn(state):
        memory = f"{state.memory}\n{line}" if state.memory else line
        version = MemoryVersion(state.latest_version + 1, 1700000000, "append", memory, "n")
        return state.evolve(memory=memory, versions=state.versions + (version,), max_memory_versions=100000)
    return fn

print("ready", flush=True)
for i in range(count):
    store.mutate("Teacher", add_line(f"{name}-{i}"))
    print(f"M {i}", flush=True)
    store.append_chat_message("Teacher", "user", f"{name}-{i}")
    print(f"A {i}", flush=True)
"""


def spawn(tmp_path: Path, root: Path, name: str, count: int, *caps: int) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    args = [sys.executable, str(script), str(REPO), str(root), name, str(count), *map(str, caps)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def check_nothing_lost(root: Path, names: list[str], count: int) -> None:
    store = FileAgentMemoryStore(root)
    state = loaded(store.try_load(KEY))
    lines = state.memory.split("\n")
    expected = {f"{n}-{i}" for n in names for i in range(count)}
    assert sorted(lines) == sorted(expected)
    assert [v.version for v in state.versions] == list(range(1, len(expected) + 1))
    history = store.get_chat_history(KEY)
    assert sorted(m.content for m in history) == sorted(expected)
    orders = [m.order for m in history]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    for n in names:  # each writer's own messages keep their sequence
        mine = [int(m.content.rsplit("-", 1)[1]) for m in history if m.content.startswith(f"{n}-")]
        assert mine == list(range(count))


def test_two_processes_lose_nothing(tmp_path, root):
    count = 60
    workers = [spawn(tmp_path, root, name, count) for name in ("p1", "p2")]
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        assert out.count("\nA ") == count
    check_nothing_lost(root, ["p1", "p2"], count)


@pytest.mark.parametrize("acks_before_kill", [3, 40, 151])
def test_sigkill_mid_burst_keeps_files_parseable_and_acknowledged_writes(tmp_path, root, acks_before_kill):
    # Small caps so the burst also rewrites (trims) the history while it may be killed.
    chat_cap, transcript_cap = 40, 64
    worker = spawn(tmp_path, root, "w", 100000, chat_cap, transcript_cap)
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    acked = {"M": -1, "A": -1}
    seen = 0
    while seen < acks_before_kill:
        kind, index = worker.stdout.readline().split()
        acked[kind] = int(index)
        seen += 1
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    worker.stdout.close()

    # Every data file parses (temp files are the only leftovers a kill may leave).
    for path in (root / "AgentMemory").iterdir():
        if path.name.endswith(".tmp"):
            continue
        if path.name.endswith(".json"):
            decode_memory_document(path.read_bytes())
        else:
            assert path.name.endswith(".history.jsonl")
            parse_history(path.read_bytes())

    store = FileAgentMemoryStore(root, chat_cap=chat_cap, transcript_cap=transcript_cap)
    lines = loaded(store.try_load(KEY)).memory.split("\n")
    # Memory holds exactly w-0 .. w-k in order, k >= the last acknowledged mutation (k + 1 if killed after durability).
    assert lines == [f"w-{i}" for i in range(len(lines))]
    assert acked["M"] <= len(lines) - 1 <= acked["M"] + 1
    messages = [int(m.content.split("-")[1]) for m in store.get_chat_history(KEY)]
    last = messages[-1]
    assert acked["A"] <= last <= acked["A"] + 1
    assert messages == list(range(max(0, last + 1 - chat_cap), last + 1))
    store.append_chat_message(KEY, "user", "after")  # the key keeps working
    assert store.get_chat_history(KEY)[-1].content == "after"
