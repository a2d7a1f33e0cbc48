"""`serve` is never orphaned (real processes, real llama.cpp): the watched parent SIGKILLed, the launcher's stdin
closed, the runtime itself SIGKILLed - each time the runtime and its model child are gone within a bounded wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.model.test_serve_cli import ROOT, Serve, model_children, serve_with_model
from tests.support.fixtures import free_port
from tests.unity_layer.processes import engine_of, is_alive, wait_for

BOUND_S = 20.0  # generous for a loaded 2-core machine; bench/bench_lifeline.py measures the real time


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])


def _gone(serve: Serve, model: Path) -> bool:
    return serve.process.poll() is not None and not model_children(model)


def test_serve_stops_with_its_model_when_the_parent_pid_is_sigkilled(tiny_model_path: Path, tmp_path: Path) -> None:
    game = _sleeper()  # stands in for the game: any process, not necessarily serve's parent
    serve, model = serve_with_model(tmp_path, tiny_model_path, "--parent-pid", str(game.pid))
    try:
        serve.ready()
        [child] = model_children(model)
        game.kill()  # SIGKILL, and left unreaped: the runtime must not take a zombie for a live game
        wait_for(lambda: _gone(serve, model), BOUND_S, "serve and its model child to exit after the game's SIGKILL")
        assert serve.process.returncode == 0
        assert not is_alive(child)
        assert "the parent process exited; stopping" in serve.err
        assert "model server stopped" in serve.err  # stopped in order, not just orphaned
    finally:
        game.kill()
        game.wait()
        serve.stop()


def test_serve_stops_when_the_launcher_closes_its_stdin(tiny_model_path: Path, tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pyruntime.cli", "serve", "--model", str(tiny_model_path), "--port", str(port),
         "--data-dir", str(tmp_path / "data"), "--grpc-port", "0", "--connect-port", "0", "--exit-on-stdin-eof"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdin is not None
        ready = process.stdout.readline()  # the one JSON ready line
        assert b"connect_port" in ready
        [child] = engine_of(process.pid)
        process.stdin.write(b"anything the launcher writes is read and dropped\n")
        process.stdin.flush()
        process.stdin.close()  # what the OS does to the pipe when the launcher dies
        code = process.wait(BOUND_S)
        err = process.stderr.read().decode() if process.stderr else ""
        assert code == 0, err
        assert "standard input closed; stopping" in err
        wait_for(lambda: not is_alive(child), BOUND_S, "the model child to be gone")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_a_terminal_serve_without_the_flag_ignores_stdin_eof(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pyruntime.cli", "serve", "--no-model", "--session-only", "--grpc-port", "0",
         "--connect-port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdin is not None
        assert b"connect_port" in process.stdout.readline()
        process.stdin.close()
        try:
            process.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
        assert process.poll() is None  # still serving: only --exit-on-stdin-eof makes EOF a stop
        process.send_signal(signal.SIGTERM)
        assert process.wait(BOUND_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_sigkilling_serve_leaves_no_model_child(tiny_model_path: Path, tmp_path: Path) -> None:
    serve, model = serve_with_model(tmp_path, tiny_model_path)
    try:
        serve.ready()
        [child] = model_children(model)
        serve.process.kill()
        serve.process.wait()
        wait_for(lambda: not is_alive(child), BOUND_S, "the model child to exit after serve's SIGKILL")
    finally:
        serve.stop()


def test_a_parent_pid_that_does_not_run_is_refused_before_anything_starts(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid, message in ((str(dead.pid), f"--parent-pid {dead.pid} is not a running process"),
                         ("0", "--parent-pid must be a process id")):
        serve = Serve(tmp_path, "--no-model", "--session-only", "--grpc-port", "0", "--connect-port", "0",
                      "--parent-pid", pid)
        assert serve.wait() == 2
        assert message in serve.err
        assert serve.stdout_lines() == []
