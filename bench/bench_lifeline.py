"""Benchmark of the never-orphaned contract: how long `serve` and its llama.cpp child outlive a dead game.

For each run, a real `serve` hosts the tiny test model with `--parent-pid` of a stand-in game process;
then one of:

- game SIGKILL: the game is SIGKILLed (left unreaped, a zombie) -> time until serve has exited and its
  model child is gone (the contract: within 2 s);
- stdin EOF: serve runs with `--exit-on-stdin-eof` and the launcher's pipe is closed -> the same time;
- SIGTERM (baseline): serve itself gets SIGTERM, the ordinary stop path -> the same time.

Medians of several runs (a shared machine is noisy). Run: `.venv/bin/python bench/bench_lifeline.py [--runs N]`
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fixtures import free_port  # noqa: E402
from tests.support.tiny_model import write_tiny_model  # noqa: E402
from tests.unity_layer.processes import engine_of, is_alive  # noqa: E402

POLL_S = 0.01


def _model_child(serve_pid: int) -> int:
    """serve's llama-server (its child, or its keeper's)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = engine_of(serve_pid)
        if found:
            return found[0]
        time.sleep(0.05)
    raise RuntimeError("no model child")


def one_run(model: Path, data: Path, how: str) -> float:
    """Seconds from the trigger until serve and its model child are both gone."""
    game = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    port = free_port()
    args = [sys.executable, "-m", "pyruntime.cli", "serve", "--model", str(model), "--port", str(port),
            "--data-dir", str(data), "--grpc-port", "0", "--connect-port", "0", "--parent-pid", str(game.pid)]
    if how == "stdin EOF":
        args.append("--exit-on-stdin-eof")
    serve = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert serve.stdout is not None and serve.stdin is not None
        if not serve.stdout.readline():
            raise RuntimeError("serve did not start")
        child = _model_child(serve.pid)
        triggers: dict[str, Callable[[], None]] = {
            "game SIGKILL": game.kill,
            "stdin EOF": serve.stdin.close,
            "SIGTERM (baseline)": lambda: serve.send_signal(signal.SIGTERM),
        }
        began = time.perf_counter()
        triggers[how]()
        while serve.poll() is None or is_alive(child):
            time.sleep(POLL_S)
        return time.perf_counter() - began
    finally:
        for process in (serve, game):
            if process.poll() is None:
                process.kill()
            process.wait()


def main() -> None:
    """Print the medians per trigger."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "tiny.gguf")
        print(f"{'trigger':<20} {'median s':>9} {'max s':>7}   (runs: {args.runs}, tiny model)")
        for how in ("SIGTERM (baseline)", "game SIGKILL", "stdin EOF"):
            times = [one_run(model, Path(tmp) / f"data-{i}", how) for i in range(args.runs)]
            print(f"{how:<20} {statistics.median(times):>9.2f} {max(times):>7.2f}")
    print("command: .venv/bin/python bench/bench_lifeline.py --runs", args.runs)


if __name__ == "__main__":
    main()
