"""What a game's launcher needs of `serve`: its output in a log file instead of pipes (`--log-file`), and a
graceful stop by an authenticated call (`Shutdown`), which is how Windows, without SIGTERM, stops it cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.unity_layer.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "launcher-test-token-0123456789"
NO_MODEL = ("--no-model", "--session-only", "--grpc-port", "0", "--connect-port", "0")


def _serve(*args: str, listen: str | None = None) -> subprocess.Popen[bytes]:
    """serve with both standard streams on pipes that nobody reads (what an editor after a domain reload does)."""
    extra = ("--listen", listen) if listen else ()
    return subprocess.Popen(
        [sys.executable, "-m", "pyruntime.cli", "serve", *NO_MODEL, *extra, *args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "COREAI_RUNTIME_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _ready_line(log: Path, process: subprocess.Popen[bytes]) -> dict:
    def ready() -> bool:
        assert process.poll() is None, f"serve exited with {process.returncode}"
        return log.exists() and "ready;" in log.read_text()

    wait_for(ready, 60, "serve's ready line in the log file")
    return json.loads(next(line for line in log.read_text().splitlines() if line.startswith("{")))


def test_log_file_takes_the_ready_line_and_the_logs_and_the_pipes_get_nothing(tmp_path: Path) -> None:
    log = tmp_path / "runtime" / "runtime.log"
    process = _serve("--log-file", str(log))
    try:
        ready = _ready_line(log, process)
        assert ready["connect_port"] > 0
        assert "stores open" in log.read_text()
        assert oct(log.stat().st_mode & 0o777) == oct(0o600)  # it may quote requests: the user's only
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert (out, err) == (b"", b""), "nothing goes to the inherited streams: no pipe can fill up or go unread"
    assert "RPC servers stopped" in log.read_text()


def test_log_file_appends_so_a_restart_keeps_the_earlier_run(tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    log.write_text("earlier run\n")
    process = _serve("--log-file", str(log))
    try:
        _ready_line(log, process)
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert log.read_text().startswith("earlier run\n")


def test_the_shutdown_call_stops_serve_gracefully_and_needs_the_token(tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    process = _serve("--log-file", str(log))
    try:
        url = f"http://127.0.0.1:{_ready_line(log, process)['connect_port']}/coreai.v1.Orchestrator/Shutdown"
        refused = httpx.post(url, json={}, headers={"Authorization": "Bearer not-the-token-0123456789"})
        assert refused.status_code == 401
        time.sleep(0.5)
        assert process.poll() is None, "a wrong token stops nothing"
        answered = httpx.post(url, json={}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        assert answered.status_code == 200 and answered.json() == {}
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)
    text = log.read_text()
    # The clean path, the same as SIGTERM's: calls drained, stores closed.
    assert "stop requested by a Shutdown call" in text and "RPC servers stopped" in text


def test_without_serve_s_loopback_hook_the_shutdown_call_is_refused() -> None:
    from coreai.v1 import orchestrator_pb2 as pb
    from pyruntime.policy import AgentMemoryPolicy
    from pyruntime.service.orchestrator import OrchestratorService
    from pyruntime.service.status import ServiceError, StatusCode

    service = OrchestratorService(AgentMemoryPolicy())  # what serve leaves when --listen is not loopback
    try:
        asyncio.run(service.shutdown(pb.ShutdownRequest()))
    except ServiceError as error:
        assert error.code is StatusCode.FAILED_PRECONDITION and "beyond loopback" in error.message
    else:
        raise AssertionError("Shutdown must be refused without serve's loopback hook")
