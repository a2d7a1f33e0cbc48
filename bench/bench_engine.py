"""Benchmark: the hosted engine against a bare llama-server of the same build and threads, side by side.

Same GGUF (the embedded SmolLM2-135M Q4_1 unless --model), same binary (the one the runtime finds), same
threads, the OpenAI chat API streamed, temperature 0, `--max-tokens` per reply. Three targets:

- **bare**: `llama-server -m MODEL -np SLOTS -c SLOTS*CTX -t THREADS` on a loopback port, nothing else
  (llama-server's own defaults: its 8 GiB host cache, idle slots cached, slots picked by prompt similarity);
- **model port**: the runtime's hosted engine (`hosted_model_config`, as `serve` ships it) through the
  public model port, as an external OpenAI client (the `openai` package, Unity code) reaches it: our guard
  (connection cap, timeouts, key, Host/Origin) forwarding to llama-server;
- **orchestrator path**: the same engine as the runtime's turns reach it: directly over its Unix socket,
  each NPC in its own slot (`id_slot`, slot affinity), the way `build_orchestrator` wires the client.

Workloads: one NPC, a growing conversation (`--turns`, default 12); four NPCs in rotation (`--rotation`,
default 24 turns); four NPC turns sent at once (`--rounds`, default 6). Reported per target: generation
tok/s (tokens after the first / time after the first, per stream, median), aggregate tok/s of the
concurrent rounds (all tokens / round wall time), time to first token p50/p90, prompt tokens evaluated
per turn (llama-server's `timings.prompt_n`) and the server's RSS after the workloads; then the ratios
against bare. Last, through `serve` itself (the whole turn path: RPC, memory, history, the engine): four
NPC turns at once against the same four one after the other, wall time per batch (`--batches`).

Timing figures need a quiet machine (llama.cpp's threads spin: other load halves them).

Run: `nice -n 5 .venv/bin/python bench/bench_engine.py [--quick] [--threads 2]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.client.slots import conversation_id  # noqa: E402
from pyruntime.model.client.types import TextDelta, UsageDelta  # noqa: E402
from pyruntime.model.hosting.embedded import embedded_model_path  # noqa: E402
from pyruntime.model.hosting.llama_server import DEFAULT_N_CTX, DEFAULT_SLOTS, default_threads, find_llama_server  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config  # noqa: E402
from pyruntime.service.model_memory import process_rss_bytes  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402

NAMES = ("Bram", "Elda", "Tomas", "Ina", "Garrick", "Mira", "Oswin", "Petra")
LINES = ("Good morning! What do you sell here?", "How much for the iron sword?", "Can you tell me about the mine?",
         "Who lives in the old tower?", "Is the road to Riverwood safe?", "What happened to the last mayor?",
         "Do you know my sister Ina?", "Where can I buy bread?", "Tell me a story about the war.",
         "What do you think of the king?", "Have you seen a grey cat?", "Goodbye, and thank you.")


def persona(name: str, tag: str) -> str:
    """A ~220-token NPC system prompt; `tag` keeps targets that share an engine from sharing states."""
    facts = " ".join(f"{name} knows fact number {i} about the village of Eldham ({tag})." for i in range(14))
    return f"You are {name}, a villager of Eldham. Answer in one or two short sentences. {facts}"


@dataclass
class Reply:
    """One streamed reply as the client saw it."""

    ttft_s: float
    total_s: float
    tokens: int
    evaluated: int

    @property
    def gen_tps(self) -> float | None:
        """Tokens after the first over the time after the first."""
        span = self.total_s - self.ttft_s
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else None


@dataclass
class Result:
    """One target's figures."""

    name: str
    one: list[Reply] = field(default_factory=list)
    rotation: list[Reply] = field(default_factory=list)
    rounds: list[tuple[float, list[Reply]]] = field(default_factory=list)
    rss_mb: float = 0.0


Ask = Callable[[str, list[dict[str, str]]], Any]


def _client_asker(client: OpenAICompatClient, affinity: bool, max_tokens: int) -> Ask:
    async def ask(conversation: str, messages: list[dict[str, str]]) -> Reply:
        began = time.perf_counter()
        first = None
        tokens = evaluated = 0
        async with client.stream_chat(messages, max_tokens=max_tokens, temperature=0.0,
                                      conversation=conversation if affinity else None) as stream:
            async for delta in stream:
                if isinstance(delta, TextDelta) and first is None:
                    first = time.perf_counter() - began
                elif isinstance(delta, UsageDelta):
                    tokens = delta.usage.completion_tokens
                    evaluated = delta.usage.prompt_tokens - delta.usage.cached_tokens
        total = time.perf_counter() - began
        return Reply(first if first is not None else total, total, tokens, evaluated)

    return ask


async def run_workloads(name: str, ask: Ask, args: argparse.Namespace) -> Result:
    """The three workloads against one target."""
    result = Result(name)
    tag = name.replace(" ", "-")
    one = [{"role": "system", "content": persona("Bram", tag)}]
    for turn in range(args.turns):
        one.append({"role": "user", "content": LINES[turn % len(LINES)]})
        reply = await ask(conversation_id(f"{tag}/one"), one)
        result.one.append(reply)
        one.append({"role": "assistant", "content": "Hm."})  # the same history on every target
    talks = {n: [{"role": "system", "content": persona(n, tag)}] for n in NAMES[:4]}
    for turn in range(args.rotation):
        npc = NAMES[turn % 4]
        talks[npc].append({"role": "user", "content": LINES[(turn // 4) % len(LINES)]})
        result.rotation.append(await ask(conversation_id(f"{tag}/rot/{npc}"), talks[npc]))
        talks[npc].append({"role": "assistant", "content": "Hm."})
    crowd = {n: [{"role": "system", "content": persona(n, tag + "-at-once")}] for n in NAMES[4:8]}
    for round_ in range(args.rounds):
        for npc in crowd:
            crowd[npc].append({"role": "user", "content": LINES[round_ % len(LINES)]})
        began = time.perf_counter()
        replies = await asyncio.gather(*(ask(conversation_id(f"{tag}/crowd/{n}"), m) for n, m in crowd.items()))
        result.rounds.append((time.perf_counter() - began, list(replies)))
        for npc in crowd:
            crowd[npc].append({"role": "assistant", "content": "Hm."})
    return result


def bare_server(binary: Path, model: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    """A bare llama-server on a loopback port: the same flags a user would start it with, nothing of ours."""
    port = free_port()
    process = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                                "-np", str(args.slots), "-c", str(args.slots * DEFAULT_N_CTX), "-t", str(args.threads),
                                "-tb", str(args.threads), "--no-ui"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, f"{url}/v1"
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit("the bare llama-server did not start")


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def summary(result: Result) -> dict[str, float]:
    """The figures of one target."""
    def gen(replies: list[Reply]) -> float:
        speeds = [r.gen_tps for r in replies if r.gen_tps is not None]
        return statistics.median(speeds) if speeds else float("nan")

    crowd = [r for _, replies in result.rounds for r in replies]
    aggregate = [sum(r.tokens for r in replies) / wall for wall, replies in result.rounds if wall > 0]
    return {
        "one_gen_tps": gen(result.one), "rotation_gen_tps": gen(result.rotation),
        "at_once_aggregate_tps": statistics.median(aggregate) if aggregate else float("nan"),
        "at_once_ttft_p50": pct([r.ttft_s for r in crowd], 0.5),
        "at_once_ttft_p90": pct([r.ttft_s for r in crowd], 0.9),
        "one_ttft_p50": pct([r.ttft_s for r in result.one], 0.5),
        "rotation_ttft_p50": pct([r.ttft_s for r in result.rotation], 0.5),
        "rotation_ttft_p90": pct([r.ttft_s for r in result.rotation], 0.9),
        "one_evaluated_median": statistics.median(r.evaluated for r in result.one),
        "rotation_evaluated_median": statistics.median(r.evaluated for r in result.rotation[4:] or result.rotation),
        "at_once_evaluated_median": statistics.median(r.evaluated for r in crowd[4:] or crowd),
        "rss_mb": result.rss_mb,
    }


ROWS = (
    ("one NPC, growing conversation: generation tok/s", "one_gen_tps", "{:.1f}"),
    ("four NPCs in rotation: generation tok/s", "rotation_gen_tps", "{:.1f}"),
    ("four turns at once: aggregate tok/s", "at_once_aggregate_tps", "{:.1f}"),
    ("four turns at once: TTFT p50 s", "at_once_ttft_p50", "{:.2f}"),
    ("four turns at once: TTFT p90 s", "at_once_ttft_p90", "{:.2f}"),
    ("one NPC: TTFT p50 s", "one_ttft_p50", "{:.2f}"),
    ("rotation: TTFT p50 s", "rotation_ttft_p50", "{:.2f}"),
    ("rotation: TTFT p90 s", "rotation_ttft_p90", "{:.2f}"),
    ("one NPC: prompt tokens evaluated per turn, median", "one_evaluated_median", "{:.0f}"),
    ("rotation: prompt tokens evaluated per turn, median", "rotation_evaluated_median", "{:.0f}"),
    ("at once: prompt tokens evaluated per turn, median", "at_once_evaluated_median", "{:.0f}"),
    ("server RSS after the workloads, MB", "rss_mb", "{:.0f}"),
)


def print_table(results: list[Result]) -> None:
    """A markdown table: one column per target, then each target's ratio to bare."""
    figures = [summary(r) for r in results]
    base = figures[0]
    names = [r.name for r in results]
    print("| workload | " + " | ".join(names) + " | " + " | ".join(f"{n} / bare" for n in names[1:]) + " |")
    print("|---" * (1 + 2 * len(names) - 1) + "|")
    for label, key, fmt in ROWS:
        cells = [fmt.format(f[key]) for f in figures]
        ratios = [f"{f[key] / base[key]:.2f}x" if base[key] else "-" for f in figures[1:]]
        print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


def serve_batches(model: Path, args: argparse.Namespace) -> None:
    """Four NPC turns at once against the same four one after the other, through `serve` (the whole turn path)."""
    from pyruntime.client import RuntimeClient
    from pyruntime.net.auth import read_token_file
    from pyruntime.policy import RoleMemoryConfig
    from pyruntime.scopes import AgentMemoryScope

    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data"
        process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.cli", "serve", "--model", str(model), "--threads", str(args.threads),
             "--port", str(free_port()), "--grpc-port", "0", "--connect-port", "0", "--data-dir", str(data),
             "--slots", str(args.slots)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        try:
            assert process.stdout is not None
            ready = json.loads(process.stdout.readline())
            token = read_token_file(Path(ready["token_file"]))
            url = f"grpc://127.0.0.1:{ready['grpc_port']}"
            scope = AgentMemoryScope(user_id="bench")
            roles = [f"Npc{n}" for n in range(4)]
            with RuntimeClient(url, token=token, timeout=600) as setup:
                for role, name in zip(roles, NAMES[: len(roles)], strict=True):
                    setup.configure_role(RoleMemoryConfig(role, use_memory_tool=False, temperature=0.0,
                                                          max_output_tokens=args.max_tokens,
                                                          system_prompt=persona(name, "serve")))

            def turn(role: str, line: str) -> None:
                with RuntimeClient(url, token=token, timeout=600) as client:
                    client.run_task(line, role_id=role, scope=scope, forced_tool_mode="none")

            def sequential(line: str) -> float:
                began = time.perf_counter()
                for role in roles:
                    turn(role, line)
                return time.perf_counter() - began

            def concurrent(line: str) -> float:
                began = time.perf_counter()
                threads = [threading.Thread(target=turn, args=(role, line)) for role in roles]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                return time.perf_counter() - began

            sequential("Hello!")  # warm: every NPC's persona evaluated once
            ratios = []
            for batch in range(args.batches):
                line = LINES[batch % len(LINES)]
                if batch % 2:
                    together, one_by_one = concurrent(line), sequential(line + " Please.")
                else:
                    one_by_one, together = sequential(line), concurrent(line + " Please.")
                ratios.append(together / one_by_one)
                print(f"  batch {batch}: one after the other {one_by_one:.2f} s, at once {together:.2f} s")
            print(f"four turns at once through serve / one after the other: median {statistics.median(ratios):.2f}x "
                  f"({args.batches} batches, {args.slots} slots)")
        finally:
            process.terminate()
            process.wait(30)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--slots", type=int, default=DEFAULT_SLOTS)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--rotation", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="a small run that checks the bench works")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.rotation, args.rounds, args.batches, args.max_tokens = 3, 8, 2, 2, 12
    model = args.model or embedded_model_path()
    binary = find_llama_server()
    print(f"model {model.name}, {args.threads} threads, {args.slots} slots, max {args.max_tokens} tokens, "
          f"binary {binary}")
    results = []

    process, url = bare_server(binary, model, args)
    try:
        client = OpenAICompatClient(url, llama_server=True)
        results.append(asyncio.run(_with(client, lambda: run_workloads("bare", _client_asker(client, False,
                                                                                          args.max_tokens), args))))
        results[-1].rss_mb = process_rss_bytes(process.pid) / 1e6
    finally:
        process.terminate()
        process.wait(30)

    config = hosted_model_config(args.model, port=free_port(), n_threads=args.threads, slots=args.slots)
    with LlamaServerProcess(config) as server:
        public = OpenAICompatClient(server.base_url, api_key=server.api_key, llama_server=True)
        results.append(asyncio.run(_with(public, lambda: run_workloads(
            "model port", _client_asker(public, False, args.max_tokens), args))))
        direct = OpenAICompatClient(**server.client_options())
        results.append(asyncio.run(_with(direct, lambda: run_workloads(
            "orchestrator path", _client_asker(direct, True, args.max_tokens), args))))
        rss = process_rss_bytes(server.pid) / 1e6
        results[-1].rss_mb = results[-2].rss_mb = rss
    print()
    print_table(results)
    print()
    serve_batches(model, args)
    return 0


async def _with(client: OpenAICompatClient, work: Callable[[], Any]) -> Any:
    try:
        return await work()
    finally:
        await client.aclose()


if __name__ == "__main__":
    sys.exit(main())
