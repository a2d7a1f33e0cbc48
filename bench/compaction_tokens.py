"""Prompt tokens sent and evaluated per turn, runtime vs the naive game: deterministic, no model decoding.

The session of `bench_npcs.py` (one NPC, one player, its memory growing by a fact every `--edit-every`
turns, a `--window`-message history) played through the runtime as shipped (`build_orchestrator`:
compaction between turns, the prewarm, SmolLM2's chat template and tokenizer, its 8192-token context)
against the scripted model (`serve --scripted-model`: replies of `--reply-chars` characters, the same
for both approaches), and the same session as the naive game sends it (the memory pasted into the
system prompt, the whole history; when that no longer fits the context, the oldest messages dropped).

Both are counted with the model's own tokenizer on the requests as sent. Tokens evaluated are what
llama.cpp's single KV sequence re-evaluates: every request (turns, prewarms, summarizer calls, in the
order they reach the model) keeps its prompt and reply in the KV, and the next one evaluates from its
first token that differs. The player reads every reply (the work between turns finishes before the
next line), as in `bench_npcs.py --think-s`; what a faster player sees is covered by the tests.

Run: `.venv/bin/python bench/compaction_tokens.py [--turns 200] [--edit-every 2] [--reply-chars 200]`
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_npcs import (
    MEMORY_BLOCK,
    Setup,
    _fact,
    _hint,
    _initial_facts,
    _scope,
    add_memory_block_argument,
    npc_prompt,
)
from pyruntime.history import LlamaTokenCounter
from pyruntime.memory import MemoryTool
from pyruntime.model.client.compat import Message, build_chat_request
from pyruntime.model.client.concurrency import DEFAULT_EXTERNAL_CONCURRENCY
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.seam import Gate, ModelStream
from pyruntime.model.client.types import ChatCompletion
from pyruntime.model.hosting.embedded import embedded_model_path
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns import AiTaskRequest, build_orchestrator
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from pyruntime.turns.planning.prompt import MEMORY_HEADING, assemble_messages

CONTEXT_TOKENS = 8192  # SmolLM2's, as the runtime hosts it
MAX_TOKENS = 16  # bench_npcs.py's replies
REPLY_WORDS = ("Aye, the road north is muddy after the rain, and the bridge at Riverwood needs mending. Bring "
               "me iron and I will forge you a blade worth its weight; the miller still owes me two sacks of "
               "flour, and the guard captain says wolves were seen near the old watchtower last night.").split()


def reply_text(turn: int, chars: int) -> str:
    """The NPC's reply to turn `turn`: `chars` characters of NPC-ish words, different on every turn."""
    words: list[str] = []
    index = turn * 7
    while len(" ".join(words)) < chars:
        words.append(REPLY_WORDS[index % len(REPLY_WORDS)])
        index += 1
    return f"({turn + 1}) " + " ".join(words)[: max(1, chars - 5)].rstrip()


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class KvSequence:
    """llama.cpp's one KV sequence: a request evaluates its prompt from the first token that differs.

    `cached` > 0: a prompt cache besides (the hosted server's RAM cache, llama-server's `--cache-ram`): the
    states of the last `cached` requests are kept, and a request starts from the one it shares most with.
    """

    def __init__(self, cached: int = 0) -> None:
        self.tokens: list[int] = []
        self.cached = cached
        self.states: list[list[int]] = []

    def evaluate(self, prompt: list[int], reply: list[int]) -> int:
        """Tokens of `prompt` evaluated (at least one: llama.cpp evaluates the last prompt token again)."""
        common = max([_common(prompt, self.tokens)] + [_common(prompt, state) for state in self.states])
        self.tokens = prompt + reply
        if self.cached:
            self.states = (self.states + [self.tokens])[-self.cached:]
        return max(1, len(prompt) - min(common, len(prompt) - 1))


class RecordingClient:
    """A `ModelClient` (model/client/seam.py) that keeps the body of every request it is asked for, in order, as
    the client builds it (`compat.build_chat_request`), then hands the call to the real client."""

    def __init__(self, inner: OpenAICompatClient) -> None:
        self.inner = inner
        self.requests: list[dict[str, Any]] = []

    @property
    def gate(self) -> Gate | None:
        """The inner client's gate."""
        return self.inner.gate

    @gate.setter
    def gate(self, value: Gate | None) -> None:
        self.inner.gate = value

    def _record(self, messages: Sequence[Message], stream: bool, options: dict[str, Any]) -> None:
        fields = ("tools", "tool_choice", "response_format", "temperature", "max_tokens", "extra")
        self.requests.append(build_chat_request(self.inner.model, messages, stream=stream,
                                                **{k: options[k] for k in fields if k in options}))

    async def chat(self, messages: Sequence[Message], **options: Any) -> ChatCompletion:
        """The inner client's reply, recorded."""
        self._record(messages, False, options)
        return await self.inner.chat(messages, **options)

    def stream_chat(self, messages: Sequence[Message], **options: Any) -> ModelStream:
        """The inner client's stream, recorded."""
        self._record(messages, True, options)
        return self.inner.stream_chat(messages, **options)

    def check_available(self) -> None:
        """The inner client's check."""
        self.inner.check_available()

    async def aclose(self) -> None:
        """Close the inner client."""
        await self.inner.aclose()


@dataclass
class Counts:
    """Per turn (each turn of the session, first one included): prompt tokens sent and evaluated."""

    sent: list[int] = field(default_factory=list)
    evaluated: list[int] = field(default_factory=list)
    between_turns: int = 0  # tokens evaluated by requests between turns (prewarms, summarizer calls)
    dropped_turns: int = 0  # naive: turns whose oldest messages no longer fit the context and were dropped


def _script(setup: Setup, reply_chars: int) -> Script:
    rules = [{"when": {"hint": rf"\(turn {t + 1}\)$"}, "reply": reply_text(t, reply_chars)} for t in range(setup.turns)]
    rules.append({"when": {"compaction": True}, "reply": "The player and the smith talked about the road."})
    return Script.from_dict({"rules": rules, "default": {"reply": "Hm."}})


async def runtime_counts(setup: Setup, reply_chars: int, counter: LlamaTokenCounter, model_path: Path,
                         memory_design: str = "writer", cached: int = 0, *,
                         memory_last_stays: bool | None = None) -> Counts:
    """The session through the runtime (as `bench_npcs.runtime_pass` plays it), counted; `memory_design`: the
    writer pass after the reply (what `serve` runs SmolLM2 with) or the memory tool in the reply;
    `memory_last_stays`: where the writer design's memory block goes (the orchestrator's option; None: by the
    player's pace, and this player reads until the work between turns is done, so it moves)."""
    server = ScriptedModelServer(_script(setup, reply_chars))
    await server.start()
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir))
            policy = AgentMemoryPolicy()
            policy.configure_role("Npc0", system_prompt=npc_prompt(0), max_chat_history_messages=setup.window,
                                  with_chat_history=True, persist_chat_history=True, use_memory_tool=True,
                                  temperature=0.0)
            client = RecordingClient(OpenAICompatClient(server.base_url))
            orchestrator = build_orchestrator(base_url=server.base_url, client=client,
                                              concurrency=DEFAULT_EXTERNAL_CONCURRENCY, model_path=model_path,
                                              token_counter=counter, model_context_tokens=CONTEXT_TOKENS,
                                              stores=stores, policy=policy, tool_mode="structured",
                                              memory_design=memory_design, prewarm=True,
                                              memory_last_stays=memory_last_stays)
            key = stores.scoped(_scope(0)).key("Npc0")
            for fact in _initial_facts(setup, 0):
                MemoryTool(stores.memory, key).execute({"action": "append", "content": fact})
            marks = []
            for _, player, turn in setup.schedule():
                if setup.edit_on(turn):
                    MemoryTool(stores.memory, key).execute({"action": "append", "content": _fact(setup, player, turn)})
                marks.append(len(client.requests))
                result = await orchestrator.run_task(AiTaskRequest(
                    _hint(0, player, turn), "Npc0", scope=_scope(player), forced_tool_mode="none",
                    max_output_tokens=MAX_TOKENS, temperature=0.0))
                if not result.ok:
                    raise SystemExit(f"runtime turn {turn + 1} failed: {result.error}")
                await orchestrator.memory_passes.drain()
                await orchestrator.prewarms.drain()  # the player reads the reply
            await orchestrator.prewarms.cancel()
            await client.aclose()
    finally:
        await server.stop()
    return _replay(client.requests, marks, counter, reply_chars, cached)


def _replay(requests: Sequence[dict[str, Any]], marks: Sequence[int], counter: LlamaTokenCounter,
            reply_chars: int, cached: int = 0) -> Counts:
    """Count the requests in the order they were sent: the turn's own ones per turn, the others between turns."""
    kv = KvSequence(cached)
    counts = Counts()
    starts = set(marks)
    turn = -1
    for index, body in enumerate(requests):
        prompt = counter.tokenize(counter.render(body["messages"]))
        is_turn = index in starts
        if is_turn:
            turn += 1
        reply = [] if body.get("max_tokens") == PREWARM_MAX_TOKENS else counter.tokenize(
            reply_text(turn, reply_chars) if is_turn else "x" * 40)
        evaluated = kv.evaluate(prompt, reply)
        if is_turn:
            counts.sent.append(len(prompt))
            counts.evaluated.append(evaluated)
        else:
            counts.between_turns += evaluated
    return counts


def naive_counts(setup: Setup, reply_chars: int, counter: LlamaTokenCounter, cached: int = 0) -> Counts:
    """The session as a game without the runtime sends it (`bench_npcs.naive_pass`), counted."""
    kv = KvSequence(cached)
    counts = Counts()
    memory = list(_initial_facts(setup, 0))
    history: list[dict[str, str]] = []
    for _, player, turn in setup.schedule():
        if setup.edit_on(turn):
            memory.append(_fact(setup, player, turn))
        system = npc_prompt(0) + f"\n\n{MEMORY_HEADING}\n" + "\n".join(memory)
        hint = _hint(0, player, turn)
        while True:  # what a game does once the whole history no longer fits: drop the oldest exchange
            messages = assemble_messages(system_prompt=system, history=history, user_payload=hint)
            prompt = counter.tokenize(counter.render(messages))
            if len(prompt) + MAX_TOKENS <= CONTEXT_TOKENS or not history:
                break
            history = history[2:]
            counts.dropped_turns += 1
        reply = reply_text(turn, reply_chars)
        counts.sent.append(len(prompt))
        counts.evaluated.append(kv.evaluate(prompt, counter.tokenize(reply)))
        history += [{"role": "user", "content": hint}, {"role": "assistant", "content": reply}]
    return counts


def p90(values: Sequence[int]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else float(values[0])


@dataclass(frozen=True)
class Comparison:
    """The issue's token targets over the turns past the window."""

    past: int  # first turn (0-based) whose stored history is longer than the window
    sent_ratio: float  # runtime / naive prompt tokens sent per turn, median
    sent_over: int  # turns past the window where the runtime sent more than the naive game
    evaluated_ratio: float  # runtime / naive tokens evaluated per turn, median
    evaluated_max_over_median: float  # the runtime's largest turn over its session median (target <= 3)


def compare(setup: Setup, runtime: Counts, naive: Counts) -> Comparison:
    """Ratios against the naive game past the window (each conversation's first turn excluded)."""
    past = max(1, setup.window // 2 + 1)  # the window holds window/2 turns: the next one is past it
    r_sent, n_sent = runtime.sent[past:], naive.sent[past:]
    r_eval, n_eval = runtime.evaluated[past:], naive.evaluated[past:]
    median = statistics.median(runtime.evaluated[1:])
    return Comparison(
        past=past,
        sent_ratio=statistics.median(r_sent) / statistics.median(n_sent),
        sent_over=sum(1 for a, b in zip(r_sent, n_sent, strict=False) if a > b),
        evaluated_ratio=statistics.median(r_eval) / max(1, statistics.median(n_eval)),
        evaluated_max_over_median=max(runtime.evaluated[1:]) / max(1, median),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--facts", type=int, default=10)
    parser.add_argument("--edit-every", type=int, default=8)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--reply-chars", type=int, default=60, help="NPC reply length (16 SmolLM2 tokens: ~60)")
    parser.add_argument("--memory-design", choices=("writer", "tool"), default="writer",
                        help="the writer pass after the reply (serve's default for SmolLM2) or the memory tool")
    parser.add_argument("--prompt-cache", type=int, default=0,
                        help="model a prompt cache of the last N requests' states besides the KV (0: the KV only)")
    add_memory_block_argument(parser)
    parser.add_argument("--per-turn", action="store_true", help="print every turn's counts")
    args = parser.parse_args()
    setup = Setup(1, 1, args.turns, args.facts, args.edit_every, args.window)
    model_path = embedded_model_path()
    counter = LlamaTokenCounter(model_path)
    runtime = asyncio.run(runtime_counts(setup, args.reply_chars, counter, model_path, args.memory_design,
                                         args.prompt_cache, memory_last_stays=MEMORY_BLOCK[args.memory_block]))
    naive = naive_counts(setup, args.reply_chars, counter, args.prompt_cache)
    c = compare(setup, runtime, naive)
    print(f"{args.turns} turns, window {args.window}, a fact every {args.edit_every} turns, {args.reply_chars}-char "
          f"replies, memory design {args.memory_design}, "
          f"{f'a prompt cache of {args.prompt_cache} states' if args.prompt_cache else 'the KV only'}; "
          f"past the window from turn {c.past + 1}")
    print("| approach | sent median / p90 / max | evaluated median / p90 / max | between turns |")
    print("|---|---|---|---|")
    for name, counts in (("runtime", runtime), ("naive", naive)):
        s, e = counts.sent[c.past:], counts.evaluated[c.past:]
        print(f"| {name} | {statistics.median(s):g} / {p90(s):.0f} / {max(s)} | {statistics.median(e):g} / "
              f"{p90(e):.0f} / {max(e)} | {counts.between_turns} |")
    print(f"runtime/naive past the window: sent {c.sent_ratio:.2f}x (turns over the naive game: {c.sent_over} of "
          f"{len(runtime.sent) - c.past}), evaluated {c.evaluated_ratio:.2f}x; the runtime's largest turn "
          f"{c.evaluated_max_over_median:.1f}x its median; naive dropped its oldest exchange on {naive.dropped_turns} "
          "turn(s)")
    if args.per_turn:
        print("runtime sent:", " ".join(map(str, runtime.sent)))
        print("naive sent:  ", " ".join(map(str, naive.sent)))
        print("runtime evaluated:", " ".join(map(str, runtime.evaluated)))
        print("naive evaluated:  ", " ".join(map(str, naive.evaluated)))
    print("\nRun: .venv/bin/python bench/compaction_tokens.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
