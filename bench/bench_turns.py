"""Benchmark of the runtime's overhead per turn: a turn through the runtime vs its final prompt sent straight.

For each model, a SmartChat session (memory pre-filled, history persisted in file stores, tools
offered in the system prompt but not this request, temperature 0) runs N turns through
`AiOrchestrator.run_task`. Right after each runtime turn, the request body it sent is replayed
straight to the same llama.cpp server with plain httpx (streamed, read to the end), so both
measurements of a pair are taken seconds apart and a slow moment of a shared machine hits both.
Equal cache state: before the replay of turn i, the body of turn i-1 (the warm-up request for
turn 1) is sent again, untimed, so the server's prefix cache is where it was before the runtime
turn i (same prompt, same decoded tokens at temperature 0), and the replay leaves it where the
runtime turn left it. Every timed request is preceded by an untimed 0.1 s pause so it finds the
server idle.

overhead = median(turn through the runtime) / median(the same request straight to the server),
and the median of the per-turn ratios (target <= 1.05). The runtime's share includes request
assembly, history preparation with exact token counts, the memory-snapshot read (and write when it
changes), recording the turn (one fsync'd append), the queue and the client's SSE parsing. Also
printed: history appends per turn (the file store's own counter).

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

from pyruntime.memory import MemoryTool
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.turns import AiTaskRequest, build_orchestrator
from tests.support.fixtures import free_port
from tests.support.tiny_model import write_tiny_model
from tests.turns.conftest import RecordingClient

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
    appends_per_turn: list[float] = field(default_factory=list)


async def warm_up(http: httpx.AsyncClient, base_url: str) -> None:
    """One fixed request: the prefix-cache state before turn 1 (of the runtime and of its replay)."""
    await http.post(f"{base_url}/chat/completions",
                    json={"messages": WARM_UP, "max_tokens": 1, "temperature": 0, "seed": 0})


async def stream_to_end(http: httpx.AsyncClient, base_url: str, body: dict[str, Any]) -> None:
    """One request straight to the server, streamed and read to `[DONE]` (what the runtime's client does)."""
    async with http.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.strip() == "data: [DONE]":
                break


async def paired_pass(server: LlamaServerProcess, http: httpx.AsyncClient, row: Row, turns: int) -> None:
    """N runtime turns in a fresh data dir, each followed by the same request sent straight (see the docstring)."""
    with tempfile.TemporaryDirectory() as data_dir:
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir))
        tool = MemoryTool(stores.memory, stores.scoped().key(ROLE))
        for line in MEMORY:
            tool.execute({"action": "append", "content": line})
        orchestrator = build_orchestrator(server=server, stores=stores)
        await orchestrator.client.aclose()
        client = orchestrator.client = RecordingClient(server.base_url, model=server.config.alias)
        await warm_up(http, server.base_url)
        previous: dict[str, Any] | None = None  # None: the warm-up request
        assert isinstance(stores.memory, FileAgentMemoryStore)
        appends = stores.memory.stats.history_appends
        for i in range(turns):
            request = AiTaskRequest(hint=f"Turn {i + 1}: tell me something about my sword.", role_id=ROLE,
                                    forced_tool_mode="none", max_output_tokens=row.max_tokens, temperature=0.0,
                                    extra={"seed": 0})
            await asyncio.sleep(PAUSE_S)
            began = time.perf_counter()
            result = await orchestrator.run_task(request)
            runtime = time.perf_counter() - began
            if not result.ok or result.usage.model_calls != 1:
                raise SystemExit(f"turn {i + 1} did not run as one model call: {result.status.name} {result.error}")
            body = client.bodies[-1]
            # Untimed: the cache back to its state before this runtime turn.
            if previous is None:
                await warm_up(http, server.base_url)
            else:
                await stream_to_end(http, server.base_url, previous)
            await asyncio.sleep(PAUSE_S)
            began = time.perf_counter()
            await stream_to_end(http, server.base_url, body)
            direct = time.perf_counter() - began
            previous = body
            row.runtime.append(runtime)
            row.direct.append(direct)
            row.ratios.append(runtime / direct)
            row.extra_ms.append((runtime - direct) * 1000)
        row.appends_per_turn.append((stores.memory.stats.history_appends - appends) / turns)
        await client.aclose()


async def measure(server: LlamaServerProcess, row: Row, turns: int, rounds: int) -> None:
    async with httpx.AsyncClient(timeout=300) as http:
        for r in range(rounds):
            done = len(row.runtime)
            await paired_pass(server, http, row, turns)
            print(f"  {row.model} round {r + 1}/{rounds}: runtime median "
                  f"{statistics.median(row.runtime[done:]) * 1000:.1f} ms, direct median "
                  f"{statistics.median(row.direct[done:]) * 1000:.1f} ms, median per-turn ratio "
                  f"{statistics.median(row.ratios[done:]):.3f}", flush=True)


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
          "median per-turn ratio | median per-turn extra ms | history appends per turn |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.model} | {r.max_tokens} | {statistics.median(r.runtime) * 1000:.1f} | "
              f"{statistics.median(r.direct) * 1000:.1f} | "
              f"{statistics.median(r.runtime) / statistics.median(r.direct):.3f} | {statistics.median(r.ratios):.3f} | "
              f"{statistics.median(r.extra_ms):.1f} | {statistics.mean(r.appends_per_turn):.2f} |")
    print("\nRun: .venv/bin/python bench/bench_turns.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
