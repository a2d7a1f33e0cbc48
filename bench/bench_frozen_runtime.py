"""Benchmark of the frozen runtime (dist/coreai-runtime, tools/build_runtime.py) against the venv install.

Per variant, medians of several runs of:
- `--version`: process start to exit;
- serve, no model: start until the JSON ready line (`serve --no-model --session-only`);
- serve, tiny model: start until the ready line with the tiny test model hosted (a llama.cpp child).

The frozen executable runs with a PATH scrubbed of Python. Builds first if needed (cached).
Run: `.venv/bin/python bench/bench_frozen_runtime.py [--runs N]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fixtures import free_port  # noqa: E402
from tests.support.tiny_model import write_tiny_model  # noqa: E402
from tools.build_runtime import DEFAULT_DIST, DEFAULT_WORK, build, folder_size, scrubbed_environment  # noqa: E402


def time_version(command: list[str], env: dict[str, str]) -> float:
    """Seconds for `command --version` to finish."""
    began = time.perf_counter()
    subprocess.run([*command, "--version"], env=env, capture_output=True, check=True, timeout=120)
    return time.perf_counter() - began


def time_ready(command: list[str], env: dict[str, str], *serve_args: str) -> float:
    """Seconds from start until serve prints its ready line; then it is stopped."""
    began = time.perf_counter()
    process = subprocess.Popen([*command, "serve", "--session-only", "--grpc-port", "0", "--connect-port", "0",
                                *serve_args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        if not process.stdout.readline():
            raise RuntimeError("serve exited before it was ready")
        return time.perf_counter() - began
    finally:
        process.terminate()
        process.wait(60)


def main() -> None:
    """Print the medians per variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    exe = build(DEFAULT_DIST, DEFAULT_WORK)
    size, files = folder_size(exe.parent)
    variants = {
        "venv (python -m pyruntime.cli)": ([sys.executable, "-m", "pyruntime.cli"],
                                           {**os.environ, "PYTHONPATH": str(ROOT)}),
        "frozen (no Python on PATH)": ([str(exe)], scrubbed_environment()),
    }
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "tiny.gguf")
        print(f"frozen folder: {size / 1e6:.1f} MB, {files} files ({exe.parent})")
        print(f"{'variant':<32} {'--version s':>11} {'ready, no model s':>18} {'ready, tiny model s':>20}")
        for name, (command, env) in variants.items():
            version = statistics.median(time_version(command, env) for _ in range(args.runs))
            bare = statistics.median(time_ready(command, env, "--no-model") for _ in range(args.runs))
            hosted = statistics.median(time_ready(command, env, "--model", str(model), "--port", str(free_port()))
                                       for _ in range(args.runs))
            print(f"{name:<32} {version:>11.2f} {bare:>18.2f} {hosted:>20.2f}")
    print(f"command: .venv/bin/python bench/bench_frozen_runtime.py --runs {args.runs}")


if __name__ == "__main__":
    main()
