"""Smoke test of a built `dist/coreai-runtime/`: `serve` starts with no Python in reach, answers health and a
token-checked call (and refuses one without the token), and stops cleanly when its stdin closes.

CI runs it on every OS it builds on (.github/workflows/frozen-runtime.yml): the project's own machine can
only run the Linux build. Standard library only, so it runs from any Python that can start it.

Usage: python tools/smoke_runtime.py [--dist DIR] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import queue
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.build_runtime import DEFAULT_DIST, executable, scrubbed_environment

TOKEN_ENV = "COREAI_RUNTIME_TOKEN"


class SmokeError(RuntimeError):
    """The frozen runtime did not do what a game needs; the message says what."""


def _ready_line(process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        raise SmokeError(f"serve printed no ready line within {timeout:g} s") from None
    if not line:
        raise SmokeError(f"serve exited before it was ready (exit {process.wait(30)})")
    ready: dict[str, Any] = json.loads(line)
    return ready


def _status(url: str, *, token: str | None = None, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def smoke(dist: Path, timeout: float = 120.0) -> dict[str, float]:
    """Run the checks against dist's executable; returns timings in seconds. Raises SmokeError."""
    exe = executable(dist)
    if not exe.is_file():
        raise SmokeError(f"{exe} does not exist: run tools/build_runtime.py first")
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="coreai-smoke-") as data, \
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            [str(exe), "serve", "--no-model", "--data-dir", data, "--grpc-port", "0", "--connect-port", "0",
             "--exit-on-stdin-eof"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**scrubbed_environment(), TOKEN_ENV: token})
        try:
            ready = _ready_line(process, timeout)
            ready_s = time.monotonic() - started
            base = f"http://127.0.0.1:{ready['connect_port']}"
            status, body = _status(f"{base}/healthz")
            if status != 200 or json.loads(body).get("ready") is not True:
                raise SmokeError(f"/healthz answered {status}")
            if _status(f"{base}/coreai.v1.Orchestrator/ListRoles", token=token, body=b"{}")[0] != 200:
                raise SmokeError("a call with the token was not answered")
            if _status(f"{base}/coreai.v1.Orchestrator/ListRoles", body=b"{}")[0] != 401:
                raise SmokeError("a call without the token was not refused with 401")
            assert process.stdin is not None
            process.stdin.close()  # the launcher's end goes away: serve must stop by itself, exit 0
            code = process.wait(timeout)
            if code != 0:
                raise SmokeError(f"serve exited with {code} after its stdin closed")
            return {"ready_s": ready_s, "total_s": time.monotonic() - started}
        except BaseException as exc:
            if process.poll() is None:
                process.kill()
                process.wait(30)
            log.seek(0)
            tail = log.read()[-3000:]
            if isinstance(exc, SmokeError):
                raise SmokeError(f"{exc}\n--- serve's log (last lines) ---\n{tail}") from None
            raise


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: exit 0 when the smoke test passes, 1 with the reason when it does not."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=DEFAULT_DIST, help=f"the build's output folder ({DEFAULT_DIST})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for start and stop (default 120)")
    args = parser.parse_args(argv)
    try:
        timings = smoke(args.dist, args.timeout)
    except SmokeError as exc:
        print(f"smoke test FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"smoke test passed: ready in {timings['ready_s']:.2f} s, stopped on stdin EOF, "
          f"{timings['total_s']:.2f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
