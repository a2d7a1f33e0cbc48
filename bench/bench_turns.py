"""Benchmark of the runtime's overhead per turn: a turn through the runtime vs its final prompt sent straight.

For each model, a SmartChat session (memory pre-filled, history persisted in file stores, tools
offered in the system prompt but not this request, temperature 0) runs N turns through
`AiOrchestrator.run_task`; every request body the runtime sent is kept. Then the same bodies are
replayed in the same order straight to the same llama.cpp server with plain httpx (streamed, read to
the end). Before each pass one identical warm-up request puts the server's prefix cache in the same
state, so turn i of both passes starts from turn i-1's cached prompt and decodes the same tokens;
both passes pause 0.1 s (untimed) before each turn so every request finds the server idle.

overhead = median(turn through the runtime) / median(the same request straight to the server)
(target <= 1.05). The runtime's share includes request assembly, history preparation with exact
token counts, the memory-snapshot write, recording the turn (fsync'd appends), the queue and
the client's SSE parsing.

Models: the tiny random test model whose replies always run to max_tokens (stable decode time), and
the embedded SmolLM2-135M (realistic times).

Run: `.venv/bin/python bench/bench_turns.py [--turns 20] [--rounds 2] [--models tiny smollm2]`
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.memory import MemoryTool  # noqa: E402
from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path  # noqa: E402
from pyruntime.model.hosting import LlamaServerProcess  # noqa: E402
from pyruntime.model.llama_server import LlamaServerConfig  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores  # noqa: E402
from pyruntime.turns import AiTaskRequest, build_orchestrator  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402
from tests.support.tiny_model import write_tiny_model  # noqa: E402
from tests.turns.conftest import RecordingClient  # noqa: E402

ROLE = "SmartChat"
MEMORY = ["Sword: Dawnbreaker", "Horse: Shadowfax", "Home: Riverwood"]
# An untimed pause before every turn of both passes: llama-cpp-python finishes a request (frees its
# lock, closes the stream) just after `[DONE]`, and back-to-back requests would pay that to the next one.
PAUSE_S = 0.1
WARM_UP = [{"role": "user", "content": "warm-up request, unrelated to the session"}]


@dataclass
class Row:
    model: str
    max_tokens: int
    runtime: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    extra_ms: list[float] = field(default_factory=list)


async def warm_up(http: httpx.AsyncClient, base_url: str) -> None:
    """One fixed request: the same prefix-cache state before both passes."""
    await http.post(f"{base_url}/chat/completions",
                    json={"messages": WARM_UP, "max_tokens": 1, "temperature": 0, "seed": 0})


async def runtime_pass(server: LlamaServerProcess, turns: int, max_tokens: int) -> tuple[list[float], list[dict]]:
    """N turns through the runtime in a fresh data dir: (seconds per turn, request bodies sent)."""
    times = []
    with tempfile.TemporaryDirectory() as data_dir:
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir))
        tool = MemoryTool(stores.memory, stores.scoped().key(ROLE))
        for line in MEMORY:
            tool.execute({"action": "append", "content": line})
        orchestrator = build_orchestrator(server=server, stores=stores)
        await orchestrator.client.aclose()
        client = orchestrator.client = RecordingClient(server.base_url, model=server.config.alias)
        for i in range(turns):
            request = AiTaskRequest(hint=f"Turn {i + 1}: tell me something about my sword.", role_id=ROLE,
                                    forced_tool_mode="none", max_output_tokens=max_tokens, temperature=0.0,
                                    extra={"seed": 0})
            await asyncio.sleep(PAUSE_S)
            began = time.perf_counter()
            result = await orchestrator.run_task(request)
            times.append(time.perf_counter() - began)
            if not result.ok or result.usage.model_calls != 1:
                raise SystemExit(f"turn {i + 1} did not run as one model call: {result.status.name} {result.error}")
        await client.aclose()
    return times, client.bodies


async def direct_pass(http: httpx.AsyncClient, base_url: str, bodies: list[dict[str, Any]]) -> list[float]:
    """The same bodies, in order, straight to the server (streamed, read to the end)."""
    times = []
    for body in bodies:
        await asyncio.sleep(PAUSE_S)
        began = time.perf_counter()
        async with http.stream("POST", f"{base_url}/chat/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.strip() == "data: [DONE]":
                    break
        times.append(time.perf_counter() - began)
    return times


async def measure(server: LlamaServerProcess, row: Row, turns: int, rounds: int) -> None:
    async with httpx.AsyncClient(timeout=300) as http:
        for r in range(rounds):
            await warm_up(http, server.base_url)
            runtime, bodies = await runtime_pass(server, turns, row.max_tokens)
            await warm_up(http, server.base_url)
            direct = await direct_pass(http, server.base_url, bodies)
            row.runtime += runtime
            row.direct += direct
            row.ratios += [a / b for a, b in zip(runtime, direct)]
            row.extra_ms += [(a - b) * 1000 for a, b in zip(runtime, direct)]
            print(f"  {row.model} round {r + 1}/{rounds}: runtime median {statistics.median(runtime) * 1000:.1f} ms, "
                  f"direct median {statistics.median(direct) * 1000:.1f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per pass")
    parser.add_argument("--rounds", type=int, default=2, help="runtime+direct passes per model")
    parser.add_argument("--models", nargs="+", choices=["tiny", "smollm2"], default=["tiny", "smollm2"])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as model_dir:
        for model in args.models:
            if model == "tiny":
                path, alias, row = write_tiny_model(Path(model_dir) / "tiny-endless.gguf", endless=True,
                                                     context_length=8192), "tiny", \
                    Row("tiny (endless, 64-dim)", 32)
            else:
                path, alias, row = embedded_model_path(), EMBEDDED_MODEL_ALIAS, Row("SmolLM2-135M Q4_1", 24)
            config = LlamaServerConfig(model_path=path, alias=alias, port=free_port())
            print(f"hosting {alias} ...", flush=True)
            with LlamaServerProcess(config) as server:
                asyncio.run(measure(server, row, args.turns, args.rounds))
            rows.append(row)
    print(f"\nSmartChat turns (history persisted, memory blocks, temperature 0), {args.turns} turns x {args.rounds} "
          "rounds per model")
    print("| model | max_tokens | runtime turn median ms | direct median ms | overhead (ratio of medians) | "
          "median per-turn ratio | median per-turn extra ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.model} | {r.max_tokens} | {statistics.median(r.runtime) * 1000:.1f} | "
              f"{statistics.median(r.direct) * 1000:.1f} | "
              f"{statistics.median(r.runtime) / statistics.median(r.direct):.3f} | {statistics.median(r.ratios):.3f} | "
              f"{statistics.median(r.extra_ms):.1f} |")
    print("\nRun: .venv/bin/python bench/bench_turns.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
