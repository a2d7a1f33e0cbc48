"""Connections cannot wedge the runtime: idle and half-sent requests time out on both ports, the HTTP port's cap
evicts the oldest idle connection for a new one, and a half-open flood past the file-handle limit leaves health,
saves and an open gRPC channel answering, with a log that stays small (it used to grow by megabytes a second).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pyruntime.client import RuntimeClient
from pyruntime.net.limits import TransportLimits, connection_cap
from tests.rpc.conftest import TOKEN, Runtime, spawn_runtime, start_runtime

SHORT_S = 0.5
CLOSE_WITHIN_S = 15.0  # a hang guard, far above SHORT_S: the test fails only if nothing closes the connection
FILE_LIMIT = 256  # a macOS GUI app's default
FLOOD_PER_PORT = 300  # both ports together: more than the runtime's whole file-handle limit


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Runtime]:
    """A runtime with short timeouts and room for only 4 connections per port."""
    rt = start_runtime(tmp_path / "data", limits=TransportLimits(max_connections=4, request_timeout_s=SHORT_S,
                                                                 idle_timeout_s=SHORT_S))
    yield rt
    rt.handle.stop(1.0)


def connect(port: int, first_bytes: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if first_bytes:
        sock.sendall(first_bytes)
    return sock


def closed_by_server(sock: socket.socket, within: float = CLOSE_WITHIN_S) -> bool:
    """True when the server closes the connection (EOF or reset) before `within` seconds pass."""
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if sock.recv(65536) == b"":
                    return True
            except TimeoutError:
                return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        sock.close()
    return False


def half_request(port: int) -> bytes:
    return f"POST /coreai.v1.MemoryStore/LoadState HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()


@pytest.mark.parametrize("transport", ["grpc", "connect"])
def test_a_connection_that_sends_nothing_is_closed(strict: Runtime, transport: str) -> None:
    port = strict.handle.grpc_port if transport == "grpc" else strict.handle.connect_port
    assert closed_by_server(connect(port))


def test_half_sent_requests_are_closed(strict: Runtime) -> None:
    port = strict.handle.connect_port
    assert closed_by_server(connect(port, half_request(port)))  # headers never finished
    body_promised = half_request(port) + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ta"
    assert closed_by_server(connect(port, body_promised))  # body never finished
    assert closed_by_server(connect(strict.handle.grpc_port, b"PRI * HTTP/2.0\r\n"))  # half an HTTP/2 preface


def test_a_slow_drip_does_not_extend_the_request_deadline(strict: Runtime) -> None:
    port = strict.handle.connect_port
    sock = connect(port)
    started = time.monotonic()
    try:
        for byte in half_request(port) * 20:  # ~1300 bytes, one every 20 ms: ~26 s if never cut
            sock.sendall(bytes([byte]))
            time.sleep(0.02)
            assert time.monotonic() - started < CLOSE_WITHIN_S, "the drip was never cut off"
    except (BrokenPipeError, ConnectionResetError):
        return  # closed by the runtime while dripping
    finally:
        sock.close()
    pytest.fail("the whole drip was accepted")


def test_kept_alive_connections_serve_requests_back_to_back(strict: Runtime) -> None:
    with httpx.Client(base_url=strict.handle.connect_url, timeout=10) as http:
        for _ in range(3):
            assert http.get("/healthz").status_code == 200
            time.sleep(SHORT_S / 5)


def test_at_the_cap_a_new_connection_evicts_the_oldest_idle_one(strict: Runtime) -> None:
    port = strict.handle.connect_port
    oldest = connect(port, b"GET /healthz HTTP/1.1\r\n")  # half-sent, the oldest
    idle = [connect(port) for _ in range(3)]
    time.sleep(0.1)  # let the runtime accept them in order
    response = httpx.get(f"{strict.handle.connect_url}/healthz", timeout=10)
    assert response.status_code == 200
    assert closed_by_server(oldest, within=SHORT_S / 2)  # evicted at once, before its own deadline
    for sock in idle:
        sock.close()
    metrics = httpx.get(f"{strict.handle.connect_url}/metrics", timeout=10).text
    assert 'coreai_connections_closed_total{reason="evicted",transport="connect"}' in metrics


def test_a_burst_of_invalid_requests_is_logged_once(strict: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    port = strict.handle.connect_port
    with caplog.at_level(logging.INFO):
        for _ in range(50):
            sock = connect(port, b"NOT HTTP AT ALL\r\n\r\n")
            assert closed_by_server(sock)  # answered 400 and closed
    invalid = [r for r in caplog.records if "Invalid HTTP request" in r.getMessage()]
    assert len(invalid) == 1


def test_the_cap_leaves_file_handles_for_everything_else() -> None:
    assert connection_cap(256) * 2 <= 256 - 64
    assert connection_cap(1024) * 2 <= 1024 - 64
    assert connection_cap(1024) * 3 <= 1024 - 64  # the model port shares the limit too (model/public_port.py)
    assert connection_cap(None) >= 64 and connection_cap(10**6) >= 1000


def flood(port: int, count: int) -> list[socket.socket]:
    """count connections, every other one idle, the rest sending half a request; the client keeps them open."""
    sockets: list[socket.socket] = []
    for index in range(count):
        try:
            sockets.append(connect(port, half_request(port) if index % 2 else b""))
        except OSError:
            pass  # the runtime's backlog is full for a moment: the flood goes on
    return sockets


@pytest.mark.skipif(sys.platform != "linux", reason="counts the runtime's open files in /proc")
def test_a_half_open_flood_past_the_file_limit_leaves_health_and_saves_answering(tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    runtime = spawn_runtime(tmp_path / "data", log=log, open_files=FILE_LIMIT)
    grpc_url, connect_url = f"grpc://127.0.0.1:{runtime.grpc_port}", f"http://127.0.0.1:{runtime.connect_port}"
    sockets: list[socket.socket] = []
    try:
        with RuntimeClient(grpc_url, token=TOKEN, timeout=10) as channel:
            assert channel.health().ready  # a channel the game opened before the flood
            sockets = flood(runtime.grpc_port, FLOOD_PER_PORT) + flood(runtime.connect_port, FLOOD_PER_PORT)
            assert len(sockets) > FILE_LIMIT
            for attempt in range(5):
                health = httpx.get(f"{connect_url}/healthz", timeout=10)
                assert health.status_code == 200 and health.json()["ready"], attempt
                assert channel.health().ready
            with RuntimeClient(connect_url, token=TOKEN, timeout=10) as client:
                saved = client.apply_memory_tool("Scribe", {"action": "append", "content": "after the flood"})
                assert saved.success
            assert len(os.listdir(f"/proc/{runtime.process.pid}/fd")) < FILE_LIMIT
    finally:
        for sock in sockets:
            sock.close()
        assert runtime.terminate() == 0
    text = log.read_text()
    assert "Traceback" not in text
    assert len(text) < 20_000, f"{len(text)} bytes of log"
