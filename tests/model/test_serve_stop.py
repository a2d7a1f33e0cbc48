"""SIGTERM stops a real `serve` promptly, however busy or stuck its engine is (a soak saw serve still up 60 s after it).

serve hosts the tiny model with the restart-warm disk cache; a conversation holds a slot (the stop saves it), a
memory write is acknowledged,
then players talk back to back on both transports (turns, and the memory passes behind them) and the
engine is frozen (SIGSTOP: a hung llama-server) with that work in flight. SIGTERM must
then end serve with exit code 0, no llama-server left, the acknowledged saves on disk. The bound below is a
liveness bound (a stop that never comes fails instead of hanging the suite), not a measure of speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pyruntime.client import RuntimeClient
from pyruntime.net.auth import read_token_file
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores
from tests.model.test_serve_cli import model_children, serve_with_model
from tests.unity_layer.processes import wait_for

SCOPE = AgentMemoryScope(user_id="player-1")
STOP_BOUND_S = 30.0  # liveness: serve must be gone by then (the grace period is 5 s)
IN_FLIGHT = 4  # callers, over both transports


@pytest.mark.skipif(sys.platform != "linux", reason="freezes the engine with SIGSTOP, finds it in /proc")
def test_sigterm_stops_serve_promptly_with_a_frozen_engine_and_turns_in_flight(tiny_model_path, tmp_path):
    serve, model = serve_with_model(tmp_path, tiny_model_path, "--tool-mode", "native", "--prompt-cache-dir")
    results: list[object] = []
    callers: list[threading.Thread] = []
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        urls = (f"grpc://127.0.0.1:{ready['grpc_port']}", f"http://127.0.0.1:{ready['connect_port']}")
        with RuntimeClient(urls[0], token=token, timeout=120) as client:
            written = client.apply_memory_tool("Blacksmith", {"action": "append", "content": "acknowledged"},
                                               scope=SCOPE)
            assert written.success, written.error
            turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=8,
                                   forced_tool_mode="none")
            assert turn.text  # the conversation now holds a slot: the stop saves it (or gives up on a frozen one)
        [engine] = model_children(model)
        stopping = threading.Event()

        def call(url: str, n: int) -> None:
            # Turns back to back, as players keep talking: each line gives the memory writer a pass to run, and
            # the passes wait behind the player turns (a backlog the stop must not wait for).
            try:
                with RuntimeClient(url, token=token, timeout=120) as caller:
                    while not stopping.is_set():
                        results.append(caller.run_task(f"My name is Tobin and I am {n} years old.",
                                                       role_id="Merchant", scope=SCOPE, max_output_tokens=16))
                        n += IN_FLIGHT
            except Exception as exc:  # noqa: BLE001 - a call cut by the stop is expected; a hang is not
                results.append(exc)

        for n in range(IN_FLIGHT):
            callers.append(threading.Thread(target=call, args=(urls[n % 2], n), daemon=True))
            callers[-1].start()
        time.sleep(2.0)  # turns and their memory passes under way
        os.kill(engine, signal.SIGSTOP)  # ... and now the engine hangs with work in flight
        stopping.set()
        time.sleep(1.0)
        began = time.monotonic()
        serve.process.send_signal(signal.SIGTERM)
        try:
            rc = serve.process.wait(timeout=STOP_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve still running {STOP_BOUND_S:g} s after SIGTERM:\n{serve.err[-3000:]}")
        print(f"serve stopped {time.monotonic() - began:.1f} s after SIGTERM\n{serve.err[-2500:]}")
    finally:
        if serve.process.poll() is None:
            serve.process.kill()
            serve.process.wait()
        for pid in model_children(model):
            os.kill(pid, signal.SIGKILL)
    assert rc == 0, serve.err[-3000:]
    wait_for(lambda: model_children(model) == [], 5, "no llama-server left")
    for caller in callers:
        caller.join(30)
        assert not caller.is_alive()  # every call in flight got an answer (cut by the stop)
    assert any(isinstance(r, Exception) for r in results)  # the calls the frozen engine held were cut
    assert "Traceback" not in serve.err, serve.err[-3000:]
    assert "restarting it" not in serve.err  # a stopping runtime loads no new engine (the frozen one is stopped)
    # What was acknowledged before the signal is on disk.
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path / "data")
    loaded = stores.memory.try_load(storage_key("Blacksmith", SCOPE))
    assert loaded.status is LoadStatus.LOADED and loaded.state is not None
    assert loaded.state.memory.splitlines() == ["acknowledged"]
    assert [m.content for m in stores.scoped(SCOPE).get_chat_history("PlainChat") if m.role == "user"] == ["hi"]
