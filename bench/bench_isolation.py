"""Isolation on the embedded model, longer than the suite's runs on the tiny one (docs/benchmarks.md#isolation).

Three parts, each on the hosted llama-server as the runtime hosts it (SmolLM2-135M by default, `--model` another):

- **engine** (default): the engine isolation check of `tests/isolation/engine_check.py` with more conversations and
  rounds: every turn must reuse only cells its own conversation made, and its first-token distribution must be a
  fresh engine's (flash attention off: exactly; `--flash-attention auto` checks the product's setting within the
  tolerance `--noise` measures). Prints the seed, what was exercised and every finding.
- **--noise**: the numeric noise a tolerance must allow: the same prompts on a fresh engine (a slot erased before
  each request) against the engine reusing their own prefix at every split point (`split`), decoding beside another
  slot (`beside`), and evaluating them in one batch with three other sequences of random lengths (`batch`), for
  flash attention off and auto; and what a tolerance must stay below: the effect of one changed character of the
  system prompt (`token`) and of another conversation's prompt (`other`).
- **--parking**: what the isolation costs: NPCs in rotation on fewer slots (each turn's NPC lost its slot since its
  last turn), parked per conversation as the runtime does now, against the previous setup in the same run
  (llama-server's host prompt cache, `--cache-ram`, slots changing hands with their cells): prompt tokens evaluated
  per turn, time to first token, and the engine's CPU seconds (its /proc utime + stime, robust on a shared machine).
- **--runtime**: the runtime isolation check of `tests/isolation/test_runtime_isolation.py` (hosted leg) with more
  rounds: canaries in every request, slot provenance.

Run (a shared 2-core machine: nice it, run nothing else):
  nice -n 10 .venv/bin/python bench/bench_isolation.py [--seed N] [--conversations 16] [--rounds 10] [--slots 4]
  nice -n 10 .venv/bin/python bench/bench_isolation.py --noise [--prompts 12]
  nice -n 10 .venv/bin/python bench/bench_isolation.py --parking [--npcs 8] [--slots 2] [--rounds 4]
  nice -n 10 .venv/bin/python bench/bench_isolation.py --runtime [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.model.hosting.embedded import embedded_model_path  # noqa: E402
from pyruntime.model.hosting.llama_server import LlamaServerConfig, default_threads  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess  # noqa: E402
from tests.isolation import engine_check  # noqa: E402
from tests.isolation.workload import Conversation, Turn, build_schedule  # noqa: E402
from tests.support.fixtures import SERVER_START_TIMEOUT_S, free_port  # noqa: E402


def starter(model: Path, flash_attention: str, **settings: Any) -> Any:
    def start() -> LlamaServerProcess:
        config = LlamaServerConfig(model_path=model, alias="bench", port=free_port(), n_threads=default_threads(),
                                   flash_attention=flash_attention, **settings)
        server = LlamaServerProcess(config)
        server.start(timeout=SERVER_START_TIMEOUT_S * 4)
        return server

    return start


def run_engine(args: argparse.Namespace, model: Path) -> int:
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    folder = Path(tempfile.mkdtemp(prefix="coreai-isolation-"))
    schedule = build_schedule(seed, conversations=args.conversations, rounds=args.rounds, restarts=args.restarts)
    print(f"seed {seed}: {len(schedule.conversations)} conversations, {len(schedule.steps)} steps, "
          f"{len(schedule.probes)} compared turns, {args.slots} slots, flash attention {args.flash_attention}")
    began = time.perf_counter()
    setup = previous_setup(args.parked_mb) if args.previous_setup else contextlib.nullcontext()
    try:
        with setup:
            report = asyncio.run(engine_check.run_schedule(schedule, starter(
                model, args.flash_attention, slots=args.slots, prompt_cache_dir=folder / "cache",
                prompt_cache_mb=args.parked_mb)))
        ran = time.perf_counter() - began
        fresh = asyncio.run(engine_check.fresh_distributions(schedule.probes, starter(
            model, args.flash_attention, slots=1, prompt_cache_mb=0)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    engine_check.compare(report, fresh, args.tolerance)
    gaps = [engine_check.difference(o.top, fresh[o.turn.label]) for o in report.observations]
    print(f"run {ran:.0f} s; reused cells in {report.reused}/{len(report.observations)} turns; slot actions "
          f"{dict(sorted(report.slot_actions.items()))}; cancelled {report.cancelled}; restarts {report.restarts}")
    gaps.sort()
    print(f"difference from a fresh engine: median {statistics.median(gaps):.3g}, "
          f"p90 {gaps[int(len(gaps) * 0.9)]:.3g}, largest {gaps[-1]:.3g} (tolerance {args.tolerance:g}); "
          f"findings: {len(report.findings)}")
    for finding in report.findings:
        print("  " + finding)
    return 1 if report.findings else 0


async def _noise(model: Path, flash_attention: str, prompts: int, seed: int) -> dict[str, list[float]]:
    """Differences from a fresh engine's distribution: `split` (the prompt's own prefix reused at every split
    point), `beside` (decoded beside another slot's request), `batch` (evaluated in one batch with three other
    sequences of random lengths, as concurrent requests are); and the effects a tolerance must stay below: `token`
    (one character of the system prompt changed), `other` (another conversation's prompt)."""
    schedule = build_schedule(seed, conversations=max(6, prompts), rounds=8, restarts=0)
    conversations = schedule.conversations[:prompts]
    rng = random.Random(seed)
    report = engine_check.Report(seed)
    server = await asyncio.to_thread(starter(model, flash_attention, slots=4, prompt_cache_mb=0))
    client = engine_check._client(server, engine_check.Recorder(report, {}))
    engine = httpx.AsyncClient(base_url=server.engine_url, headers=server.engine_headers,
                               transport=server.engine_transport(), timeout=120)
    found: dict[str, list[float]] = {k: [] for k in ("split", "beside", "batch", "token", "other")}

    async def probe(turn: Turn, conversation: str | None = None) -> dict[int, float]:
        await engine_check._probe(client, turn, conversation)
        return report.observations[-1].top

    async def fresh(turn: Turn) -> dict[int, float]:
        for slot in range(4):
            await client.erase_slot(slot)
        server.slots.reset()
        return await probe(turn)

    async def batched(turn: Turn) -> dict[int, float]:
        # llama-server's own endpoints (not the OpenAI API): a prompt evaluated in one batch with three others
        template = await engine.post("/apply-template", json={"messages": list(turn.messages)})
        text = template.raise_for_status().json()["prompt"]
        others = [" ".join(rng.choice(("river", "oath", "ember", "wolf", "bread")) for _ in range(rng.randint(2, 60)))
                  for _ in range(3)]
        response = await engine.post("/completion", json={
            "prompt": [text, *others], "n_predict": 1, "n_probs": engine_check.TOP_K, "cache_prompt": False,
            "temperature": 0})
        first = next(r for r in response.raise_for_status().json() if r["index"] == 0)
        return {int(t["id"]): math.exp(float(t["logprob"]))
                for t in first["completion_probabilities"][0]["top_logprobs"]}

    try:
        for c in conversations:
            turn = Turn("t", c, tuple(c.messages(5)))
            base = await fresh(turn)
            for split in range(5):
                await fresh(Turn("p", c, tuple(c.messages(split))))
                found["split"].append(engine_check.difference(await probe(turn), base))
            other = next(o for o in conversations[conversations.index(c) + 1:] + conversations
                         if o.messages(5) != c.messages(5))  # not its byte-identical twin
            beside = await asyncio.gather(probe(turn, "a" * 64), probe(Turn("o", other, tuple(other.messages(5))),
                                                                       "b" * 64))
            found["beside"].append(engine_check.difference(beside[0], base))
            for _ in range(4):
                found["batch"].append(engine_check.difference(await batched(turn), base))
            changed = Conversation("x", "x", c.system.replace("e", "a", 1), c.lines, c.group)
            found["token"].append(engine_check.difference(
                await fresh(Turn("x", changed, tuple(changed.messages(5)))), base))
            found["other"].append(engine_check.difference(await fresh(Turn("o", other, tuple(other.messages(5)))),
                                                          base))
    finally:
        await engine.aclose()
        await client.aclose()
        await asyncio.to_thread(server.stop)
    return found


def run_noise(args: argparse.Namespace, model: Path) -> int:
    seed = args.seed if args.seed is not None else 1
    for flash_attention in ("off", "auto"):
        found = asyncio.run(_noise(model, flash_attention, args.prompts, seed))
        parts = []
        for what, values in found.items():
            values.sort()
            kind = "min" if what in ("token", "other") else "max"
            parts.append(f"{what} {kind} {(values[0] if kind == 'min' else values[-1]):.3g} "
                         f"(median {statistics.median(values):.3g}, n {len(values)})")
        print(f"flash attention {flash_attention}: " + "; ".join(parts))
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _rotation(server: LlamaServerProcess, npcs: int, rounds: int, seed: int) -> dict[str, list[float]]:
    from pyruntime.model.client.http import OpenAICompatClient
    from pyruntime.model.client.types import TextDelta, UsageDelta

    rng = random.Random(seed)
    words = ("river", "lantern", "market", "copper", "storm", "oath", "bread", "wolf", "harbor", "ember")
    personas = [f"You are NPC {i} of the town. " + " ".join(rng.choice(words) for _ in range(220)) for i in range(npcs)]
    client = OpenAICompatClient(**server.client_options())
    measured: dict[str, list[float]] = {"evaluated": [], "ttft": []}
    history: list[list[dict[str, str]]] = [[{"role": "system", "content": p}] for p in personas]
    try:
        for round_number in range(rounds):
            for npc in range(npcs):
                messages = history[npc] + [{"role": "user", "content": f"Round {round_number}: any news?"}]
                began = time.perf_counter()
                first = None
                evaluated = 0
                text = []
                async with client.stream_chat(messages, max_tokens=16, temperature=0.0,
                                              conversation=f"{npc:064x}") as stream:
                    async for delta in stream:
                        if isinstance(delta, TextDelta):
                            first = first or time.perf_counter() - began
                            text.append(delta.text)
                        elif isinstance(delta, UsageDelta):
                            evaluated = delta.usage.prompt_tokens - delta.usage.cached_tokens
                history[npc] = messages + [{"role": "assistant", "content": "".join(text)}]
                if round_number:  # each NPC's first turn is cold for every setup
                    measured["evaluated"].append(evaluated)
                    measured["ttft"].append(first or 0.0)
    finally:
        await client.aclose()
    return measured


@contextlib.contextmanager
def previous_setup(cache_mb: int) -> Iterator[None]:
    """The engine as it ran before parking: llama-server's host cache (`--cache-ram`), and slots that change hands
    with their cells (the client only erased a superseded state)."""
    import pytest

    from pyruntime.model import llama_server as llama_server_module
    from pyruntime.model.client.slot_moves import SlotMoves
    from pyruntime.model.client.slots import SlotUse

    async def previous_prepare(self: SlotMoves, use: SlotUse) -> bool:
        if use.erase_first:
            await self.erase(use.slot)
        return False

    command = llama_server_module.server_command

    def host_cache_command(*a: Any, **k: Any) -> list[str]:
        argv = command(*a, **k)
        argv[argv.index("--cache-ram") + 1] = str(cache_mb)
        return argv + ["--no-cache-idle-slots"]

    patch = pytest.MonkeyPatch()
    patch.setattr(SlotMoves, "prepare", previous_prepare)
    patch.setattr("pyruntime.model.hosting.process.server_command", host_cache_command)
    try:
        yield
    finally:
        patch.undo()


def run_parking(args: argparse.Namespace, model: Path) -> int:
    seed = args.seed if args.seed is not None else 1
    results: dict[str, Any] = {}
    for setup in ("parked", "host cache", "parked ", "host cache "):  # twice each, alternating
        with previous_setup(args.parked_mb) if setup.strip() == "host cache" else contextlib.nullcontext():
            server = starter(model, "auto", slots=args.slots, prompt_cache_mb=args.parked_mb)()
            try:
                cpu = _cpu_seconds(server.pid or 0)
                measured = asyncio.run(_rotation(server, args.npcs, args.rounds, seed))
                measured["cpu"] = [_cpu_seconds(server.pid or 0) - cpu]
            finally:
                server.stop()
        previous = results.get(setup.strip())
        results[setup.strip()] = measured if previous is None else {k: previous[k] + v for k, v in measured.items()}
    turns = args.npcs * (args.rounds - 1)
    print(f"{args.npcs} NPCs (~230-token personas) in rotation on {args.slots} slots, {args.rounds} rounds, 16-token "
          f"replies, twice each setup alternating; {turns} warm turns per run")
    for setup, measured in results.items():
        evaluated, ttft = sorted(measured["evaluated"]), sorted(measured["ttft"])
        print(f"  {setup:10s}: evaluated per turn median {statistics.median(evaluated):.0f}, p90 "
              f"{evaluated[int(len(evaluated) * 0.9)]:.0f}; TTFT p50 {statistics.median(ttft):.2f} s, p90 "
              f"{ttft[int(len(ttft) * 0.9)]:.2f} s; engine CPU {sum(measured['cpu']) / 2:.1f} s per run")
    return 0


def run_runtime(args: argparse.Namespace, model: Path) -> int:
    import pytest

    from tests.isolation import runtime_harness
    from tests.isolation.test_runtime_isolation import RecordingEngine, cast, clients_of, play, roles

    people = cast()
    RecordingEngine.people = people
    patch = pytest.MonkeyPatch()
    patch.setattr(runtime_harness, "DebugSlotsEngine", RecordingEngine)
    data = Path(tempfile.mkdtemp(prefix="coreai-isolation-"))
    findings: list[str] = []
    requests = 0
    actions: dict[str, int] = {}
    try:
        for rounds in (range(args.rounds), range(args.rounds, 2 * args.rounds)):
            served = runtime_harness.serve(model, data, roles=roles(people), slots=args.slots, prompt_cache_mb=256,
                                           n_threads=default_threads())
            try:
                play(clients_of(served.handle), people, rounds)
            finally:
                served.stop()
            recorder = served.engine.recorder  # type: ignore[attr-defined]
            findings += recorder.findings
            requests += len(recorder.bodies)
            for action, count in recorder.slot_actions.items():
                actions[action] = actions.get(action, 0) + count
    finally:
        patch.undo()
        shutil.rmtree(data, ignore_errors=True)
    print(f"{len(people.conversations)} conversations, {2 * args.rounds} rounds with a restart: {requests} engine "
          f"requests, slot actions {dict(sorted(actions.items()))}; findings: {len(findings)}")
    for finding in findings:
        print("  " + finding)
    return 1 if findings else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--seed", type=int, default=None, help="the interleaving's seed (default: a random one)")
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--parked-mb", type=int, default=256)
    parser.add_argument("--flash-attention", choices=("off", "auto"), default="off")
    parser.add_argument("--tolerance", type=float, default=engine_check.PROB_TOLERANCE)
    parser.add_argument("--previous-setup", action="store_true",
                        help="the engine check against the engine as it ran before parking (host cache on)")
    parser.add_argument("--noise", action="store_true", help="measure the numeric noise and one token's effect")
    parser.add_argument("--prompts", type=int, default=12, help="--noise: prompts measured")
    parser.add_argument("--runtime", action="store_true", help="the runtime isolation check instead")
    parser.add_argument("--parking", action="store_true", help="what parking states costs against the host cache")
    parser.add_argument("--npcs", type=int, default=8, help="--parking: NPCs in rotation")
    args = parser.parse_args()
    model = args.model or embedded_model_path()
    if args.noise:
        return run_noise(args, model)
    if args.runtime:
        return run_runtime(args, model)
    if args.parking:
        return run_parking(args, model)
    return run_engine(args, model)


if __name__ == "__main__":
    raise SystemExit(main())
