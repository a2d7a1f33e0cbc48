"""SIGTERM during a burst of writes or a streaming turn: the runtime stops cleanly (exit 0, no traceback), every
acknowledged write is on disk once, and a stream cut by the shutdown ends UNAVAILABLE (retry later)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from pathlib import Path

import pytest

from pyruntime.client import RuntimeCallError, RuntimeClient
from pyruntime.net.limits import AcceptErrorHandler
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.service import StatusCode
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores
from tests.rpc.conftest import TOKEN, TRANSPORTS, spawn_runtime, start_runtime
from tests.support.fixtures import free_port

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


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sigterm_with_a_stream_in_flight_exits_cleanly_and_the_stream_ends_unavailable(
        tmp_path: Path, tiny_endless_model_path: Path, transport: str) -> None:
    log = tmp_path / "runtime.log"
    runtime = spawn_runtime(tmp_path / "data", log=log, extra=("--grace", "0.5"),
                            model=("--model", str(tiny_endless_model_path), "--port", str(free_port())))
    url = f"grpc://127.0.0.1:{runtime.grpc_port}" if transport == "grpc" else f"http://127.0.0.1:{runtime.connect_port}"
    events: list[object] = []
    streaming = threading.Event()

    def stream() -> None:
        try:
            with RuntimeClient(url, token=TOKEN, timeout=120) as client:
                for event in client.stream_task("tell me everything", role_id="PlainChat", max_output_tokens=1500,
                                                forced_tool_mode="none"):
                    events.append(event)
                    if event.HasField("text_delta"):
                        streaming.set()
        except Exception as exc:  # noqa: BLE001 - how the stream ended is the assertion
            events.append(exc)
        finally:
            streaming.set()

    reader = threading.Thread(target=stream)
    reader.start()
    assert streaming.wait(120)
    assert runtime.terminate(signal.SIGTERM) == 0
    reader.join(60)
    ended = events[-1]
    assert isinstance(ended, RuntimeCallError) and ended.code is StatusCode.UNAVAILABLE, ended
    text = log.read_text()
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text


def test_a_result_for_a_cancelled_future_is_not_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    # grpc.aio's shutdown notice after a stop's grace ran out: set_result on a future the stop cancelled.
    def go(handler: AcceptErrorHandler) -> None:
        loop = asyncio.new_event_loop()
        handler.install(loop)
        try:
            late = loop.create_future()
            late.cancel()
            loop.call_soon(late.set_result, None)
            loop.call_soon(_fail)  # any other error still reaches asyncio's handler
            loop.run_until_complete(asyncio.sleep(0.05))
        finally:
            loop.close()

    with caplog.at_level(logging.DEBUG):
        go(AcceptErrorHandler())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "_fail" in errors[0].getMessage(), [r.getMessage() for r in errors]
    assert any("already cancelled" in r.getMessage() for r in caplog.records)


def _fail() -> None:
    raise RuntimeError("boom")


def test_a_late_result_after_the_servers_stopped_is_still_dropped(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # grpc.aio's notice reaches the loop after RpcServers.stop() returned (the fresh-clone failure's order:
    # "RPC servers stopped", then the traceback): the handler must outlive the stop.
    runtime = start_runtime(tmp_path / "data")
    handle = runtime.handle
    handle.call(handle.servers.stop(0.5))

    async def late() -> None:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        asyncio.get_running_loop().call_soon(future.set_result, None)
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.DEBUG):
        handle.call(late())
    handle.stop(0.5)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert any("already cancelled" in r.getMessage() for r in caplog.records)
