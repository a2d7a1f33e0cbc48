"""Benchmark: the first turn of each NPC after a runtime restart, with the disk prompt cache and without it.

One session of `--npcs` NPCs in rotation, `--rounds` turns each, on the hosted SmolLM2-135M with the
slots saved on disk (`serve --prompt-cache-dir`: `pyruntime/model/hosting/slot_store.py`,
the tail places in `pyruntime/turns/planning/tail_anchors.py`); then the
model server and the orchestrator stop (gracefully, as when the game quits) and start again, and each
NPC gets one more turn:

- **warm**: the session's own turns after each NPC's first (the server had everything in RAM);
- **after restart, disk cache**: the next turn of each NPC on the restarted server with the same folder;
- **after restart, RAM cache only**: the same turn (same stored history, a copy made before the
  restart) on a restarted server without the folder.

Tokens evaluated are llama.cpp's own counts (`TurnUsage.evaluated_prompt_tokens`); times are noisy on
a loaded machine, the token counts are exact.

Run: `nice -n 10 .venv/bin/python bench/bench_restart.py [--npcs 4] [--rounds 4]`
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_npcs import FACTS, MAX_TOKENS, _hint, _scope, npc_prompt, timed_turn
from pyruntime.memory import MemoryTool
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, build_orchestrator
from tests.support.fixtures import free_port

CACHE_MB = 256
ANCHORS = "tail-anchors.json"


async def play(server: LlamaServerProcess, data_dir: Path, npcs: int, rounds: int, first_round: int,
               anchors: Path | None) -> list[tuple[int, int, float]]:
    """`rounds` turns of each NPC in rotation: (round, tokens evaluated, time to first text) per turn."""
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
    policy = AgentMemoryPolicy()
    for npc in range(npcs):
        policy.configure_role(f"Npc{npc}", system_prompt=npc_prompt(npc), with_chat_history=True,
                              persist_chat_history=True, use_memory_tool=True, temperature=0.0)
    orchestrator = build_orchestrator(server=server, stores=stores, policy=policy, memory_design="tool")
    if anchors is not None:
        orchestrator.load_tail_anchors(anchors)
    if first_round == 0:
        for npc in range(npcs):
            tool = MemoryTool(stores.memory, stores.scoped(_scope(0)).key(f"Npc{npc}"))
            for fact in FACTS[:10]:
                tool.execute({"action": "append", "content": fact})
    out = []
    for turn in range(first_round, first_round + rounds):
        for npc in range(npcs):
            request = AiTaskRequest(_hint(npc, 0, turn), f"Npc{npc}", scope=_scope(0), forced_tool_mode="none",
                                    max_output_tokens=MAX_TOKENS, temperature=0.0, extra={"seed": 0})
            usage, ttft, _ = await timed_turn(orchestrator, request, "restart bench")
            out.append((turn, usage.evaluated_prompt_tokens, ttft))
    if anchors is not None:
        orchestrator.save_tail_anchors(anchors)
    await orchestrator.client.aclose()
    return out


def hosted(config: LlamaServerConfig) -> LlamaServerProcess:
    server = LlamaServerProcess(replace(config, port=free_port()))
    server.start(timeout=300)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npcs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4, help="turns of each NPC before the restart")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, copy, cache_dir = root / "data", root / "data-copy", root / "prompt-cache"
        disk = LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS,
                                 prompt_cache_mb=CACHE_MB, prompt_cache_dir=cache_dir)
        server = hosted(disk)
        try:
            session = asyncio.run(play(server, data, args.npcs, args.rounds, 0, cache_dir / ANCHORS))
        finally:
            server.stop()
        shutil.copytree(data, copy)
        files = list(cache_dir.glob("*.slot"))  # slot_store.py: one <conversation digest>.slot per slot saved
        print(f"{len(files)} state files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB on disk", flush=True)
        server = hosted(disk)
        try:
            restarted = asyncio.run(play(server, data, args.npcs, 1, args.rounds, cache_dir / ANCHORS))
        finally:
            server.stop()
        server = hosted(replace(disk, prompt_cache_dir=None))
        try:
            cold = asyncio.run(play(server, copy, args.npcs, 1, args.rounds, None))
        finally:
            server.stop()
    warm = [t for t in session if t[0] > 0]
    print(f"SmolLM2-135M, {args.npcs} NPCs x {args.rounds} turns in rotation, then a restart and one turn each "
          f"(prompt cache {CACHE_MB} MB)\n")
    print("| turns | tokens evaluated, median (each) | TTFT median s |\n|---|---|---|")
    for name, rows in (("warm (rounds 2..)", warm), ("first after restart, disk cache", restarted),
                       ("first after restart, RAM cache only", cold)):
        evaluated = [e for _, e, _ in rows]
        each = " ".join(str(e) for e in evaluated) if len(rows) <= 8 else "…"
        print(f"| {name} | {statistics.median(evaluated):g} ({each}) | "
              f"{statistics.median(t for _, _, t in rows):.2f} |")
    ratio = statistics.median(e for _, e, _ in restarted) / max(1, statistics.median(e for _, e, _ in warm))
    print(f"\nafter restart with the disk cache / warm: {ratio:.2f}x tokens evaluated")
    print("Run: nice -n 10 .venv/bin/python bench/bench_restart.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
