"""Benchmark of the tool-call modes with the embedded SmolLM2-135M: does the model store a stated fact?

For each mode, N tries (fresh data dir each, seed = try number) of one SmartChat turn with the hint
"Remember this: my sword is called Dawnbreaker." through the real orchestrator and the real hosted
llama.cpp server. A try succeeds when the memory document on disk afterwards contains
"Dawnbreaker". Also measured: the median turn latency, the model calls per turn, and (with
`--chit-chat`) how often small talk that states nothing ("Hi! How are you today?", "Tell me a
joke.", ... one line per try, in turn) still writes memory.

Modes:
- native: OpenAI `tools` with `tool_choice` auto (with the model's own template llama.cpp then
  answers in plain text: no structured `tool_calls`, see the toolchain notes)
- structured: one grammar-constrained JSON reply per round (up to 4 calls per round)
- structured-1: the same with at most 1 call per round (the factory's profile for a hosted model)
- structured-1-noguard: structured-1 without the format-example guard (the memory tool then also
  stores a pasted copy of the contract's example), the baseline of the guard

Run: `.venv/bin/python bench/bench_tool_modes.py [--tries 10] [--temperature T] [--chit-chat]`
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, ToolCallMode, build_orchestrator, tool_loop
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND, copies_format_example
from tests.support.fixtures import free_port

ROLE = "SmartChat"
FACT_HINT = "Remember this: my sword is called Dawnbreaker."
FACT = "Dawnbreaker"
CHIT_CHAT_HINTS = ("Hi! How are you today?", "hello, how are you?", "What a nice day it is.", "Tell me a joke.",
                   "Thanks, see you later!")
MODES = {  # mode: (tool-call mode, calls per round, format-example guard on)
    "native": (ToolCallMode.NATIVE, MAX_CALLS_PER_ROUND, True),
    "structured": (ToolCallMode.STRUCTURED, MAX_CALLS_PER_ROUND, True),
    "structured-1": (ToolCallMode.STRUCTURED, 1, True),
    "structured-1-noguard": (ToolCallMode.STRUCTURED, 1, False),
}
_GUARD = copies_format_example


@dataclass
class Row:
    mode: str
    stored: int = 0
    tries: int = 0
    latencies: list[float] = field(default_factory=list)
    model_calls: list[int] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    spurious: int = 0
    chit_chat_tries: int = 0
    chit_chat_latencies: list[float] = field(default_factory=list)
    chit_chat_statuses: dict[str, int] = field(default_factory=dict)


async def one_turn(server: LlamaServerProcess, mode: str, hint: str, seed: int, args: argparse.Namespace
                   ) -> tuple[str, float, int, str]:
    """(memory on disk afterwards, seconds, model calls, status) of one turn in a fresh data dir."""
    tool_mode, max_calls, guard = MODES[mode]
    # no switch for the guard: the bench replaces the tool loop's own name for it
    tool_loop.copies_format_example = _GUARD if guard else (lambda arguments, player_text: False)
    with tempfile.TemporaryDirectory() as data_dir:
        orchestrator = build_orchestrator(server=server, data_dir=Path(data_dir), tool_mode=tool_mode,
                                          max_calls_per_round=max_calls)
        request = AiTaskRequest(hint=hint, role_id=ROLE, source_tag="Chat", max_output_tokens=args.max_tokens,
                                temperature=args.temperature, timeout=args.timeout, extra={"seed": seed})
        began = time.perf_counter()
        result = await orchestrator.run_task(request)
        seconds = time.perf_counter() - began
        await orchestrator.client.aclose()
        # What another process would read: fresh file stores on the same folder.
        loaded = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir)).scoped().try_load(ROLE)
        memory = loaded.state.memory if loaded.state is not None else ""
    return memory, seconds, result.usage.model_calls, result.status.name


async def measure(server: LlamaServerProcess, args: argparse.Namespace) -> list[Row]:
    rows = []
    for mode in args.modes:
        row = Row(mode)
        for i in range(args.tries):
            memory, seconds, calls, status = await one_turn(server, mode, FACT_HINT, i, args)
            row.tries += 1
            row.stored += FACT in memory
            row.latencies.append(seconds)
            row.model_calls.append(calls)
            row.statuses[status] = row.statuses.get(status, 0) + 1
            print(f"  {mode:<12} fact try {i + 1}/{args.tries}: {'stored' if FACT in memory else 'not stored'}, "
                  f"{seconds:.1f} s, {calls} model call(s), {status}", flush=True)
        if args.chit_chat:
            for i in range(args.tries):
                hint = CHIT_CHAT_HINTS[i % len(CHIT_CHAT_HINTS)]
                memory, seconds, _, status = await one_turn(server, mode, hint, 1000 + i, args)
                row.chit_chat_tries += 1
                row.chit_chat_latencies.append(seconds)
                row.chit_chat_statuses[status] = row.chit_chat_statuses.get(status, 0) + 1
                row.spurious += bool(memory.strip())
                print(f"  {mode:<12} chit-chat try {i + 1}/{args.tries}: "
                      f"{'memory written' if memory.strip() else 'nothing stored'}, {seconds:.1f} s, {status}",
                      flush=True)
        rows.append(row)
    return rows


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    temperature = "server default (0.8)" if args.temperature is None else f"{args.temperature:g}"
    print(f"\nSmolLM2-135M-Instruct Q4_1, role {ROLE}, hint {FACT_HINT!r}, temperature {temperature}, "
          f"max_output_tokens {args.max_tokens}, turn timeout {args.timeout:g} s")
    header = "| mode | fact stored | median turn s | median model calls | turn statuses |"
    if args.chit_chat:
        header += " memory written on chit-chat | chit-chat median s | chit-chat statuses |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in rows:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
        line = (f"| {r.mode} | {r.stored}/{r.tries} | {statistics.median(r.latencies):.1f} | "
                f"{statistics.median(r.model_calls):g} | {statuses} |")
        if args.chit_chat:
            chit_statuses = ", ".join(f"{k} {v}" for k, v in sorted(r.chit_chat_statuses.items()))
            line += (f" {r.spurious}/{r.chit_chat_tries} | {statistics.median(r.chit_chat_latencies):.1f} |"
                     f" {chit_statuses} |")
        print(line)
    print("\nRun: .venv/bin/python bench/bench_tool_modes.py " + " ".join(sys.argv[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--temperature", type=float, default=None, help="default: the server's (0.8)")
    parser.add_argument("--max-tokens", type=int, default=256, help="per model reply (the chat's default)")
    parser.add_argument("--timeout", type=float, default=30.0, help="per turn, seconds")
    parser.add_argument("--chit-chat", action="store_true", help="also count memory writes on a hint with no fact")
    args = parser.parse_args()
    config = LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS, port=free_port())
    print(f"hosting {EMBEDDED_MODEL_ALIAS} ...", flush=True)
    with LlamaServerProcess(config) as server:
        rows = asyncio.run(measure(server, args))
    print_table(rows, args)


if __name__ == "__main__":
    main()
