"""Benchmark: four NPC turns submitted together against the same four one after the other.

The runtime as `serve` ships it for the embedded SmolLM2-135M (`hosted_model_config(None)`: the
256 MB RAM prompt cache; `build_orchestrator` with the model's profile: structured tool calls, the
memory writer pass after each reply), one process, four NPCs each with one player. Two kinds of turn:

- **chat**: the player states something about themselves: the reply, then the memory writer's
  decision (2 model calls, the writer waits behind player turns in the model queue);
- **tool**: the same with a runtime-hosted tool the turn must call first (`check_stock`): the call
  round, the reply round, the writer (3 model calls), the issue's "three-call turns".

Two sets of four NPCs with the same lines at the same turn (the same compactions on the same turns;
different names, so neither finds the other's prompts in the cache): one set always plays its
batches sequentially (each turn awaited before the next), the other concurrently (`asyncio.gather`),
alternating which goes first. A batch is one turn of each NPC of a set, and ends when their writer
passes are done. Reported: the batch's wall time (median over repetitions, and the ratio concurrent /
sequential per repetition, median), the prompt tokens llama.cpp evaluated for the batch's turns
(`TurnUsage`: the replies' rounds; the writer pass is not a turn's), and the time to first text of each
turn. A tool turn whose loop ended (SmolLM2 calls the tool again in later rounds until the loop guard
stops it) counts: it replied, and both sets do the same.

Run: `nice -n 10 .venv/bin/python bench/bench_concurrent_turns.py [--reps 5] [--kinds chat tool]`
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

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_npcs import npc_prompt, server_rss_mb, timed_turn
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, build_orchestrator
from pyruntime.turns.rounds.registry import ToolOutput, ToolRegistry
from tests.support.fixtures import free_port

NPCS = 4
MAX_TOKENS = 24
LINES = [
    "My name is Alex and I just came into town.", "I owe thirty gold to the blacksmith.",
    "I have a cat called Pebble.", "I come from Riverwood, up north.", "I am afraid of spiders.",
    "I am looking for the lost crown.", "My sister is called Ina.", "I like apples more than pears.",
    "I cannot swim, so I avoid the river.", "I once met the king in the capital.",
]
STOCK = {0: "three swords, a shield", 1: "ale, bread, a room upstairs", 2: "wanted posters, a spare spear",
         3: "silk, spices, a lute"}


class _Stock(BaseModel):
    item: str = ""


@dataclass
class Batch:
    """One batch: four turns, one per NPC."""

    wall_s: float
    evaluated: int
    ttft: list[float] = field(default_factory=list)


def _registry() -> ToolRegistry:
    tools = ToolRegistry()
    for npc in range(2 * NPCS):
        stock = STOCK[npc % NPCS]
        tools.register(f"Npc{npc}", "check_stock", "Look up what you have for sale.", _Stock,
                       lambda args, stock=stock: ToolOutput(True, f"In stock: {stock}."))
    return tools


def _request(npc: int, turn: int, kind: str) -> AiTaskRequest:
    return AiTaskRequest(f"{LINES[(turn + npc % NPCS) % len(LINES)]} What do you have?", f"Npc{npc}",
                         scope=AgentMemoryScope(user_id="player0"),
                         forced_tool_mode="check_stock" if kind == "tool" else "none",
                         max_output_tokens=MAX_TOKENS, temperature=0.0, extra={"seed": 0})


async def _batch(orchestrator: Any, npcs: range, turn: int, kind: str, together: bool) -> Batch:
    requests = [_request(npc, turn, kind) for npc in npcs]
    began = time.perf_counter()
    if together:
        results = await asyncio.gather(*(timed_turn(orchestrator, r, kind, completed_is_enough=True)
                                         for r in requests))
    else:
        results = [await timed_turn(orchestrator, r, kind, completed_is_enough=True) for r in requests]
    await orchestrator.memory_passes.drain()  # the writer passes belong to the batch's work
    wall = time.perf_counter() - began
    return Batch(wall, sum(u.evaluated_prompt_tokens for u, _, _ in results), [t for _, t, _ in results])


async def run_kind(server: LlamaServerProcess, kind: str, reps: int) -> tuple[list[Batch], list[Batch]]:
    """Two warm-up turns per NPC, then `reps` repetitions: each set's batch, alternating which goes first."""
    sequential_set, concurrent_set = range(0, NPCS), range(NPCS, 2 * NPCS)
    with tempfile.TemporaryDirectory() as data_dir:
        policy = AgentMemoryPolicy()
        for npc in range(2 * NPCS):
            policy.configure_role(f"Npc{npc}", system_prompt=npc_prompt(npc), with_chat_history=True,
                                  persist_chat_history=True, use_memory_tool=True, temperature=0.0)
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir))
        orchestrator = build_orchestrator(server=server, stores=stores, policy=policy, tools=_registry())
        sequential: list[Batch] = []
        concurrent: list[Batch] = []
        for warm in range(2):
            for npcs in (sequential_set, concurrent_set):
                await _batch(orchestrator, npcs, warm, kind, together=False)
        for rep in range(reps):
            order = (False, True) if rep % 2 == 0 else (True, False)
            for together in order:
                batch = await _batch(orchestrator, concurrent_set if together else sequential_set, 2 + rep, kind,
                                     together)
                (concurrent if together else sequential).append(batch)
                print(f"  {kind} rep {rep + 1}: {'concurrent' if together else 'sequential'} {batch.wall_s:.2f} s, "
                      f"{batch.evaluated} tokens evaluated", flush=True)
        await orchestrator.client.aclose()
    return sequential, concurrent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="sequential and concurrent batches per kind")
    parser.add_argument("--kinds", nargs="+", choices=("chat", "tool"), default=["chat", "tool"])
    args = parser.parse_args()
    config = hosted_model_config(None, port=free_port())
    print(f"SmolLM2-135M hosted as serve ships it (prompt cache {config.prompt_cache_mb} MB), two sets of {NPCS} NPCs, "
          f"{MAX_TOKENS}-token replies, {args.reps} repetitions", flush=True)
    rows = []
    with LlamaServerProcess(config) as server:
        for kind in args.kinds:
            sequential, concurrent = asyncio.run(run_kind(server, kind, args.reps))
            ratios = [c.wall_s / s.wall_s for s, c in zip(sequential, concurrent, strict=True)]
            rows.append((kind, sequential, concurrent, ratios))
        rss = server_rss_mb(server)
    print("\n| turns | batch wall s, sequential / concurrent (median) | concurrent / sequential, median (range) | "
          "tokens evaluated per batch, sequential / concurrent (median) | TTFT p50 s, sequential / concurrent |")
    print("|---|---|---|---|---|")
    for kind, sequential, concurrent, ratios in rows:
        print(f"| {kind} | {statistics.median(b.wall_s for b in sequential):.2f} / "
              f"{statistics.median(b.wall_s for b in concurrent):.2f} | {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {statistics.median(b.evaluated for b in sequential):g} / "
              f"{statistics.median(b.evaluated for b in concurrent):g} | "
              f"{statistics.median(t for b in sequential for t in b.ttft):.2f} / "
              f"{statistics.median(t for b in concurrent for t in b.ttft):.2f} |")
    print(f"server RSS at the end: {rss:.0f} MB")
    print("\nRun: nice -n 10 .venv/bin/python bench/bench_concurrent_turns.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
