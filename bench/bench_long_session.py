"""One long conversation measured from outside, as a game meets it: the runtime against the naive game.

The path a user takes: `coreai-runtime serve` with its embedded model (the hosted llama-server, game settings),
one NPC and one player talking through the public async client (gRPC or Connect), the game appending a fact to
the NPC's memory every `--edit-every` turns through the same client, a seeded 1-2 s pause after each reply (a
player reading it). The baseline in the same run: the naive game on a bare `llama-server` of the same binary,
model, threads and per-conversation context, sending what a game without the runtime sends (the NPC's prompt
with its memory pasted in, the whole history until it no longer fits, then without its oldest exchange; the
prompts of bench_npcs.py's naive pass). Passes run one after the other, never together (`--rounds 2` plays
runtime, naive, naive, runtime), each with the machine to itself.

Per turn: time to the first token the player sees, and prompt tokens evaluated (the runtime's from the turn's
usage, the naive game's from llama-server's usage chunk). The figures skip the first turn (cold for both) and
report the turns after the conversation's history outgrew `--window` messages separately.

Run: `nice -n 10 .venv/bin/python bench/bench_long_session.py --turns 40 --edit-every 8 --window 10`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_npcs import FACTS, HINTS, npc_prompt  # noqa: E402
from bench.bench_players import TOKEN, Process  # noqa: E402
from pyruntime.client import AsyncRuntimeClient  # noqa: E402
from pyruntime.history import LlamaTokenCounter, count_chat_tokens  # noqa: E402
from pyruntime.model.hosting.embedded import embedded_model_path  # noqa: E402
from pyruntime.policy import RoleMemoryConfig  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402

ROLE = "Innkeeper"
MAX_TOKENS = 16
CTX_PER_CONVERSATION = 8192  # the hosted engine's context per slot (serve's --ctx default)
MEMORY_HEADING = "## Memory"


@dataclass
class Pass:
    """What one pass measured, per turn after the first."""

    name: str
    ttft: list[float] = field(default_factory=list)
    evaluated: list[int] = field(default_factory=list)
    past_window: list[bool] = field(default_factory=list)

    def add(self, ttft: float, evaluated: int, past_window: bool) -> None:
        self.ttft.append(ttft)
        self.evaluated.append(evaluated)
        self.past_window.append(past_window)

    def select(self, past: bool | None) -> tuple[list[float], list[int]]:
        keep = [past is None or p == past for p in self.past_window]
        return ([t for t, k in zip(self.ttft, keep, strict=True) if k],
                [e for e, k in zip(self.evaluated, keep, strict=True) if k])


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def hint(turn: int) -> str:
    return f"{HINTS[turn % len(HINTS)]} (turn {turn + 1})"


def fact(turn: int, edit_every: int) -> str:
    return FACTS[(3 + turn // edit_every) % len(FACTS)] + f" (noted on turn {turn + 1})"


def pauses(turns: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(1.0, 2.0) for _ in range(turns)]


async def runtime_pass(args: argparse.Namespace, work: Path) -> Pass:
    """The runtime as shipped, driven through its public client."""
    extra = [a for arg in args.serve_arg for a in arg.split()]
    result = Pass(f"runtime ({args.transport}, public client{', ' + ' '.join(extra) if extra else ''})")
    serve = Process([sys.executable, "-m", "pyruntime.cli", "serve", "--data-dir", str(work / "data"),
                     "--grpc-port", str(free_port()), "--connect-port", str(free_port()), "--port", str(free_port()),
                     "--threads", str(args.threads), "--log-level", "warning", *extra], ROOT,
                    {"COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)})
    try:
        url = (f"grpc://127.0.0.1:{serve.ready['grpc_port']}" if args.transport == "grpc"
               else f"http://127.0.0.1:{serve.ready['connect_port']}")
        scope = AgentMemoryScope(user_id="alex")
        async with AsyncRuntimeClient(url, token=TOKEN, timeout=300) as client:
            await client.configure_role(RoleMemoryConfig(
                role_id=ROLE, system_prompt=npc_prompt(0), with_chat_history=True, persist_chat_history=True,
                max_chat_history_messages=args.window, temperature=0.0, max_output_tokens=MAX_TOKENS))
            for i in range(args.facts):
                await client.apply_memory_tool(ROLE, {"action": "append", "content": FACTS[i]}, scope=scope)
            for turn, pause in enumerate(pauses(args.turns, args.seed)):
                if turn and turn % args.edit_every == 0:
                    await client.apply_memory_tool(ROLE, {"action": "append", "content": fact(turn, args.edit_every)},
                                                   scope=scope)
                began = time.perf_counter()
                first: float | None = None
                final: Any = None
                async for event in client.stream_task(hint(turn), role_id=ROLE, scope=scope,
                                                      max_output_tokens=MAX_TOKENS):
                    if first is None and event.HasField("text_delta") and event.text_delta.text:
                        first = time.perf_counter() - began
                    if event.HasField("final"):
                        final = event.final
                if final is None:
                    raise RuntimeError(f"turn {turn + 1} ended without a final event")
                usage = final.usage
                if turn:
                    result.add(first if first is not None else time.perf_counter() - began,
                               usage.prompt_tokens - usage.cached_prompt_tokens, 2 * turn > args.window)
                await asyncio.sleep(pause)
    finally:
        serve.stop()
    return result


async def naive_pass(args: argparse.Namespace, work: Path) -> Pass:
    """A game without the runtime: its own llama-server, memory pasted into the system prompt, the whole history."""
    import httpx

    result = Pass("naive game (own llama-server)")
    port = free_port()
    model = embedded_model_path()
    engine = subprocess.Popen([str(Path(sys.executable).parent / "llama-server"), "--model", str(model),
                               "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(CTX_PER_CONVERSATION),
                               "--parallel", "1", "--threads", str(args.threads), "--threads-batch", str(args.threads),
                               "--jinja", "--no-ui", "--log-disable"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counter = LlamaTokenCounter(model)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
            deadline = time.monotonic() + 120
            while (await _health(http)) != 200:
                if time.monotonic() > deadline or engine.poll() is not None:
                    raise RuntimeError("the naive game's llama-server did not start")
                await asyncio.sleep(0.2)
            memory = list(FACTS[: args.facts])
            history: list[dict[str, str]] = []
            for turn, pause in enumerate(pauses(args.turns, args.seed)):
                if turn and turn % args.edit_every == 0:
                    memory.append(fact(turn, args.edit_every))
                system = npc_prompt(0) + f"\n\n{MEMORY_HEADING}\n" + "\n".join(memory)
                while True:
                    messages = [{"role": "system", "content": system}, *history,
                                {"role": "user", "content": hint(turn)}]
                    if _tokens(counter, messages) + MAX_TOKENS <= CTX_PER_CONVERSATION or not history:
                        break
                    history = history[2:]
                body = {"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0.0, "seed": 0,
                        "stream": True, "stream_options": {"include_usage": True}}
                began = time.perf_counter()
                first: float | None = None
                text: list[str] = []
                evaluated = 0
                async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = _json(line[6:])
                        for choice in chunk.get("choices") or []:
                            piece = (choice.get("delta") or {}).get("content") or ""
                            if piece:
                                first = first if first is not None else time.perf_counter() - began
                                text.append(piece)
                        timings = chunk.get("timings")
                        if timings:
                            evaluated = int(timings.get("prompt_n", 0))
                history += [{"role": "user", "content": hint(turn)}, {"role": "assistant", "content": "".join(text)}]
                if turn:
                    result.add(first if first is not None else time.perf_counter() - began, evaluated,
                               2 * turn > args.window)
                await asyncio.sleep(pause)
    finally:
        engine.terminate()
        engine.wait(30)
    return result


async def _health(http: Any) -> int:
    try:
        return int((await http.get("/health")).status_code)
    except Exception:  # noqa: BLE001 - not listening yet
        return 0


def _json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def _tokens(counter: Any, messages: list[dict[str, str]]) -> int:
    return int(count_chat_tokens(counter, messages))


def report(passes: list[Pass]) -> None:
    """Each pass's TTFT p50 / p90 / max and tokens evaluated, all turns and past the window, and the ratios."""
    print("| pass | turns | TTFT p50 / p90 / max s | evaluated median | past the window: TTFT p50 / p90 s |")
    print("|---|---|---|---|---|")
    for p in passes:
        ttft, evaluated = p.select(None)
        late, _ = p.select(True)
        print(f"| {p.name} | {len(ttft)} | {quantile(ttft, 0.5):.2f} / {quantile(ttft, 0.9):.2f} / {max(ttft):.2f} | "
              f"{statistics.median(evaluated):.0f} | {quantile(late, 0.5):.2f} / {quantile(late, 0.9):.2f} |")
    runtime = [t for p in passes if p.name.startswith("runtime") for t in p.select(None)[0]]
    naive = [t for p in passes if p.name.startswith("naive") for t in p.select(None)[0]]
    if runtime and naive:
        print(f"\nruntime / naive game: TTFT p50 {quantile(runtime, 0.5) / quantile(naive, 0.5):.2f}x, "
              f"p90 {quantile(runtime, 0.9) / quantile(naive, 0.9):.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--edit-every", type=int, default=8, help="the game appends a fact every N turns")
    parser.add_argument("--facts", type=int, default=3, help="facts the NPC's memory starts with")
    parser.add_argument("--window", type=int, default=10, help="the role's chat history window, in messages")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads, both passes (serve's default here)")
    parser.add_argument("--transport", choices=("grpc", "connect"), default="grpc")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (runtime, naive), order flipped each round")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="more `serve` options for the runtime pass, e.g. --serve-arg '--prewarm off' (to find "
                             "where the runtime's time goes)")
    parser.add_argument("--per-turn", action="store_true", help="also print each turn's TTFT s / tokens evaluated")
    args = parser.parse_args()
    passes: list[Pass] = []
    for round_ in range(args.rounds):
        order = (runtime_pass, naive_pass) if round_ % 2 == 0 else (naive_pass, runtime_pass)
        for play in order:
            with tempfile.TemporaryDirectory(prefix="bench-long-") as work:
                done = await play(args, Path(work))
            print(f"{done.name}: {len(done.ttft)} turns, TTFT p50 {quantile(done.ttft, 0.5):.2f} s", flush=True)
            passes.append(done)
    report(passes)
    if args.per_turn:
        for p in passes:
            print(f"{p.name}: " + " ".join(f"{t:.2f}/{e}" for t, e in zip(p.ttft, p.evaluated, strict=True)))


if __name__ == "__main__":
    asyncio.run(main())
