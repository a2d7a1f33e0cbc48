"""Benchmark of the prefix-cache effect of the memory placement, with the embedded SmolLM2-135M.

A 20-turn SmartChat session whose memory grows by one fact per turn, assembled two ways in the same
run, each on its own llama.cpp model instance (llama-cpp-python keeps one hot prefix per instance),
turns interleaved so both see the same machine load:

- tail (the design note's placement, contract §7, `bench/design_note_layout.py`): byte-identical system
  prompt; the `## Memory` snapshot first sent and the `## Memory (updates)` delta go in the tail
  after the history (`plan_memory_blocks` + `assemble_messages`, the product's own pure functions).
  The runtime's own placement (snapshot before the history, each edit a note where it was
  first sent) is measured over whole sessions by `bench/bench_npcs.py`;
- system: the current memory appended to the system prompt (`## Memory` block), so the prefix
  changes whenever the memory does.

Measured per turn: **prompt tokens evaluated** = the increase of llama.cpp's own prompt-eval
counter (`llama_perf_context().n_p_eval`) over the call, i.e. the tokens not reused from the
previous prompt's KV cache (llama-cpp-python's server answers no usage in streams and its
`usage.prompt_tokens` counts the whole prompt, cached or not), and **time to first token** of the
streamed reply. The model runs in this process through `llama_cpp.Llama.create_chat_completion`, the
same call (and prefix reuse) the hosted server makes. Replies: temperature 0, 16 tokens.

Run: `.venv/bin/python bench/bench_prefix_cache.py [--turns 20]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp
from llama_cpp.llama_types import ChatCompletionRequestMessage

from bench.design_note_layout import assemble_design_note
from pyruntime.memory import memory_tool_definition
from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.hosting.embedded import embedded_model_path
from pyruntime.turns.planning.memory_blocks import plan_memory_blocks
from pyruntime.turns.planning.prompt import (
    MEMORY_HEADING,
    TailBlocks,
    assemble_messages,
    build_system_prompt,
    role_system_prompt,
)
from pyruntime.turns.rounds.modes import ToolCallMode, tool_contract

ROLE = "SmartChat"
MAX_TOKENS = 16
FACTS = [
    "The player's sword is called Dawnbreaker.", "The player's horse is called Shadowfax.",
    "The player fears spiders.", "The player's home town is Riverwood.", "The player likes apples.",
    "The player's sister is called Mira.", "The player owes the blacksmith 30 gold.",
    "The player's favourite colour is green.", "The player is level 12.", "The player hates the rain.",
    "The player's guild is the Silver Hand.", "The player's cat is called Pebble.",
    "The player wants to find the lost crown.", "The player is afraid of deep water.",
    "The player's mentor is Old Tam.", "The player collects rare coins.", "The player was born in winter.",
    "The player's shield is made of oak.", "The player prefers to travel at night.",
    "The player promised to help the miller.",
]
HINTS = [f"Turn {i + 1}: {fact.replace('The player', 'My character')} What do you think?"
         for i, fact in enumerate(FACTS)]


@dataclass
class Session:
    """One placement's model instance and its growing conversation."""

    name: str
    llm: llama_cpp.Llama
    history: list[dict[str, str]] = field(default_factory=list)
    state: AgentMemoryState = field(default_factory=AgentMemoryState)
    evaluated: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)


def system_prompt() -> str:
    """The runtime's cacheable prefix for SmartChat in structured mode."""
    return build_system_prompt(role_system_prompt(ROLE),
                               tool_contract([memory_tool_definition()], ToolCallMode.STRUCTURED))


def messages_for(session: Session, hint: str) -> list[dict[str, Any]]:
    """The request of this turn in the session's placement."""
    if session.name == "tail":
        blocks = plan_memory_blocks(session.state)
        # The stored snapshot, as the orchestrator keeps it (set once, then only the delta changes).
        session.state = session.state.evolve(system_prompt_memory_snapshot=blocks.snapshot,
                                             system_prompt_memory_version=blocks.snapshot_version)
        tail = TailBlocks(memory=blocks.snapshot_block, memory_updates=blocks.updates_block)
        return assemble_design_note(system_prompt=system_prompt(), history=session.history, tail=tail,
                                    user_payload=hint)
    memory = session.state.memory
    system = system_prompt() + (f"\n\n{MEMORY_HEADING}\n{memory}" if memory else "")
    return assemble_messages(system_prompt=system, history=session.history, user_payload=hint)


def run_turn(session: Session, hint: str, fact: str) -> None:
    """One streamed turn; records evaluated prompt tokens and time to first token, then stores the fact."""
    messages = messages_for(session, hint)
    before = llama_cpp.llama_perf_context(session.llm._ctx.ctx).n_p_eval
    began = time.perf_counter()
    first: float | None = None
    reply: list[str] = []
    # llama-cpp-python types each role's message as its own TypedDict; these are the plain dicts of the same shape
    request = cast(list[ChatCompletionRequestMessage], messages)
    stream = session.llm.create_chat_completion(request, max_tokens=MAX_TOKENS, temperature=0.0, stream=True)
    assert isinstance(stream, Iterator)
    for chunk in stream:
        piece = chunk["choices"][0]["delta"].get("content")
        if isinstance(piece, str) and piece:
            first = first if first is not None else time.perf_counter() - began
            reply.append(piece)
    session.ttft.append(first if first is not None else time.perf_counter() - began)
    session.evaluated.append(llama_cpp.llama_perf_context(session.llm._ctx.ctx).n_p_eval - before)
    session.history += [{"role": "user", "content": hint}, {"role": "assistant", "content": "".join(reply)}]
    # The memory tool's append (what the model would do this turn).
    memory = f"{session.state.memory}\n{fact}" if session.state.memory else fact
    session.state = session.state.evolve(memory=memory)


def load() -> llama_cpp.Llama:
    """SmolLM2 with the hosted server's game settings (all cores, logits_all off, 8192 context)."""
    return llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=8192, n_threads=os.cpu_count() or 1,
                           n_threads_batch=os.cpu_count() or 1, logits_all=False, verbose=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    turns = min(args.turns, len(FACTS))
    sessions = [Session("tail", load()), Session("system", load())]
    for i in range(turns):
        for session in sessions if i % 2 == 0 else reversed(sessions):
            run_turn(session, HINTS[i], FACTS[i])
        tail, system = sessions
        print(f"  turn {i + 1}/{turns}: evaluated tail {tail.evaluated[-1]} / system {system.evaluated[-1]} tokens, "
              f"TTFT {tail.ttft[-1]:.2f} / {system.ttft[-1]:.2f} s", flush=True)
    print(f"\nSmolLM2-135M-Instruct Q4_1, role {ROLE}, {turns} turns, memory +1 fact per turn, "
          f"{MAX_TOKENS}-token replies, {os.cpu_count()} threads")
    print("| placement | prompt tokens evaluated, turns 2.. (median) | total evaluated | "
          "TTFT turns 2.. median s | TTFT turns 2.. p90 s |")
    print("|---|---|---|---|---|")
    for s in sessions:
        later = s.ttft[1:] or s.ttft
        p90 = statistics.quantiles(later, n=10)[-1] if len(later) >= 2 else later[0]
        print(f"| {s.name} | {statistics.median(s.evaluated[1:] or s.evaluated):g} | {sum(s.evaluated)} | "
              f"{statistics.median(later):.3f} | {p90:.3f} |")
    print("\nper turn (evaluated tokens tail/system):",
          " ".join(f"{a}/{b}" for a, b in zip(sessions[0].evaluated, sessions[1].evaluated, strict=True)))
    print("\nRun: .venv/bin/python bench/bench_prefix_cache.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
