"""SIGTERM during a burst of writes: the runtime stops cleanly and every acknowledged write is on disk, once."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from pyruntime.client import RuntimeCallError, RuntimeClient
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores
from tests.rpc.conftest import TOKEN, spawn_runtime

WRITERS = 6


def writer(url: str, index: int, acknowledged: list[str], stop: threading.Event) -> None:
    """Append unique lines to one scope until the runtime stops answering."""
    scope = AgentMemoryScope(user_id=f"writer-{index}")
    with RuntimeClient(url, token=TOKEN, timeout=20) as client:
        n = 0
        while not stop.is_set():
            line = f"w{index}-{n}"
            try:
                result = client.apply_memory_tool("Scribe", {"action": "append", "content": line}, scope=scope)
            except (RuntimeCallError, OSError, Exception):  # noqa: BLE001 - any failure: the runtime is gone
                return
            assert result.success, result.error
            acknowledged.append(line)
            n += 1


def test_sigterm_during_a_burst_of_writes_leaves_files_consistent(tmp_path: Path) -> None:
    runtime = spawn_runtime(tmp_path)
    urls = [f"grpc://127.0.0.1:{runtime.grpc_port}", f"http://127.0.0.1:{runtime.connect_port}"]
    acknowledged: list[list[str]] = [[] for _ in range(WRITERS)]
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(urls[i % 2], i, acknowledged[i], stop)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while sum(map(len, acknowledged)) < 60 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert runtime.terminate(signal.SIGTERM) == 0  # graceful: exit code 0
    stop.set()
    for thread in threads:
        thread.join(30)

    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    for index, lines in enumerate(acknowledged):
        assert lines, f"writer {index} never got an answer"
        loaded = stores.memory.try_load(storage_key("Scribe", AgentMemoryScope(user_id=f"writer-{index}")))
        assert loaded.status is LoadStatus.LOADED and loaded.state is not None
        on_disk = loaded.state.memory.splitlines()
        # Every acknowledged write is there exactly once; at most the one in flight at the end may follow.
        assert on_disk[:len(lines)] == lines and len(on_disk) <= len(lines) + 1
        assert len(set(on_disk)) == len(on_disk)
        assert loaded.state.latest_version == len(on_disk)
    leftovers = [p.name for p in (tmp_path / "CoreAI").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
