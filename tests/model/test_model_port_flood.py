"""The model port is guarded like the RPC ports: a flood of half-open connections cannot end the runtime.

The runtime runs as `serve` under a 1,024 file-handle limit (a desktop's default) hosting the tiny model; the
model port (our guard in front of llama-server, model/public_port.py) gets two floods of 1,100 connections that
send half a request and stop. Throughout, /healthz answers, the process and both RPC ports stay up and a memory
write succeeds; after each flood a turn runs. Loopback only, bounded: every wait has a hang guard.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeClient
from pyruntime.net.auth import read_token_file
from pyruntime.scopes import AgentMemoryScope
from tests.rpc.conftest import TOKEN, spawn_runtime
from tests.support.fixtures import free_port
from tests.support.loads import loaded

FILE_LIMIT = 1024
FLOOD = 1100
FLOODS = 2
HANG_GUARD_S = 10.0  # a request that takes this long has hung: the test fails (no timing is asserted)
SCOPE = AgentMemoryScope(user_id="player-1")


def half_open(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each send the start of a request and stop (the issue's flood)."""
    line = f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    sockets = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(line)
            sockets.append(sock)
        except OSError:
            pass  # the backlog is full for a moment, or the guard closed it at once: the flood goes on
    return sockets


@pytest.mark.skipif(sys.platform != "linux", reason="sets the runtime's file-handle limit with setrlimit")
def test_two_floods_of_half_open_connections_on_the_model_port_leave_the_runtime_serving(
        tiny_model_path: Path, tmp_path: Path) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 200:
        pytest.fail(f"the test process needs {FLOOD + 200} file handles to flood, its hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, FLOOD + 200), hard))
    model_port = free_port()
    log = tmp_path / "runtime.log"
    runtime = spawn_runtime(tmp_path / "data", model=("--model", str(tiny_model_path), "--port", str(model_port),
                                                      "--threads", "1", "--tool-mode", "native"),
                            log=log, open_files=FILE_LIMIT)
    model_key = read_token_file(tmp_path / "data" / "CoreAI" / "runtime" / "model_key")
    healthz = f"http://127.0.0.1:{runtime.connect_port}/healthz"
    grpc_url, connect_url = f"grpc://127.0.0.1:{runtime.grpc_port}", f"http://127.0.0.1:{runtime.connect_port}"
    slowest = 0.0
    try:
        with RuntimeClient(grpc_url, token=TOKEN, timeout=120) as client, \
                RuntimeClient(connect_url, token=TOKEN, timeout=HANG_GUARD_S) as during:
            for flood in range(FLOODS):
                sockets = half_open(model_port, FLOOD)
                try:
                    assert len(sockets) > FILE_LIMIT // 2, len(sockets)
                    for probe in range(5):
                        began = time.monotonic()
                        answer = httpx.get(healthz, timeout=HANG_GUARD_S)
                        slowest = max(slowest, time.monotonic() - began)
                        assert answer.status_code == 200 and answer.json()["modelReady"], (flood, probe)
                    written = during.apply_memory_tool("Scribe", {"action": "append", "content": f"flood {flood}"},
                                                       scope=SCOPE)
                    assert written.success, written.error
                    assert runtime.process.poll() is None
                finally:
                    for sock in sockets:
                        sock.close()
                turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=4,
                                       forced_tool_mode="none")
                assert turn.status == pb.TURN_STATUS_OK, turn.error
                # ... and the model port itself serves external clients again.
                models = httpx.get(f"http://127.0.0.1:{model_port}/v1/models", timeout=HANG_GUARD_S,
                                   headers={"Authorization": f"Bearer {model_key}"})
                assert models.status_code == 200
            assert loaded(client.load_state("Scribe", scope=SCOPE)).memory.splitlines() == ["flood 0", "flood 1"]
    finally:
        assert runtime.terminate() == 0
    print(f"slowest /healthz during the floods: {slowest:.3f} s")  # the bound is 1 s (machine-dependent)
    text = log.read_text()
    assert "Traceback" not in text and "restarting it" not in text  # the engine was never touched
