"""Benchmark a game studio would run: NPCs x players, long sessions, memory edits; runtime vs the naive approach.

One hosted SmolLM2-135M (the product's llama.cpp server, game settings), and for each setup (1 NPC,
4 NPCs, ... each with `--players` players) the same scripted session played three ways, one after
the other on the same server:

- **runtime**: `AiOrchestrator.stream_task` as shipped (the layout `serve` picks for the model, compaction with
  hysteresis and between turns, the prewarm; docs/design/prompt-layout.md);
- **runtime, no prewarm** (`--passes no-prewarm`): the runtime with the prewarm off (after a turn the shipped
  runtime evaluates the next turn's predicted prefix in the background, `pyruntime/turns/between/prewarm.py`);
  `--think-s` pauses between turns, as a player reading the reply does, which is when the prewarm runs (with
  no pause the next turn supersedes it);
- **runtime, design-note order**: the same runtime with the design note's order (contract §7) (summary first,
  `## Memory` snapshot after the history) and no hysteresis (fold only what no longer fits): what
  shipped before the current layout, for comparison (`bench/design_note_layout.py`, given to the
  orchestrator as `assemble=` and `compaction_target_ratio=`);
- **naive**: what a game does without the runtime: the NPC's prompt with its current memory pasted
  into the system prompt, the whole history, the player's line (same server, same client);
- **runtime + prompt cache** (`--prompt-cache-mb`, setups with several NPCs): the runtime on a second
  server with its host prompt cache (`serve --prompt-cache-mb`, llama-server's `--cache-ram`);
  `cached-no-prewarm` the same with the prewarm off.

The session: turns rotate over every (NPC, player) conversation; each conversation's memory starts
with `--facts` known facts and the game appends one every `--edit-every` turns of that conversation;
the history window is `--window` messages, so long sessions run past it. Every turn is one model
call (`forced_tool_mode="none"`, the memory is written by the game), temperature 0, 16-token replies.

Measured per turn: **tokens evaluated** (prompt tokens llama.cpp did not reuse from its KV cache,
from the usage chunk the hosted server ends each stream with, i.e. `TurnUsage.evaluated_prompt_tokens`),
**prompt tokens sent**, **time to first token** (first visible text), turn time; after each pass the
server's RSS. Statistics skip each conversation's first turn (cold for every approach). Once the naive
game's whole history no longer fits the context, it drops its oldest exchange (what a game would do).

Long conversations: `--turns` and `--edit-every` take several values (every
combination is a setup), `--think-s 1 2` pauses a seeded random 1-2 s after each reply, and after each
setup one line gives the runtime against the naive game past the window (each conversation's turns after
its stored history outgrew `--window`): TTFT p50 / p90 / max, tokens evaluated (median, and the runtime's
largest turn over its median) and prompt tokens sent, as ratios in the same run. Each runtime turn that
evaluated more than 3x its pass's median is printed with what happened around it (the game's or the writer's
memory edit, prewarms sent or skipped and folds made since the turn before, a fold sent, the block moved).

The runtime runs the memory design `serve` picks for the served model (`--memory-design auto`, the default:
for SmolLM2-135M the writer pass after the reply and the memory-last layout, model_profile); `--memory-design
tool` puts the memory tool in the reply (its ~290-token contract in the system prompt), as bigger models get.
`--breakdown` times each warm turn, for the runtime and the naive game, at the public model seam (a `ModelClient`
in front of the engine client): from the turn's start to its first streamed model call, to the first delta back
(the engine's prompt evaluation and first token), to the first text delta, to the first visible text the turn
streamed. `--then-npcs 4` has the same runtime and server play four other NPCs in rotation right after the
session (`--then-turns`, default 10 each), against the session's TTFT p50 (target: <= 1.3x). `--rss-every 50`
records the model server's RSS every 50 turns of the runtime pass (target: after 500 <= 1.2x after 50).

Run: `nice -n 10 .venv/bin/python bench/bench_npcs.py [--turns 30] [--npcs 1 4] [--players 1]`
Long sessions against the naive game: `nice -n 10 .venv/bin/python bench/bench_npcs.py --npcs 1 --turns 40 200
--edit-every 2 8 --window 10 --think-s 1 2 --passes runtime naive`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.design_note_layout import NO_HYSTERESIS, assemble_design_note
from pyruntime.history import LlamaTokenCounter, count_chat_tokens
from pyruntime.history.budget import COMPACTION_TARGET_RATIO
from pyruntime.memory import MemoryTool
from pyruntime.model.client.compat import Message
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.seam import Gate, ModelClient
from pyruntime.model.client.types import ChatCompletion, TextDelta, UsageDelta
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.llama_server import DEFAULT_N_CTX, LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service.model_memory import process_rss_bytes
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, build_orchestrator
from pyruntime.turns.events import FinalEvent, TextDeltaEvent, TurnUsage
from pyruntime.turns.planning.prompt import MEMORY_HEADING, assemble_messages
from tests.support.fixtures import free_port

MAX_TOKENS = 16
NPC_PROMPTS = [
    "You are Bram, the village blacksmith. You are gruff but fair. Stay in character and answer in one or two "
    "short sentences.",
    "You are Elda, the innkeeper of the Prancing Goat. You are warm and love gossip. Stay in character and answer "
    "in one or two short sentences.",
    "You are Captain Rhys of the town guard. You are strict and tired. Stay in character and answer in one or two "
    "short sentences.",
    "You are Mira, a travelling merchant. You haggle and joke. Stay in character and answer in one or two short "
    "sentences.",
]
NPC_NAMES = ["Bram", "Elda", "Rhys", "Mira", "Oswin", "Tilda", "Garrick", "Nessa", "Corin", "Ysolde", "Hale",
             "Brina", "Dunstan", "Ilse", "Perrin", "Wren"]


def npc_prompt(npc: int) -> str:
    """NPC `npc`'s system prompt: one of four characters, the name its own (no two NPCs share a prefix)."""
    prompt = NPC_PROMPTS[npc % len(NPC_PROMPTS)]
    if npc < len(NPC_PROMPTS):
        return prompt
    name = NPC_NAMES[npc % len(NPC_NAMES)] + (f" {npc // len(NPC_NAMES) + 1}" if npc >= len(NPC_NAMES) else "")
    return prompt.replace(NPC_NAMES[npc % len(NPC_PROMPTS)], name, 1)


FACTS = [
    "The player's name is Alex.", "The player carries a sword called Dawnbreaker.", "The player fears spiders.",
    "The player comes from Riverwood.", "The player owes 30 gold to the blacksmith.", "The player has a cat, Pebble.",
    "The player is level 12.", "The player hates the rain.", "The player belongs to the Silver Hand.",
    "The player is looking for the lost crown.", "The player's mentor is Old Tam.", "The player collects coins.",
    "The player was born in winter.", "The player's shield is made of oak.", "The player travels at night.",
    "The player promised to help the miller.", "The player's sister is called Ina.", "The player likes apples.",
    "The player cannot swim.", "The player once met the king.",
]
HINTS = [
    "Good morning! How are things today?", "Have you heard any news from the road?", "What do you think of me?",
    "Can you help me with something?", "What would you charge for that?", "Tell me about this town.",
    "Do you remember what I told you?", "Any work for someone like me?", "What's the weather going to do?",
    "I'll be back later. Anything I should know?",
]


# -- --breakdown: where a turn's time to first token goes ---------------------------------------------------------

# The turn a model call belongs to: set around each timed turn, inherited by the tasks the turn starts (a prewarm
# or writer pass started by an earlier turn carries that turn's value, so it is never taken for this one's call).
_TIMED_TURN: contextvars.ContextVar[object | None] = contextvars.ContextVar("timed_turn", default=None)


@dataclass
class Breakdown:
    """Per warm turn, seconds: from the turn's start to its first streamed model call, to the first delta back, to
    the first text delta, to the first visible text the caller got."""

    pre: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)
    to_text: list[float] = field(default_factory=list)
    post: list[float] = field(default_factory=list)

    def line(self, name: str) -> str:
        """One line of medians in ms."""
        def ms(values: list[float]) -> str:
            return f"{1000 * statistics.median(values):.1f}" if values else "-"
        return (f"  {name}: TTFT breakdown, median ms: turn start -> model call {ms(self.pre)}; "
                f"-> first delta {ms(self.server)}; -> first text delta {ms(self.to_text)}; "
                f"-> first visible text {ms(self.post)}")


class TimedModel:
    """A `ModelClient` (model/client/seam.py) that hands every call to `inner` and marks, for the timed turn, when
    its first streamed call starts, its first delta and its first text delta arrive; bench only."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.marks: dict[str, float] = {}
        self._turn: object | None = None

    @property
    def gate(self) -> Gate | None:
        """The inner client's gate."""
        return self.inner.gate

    @gate.setter
    def gate(self, value: Gate | None) -> None:
        self.inner.gate = value

    async def chat(self, messages: Sequence[Message], **options: Any) -> ChatCompletion:
        """The inner client's reply (not timed: a turn's reply streams)."""
        return await self.inner.chat(messages, **options)

    @contextlib.asynccontextmanager
    async def stream_chat(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[AsyncIterator[Any]]:
        """The inner client's stream; the timed turn's first one is marked."""
        timed = self._turn is not None and _TIMED_TURN.get() is self._turn and "sent" not in self.marks
        if timed:
            self.marks["sent"] = time.perf_counter()
        async with self.inner.stream_chat(messages, **options) as deltas:
            yield self._marked(deltas) if timed else deltas

    async def _marked(self, deltas: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for delta in deltas:
            now = time.perf_counter()
            self.marks.setdefault("line", now)
            if isinstance(delta, TextDelta) and delta.text:
                self.marks.setdefault("text", now)
            yield delta

    def check_available(self) -> None:
        """The inner client's check."""
        self.inner.check_available()

    async def aclose(self) -> None:
        """Close the inner client."""
        await self.inner.aclose()

    def start(self) -> float:
        """A turn starts now (call in the task that runs the turn)."""
        self.marks, self._turn = {}, object()
        _TIMED_TURN.set(self._turn)
        return time.perf_counter()

    def stop(self, began: float, first_visible: float | None, into: Breakdown, record: bool) -> None:
        """The turn's first visible text came `first_visible` s after `began`: add its breakdown to `into`."""
        self._turn = None
        sent, line, text = self.marks.get("sent"), self.marks.get("line"), self.marks.get("text")
        if not record or sent is None or line is None or first_visible is None:
            return
        into.pre.append(sent - began)
        into.server.append(line - sent)
        if text is not None:
            into.to_text.append(text - sent)
            into.post.append(began + first_visible - text)


@dataclass
class Pass:
    """One approach over one setup: per-turn measurements (conversation's first turns excluded)."""

    name: str
    evaluated: list[int] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    turn_s: list[float] = field(default_factory=list)
    rss_mb: float = 0.0
    rss_trace: list[tuple[int, float]] = field(default_factory=list)  # (turns so far, server RSS MB), --rss-every
    prewarm_tokens: int = 0  # prompt tokens the runtime's prewarms evaluated between turns (not in `evaluated`)
    past: list[bool] = field(default_factory=list)  # per recorded turn: past the window (the long-session ratios)
    setup: Setup | None = None  # the setup this pass played when not its row's (`--then-npcs`)
    memory_design: str = ""  # the runtime's: "tool" (the memory tool in the reply) or "writer" (a pass after it)
    breakdown: Breakdown | None = None  # --breakdown: where the time to first token went
    context: list[str] = field(default_factory=list)  # per recorded turn (runtime): what happened around it

    def outliers(self, factor: float = 3.0) -> list[str]:
        """The recorded turns that evaluated more than `factor` x the median, with what happened around them."""
        limit = factor * statistics.median(self.evaluated) if self.evaluated else 0
        return [f"turn {i + 1}: evaluated {e} of {pr}, TTFT {t:.2f} s ({c})"
                for i, (e, pr, t, c) in enumerate(zip(self.evaluated, self.prompt, self.ttft, self.context,
                                                      strict=False)) if e > limit]

    def add(self, warm: bool, evaluated: int, prompt: int, ttft: float, turn_s: float, past: bool = False) -> None:
        """Record one turn (only warm turns count)."""
        if warm:
            self.evaluated.append(evaluated)
            self.prompt.append(prompt)
            self.ttft.append(ttft)
            self.turn_s.append(turn_s)
            self.past.append(past)

    def past_window(self, values: list[Any]) -> list[Any]:
        """The values of the turns past the window (all of them when none is)."""
        kept = [v for v, p in zip(values, self.past, strict=False) if p]
        return kept or list(values)


@dataclass(frozen=True)
class Setup:
    """NPCs x players, turns in rotation, memory edits, the history window."""

    npcs: int
    players: int
    turns: int
    facts: int
    edit_every: int
    window: int

    def schedule(self) -> list[tuple[int, int, int]]:
        """(npc, player, turn of that conversation) per turn, rotating over the conversations."""
        pairs = [(n, p) for p in range(self.players) for n in range(self.npcs)]
        seen: dict[tuple[int, int], int] = {}
        out = []
        for t in range(self.turns):
            pair = pairs[t % len(pairs)]
            seen[pair] = seen.get(pair, -1) + 1
            out.append((*pair, seen[pair]))
        return out

    def edit_on(self, turn_of_conversation: int) -> bool:
        """The game appends a fact before this turn of a conversation."""
        return turn_of_conversation > 0 and self.edit_every > 0 and turn_of_conversation % self.edit_every == 0

    def past_window(self, turn_of_conversation: int) -> bool:
        """This turn of a conversation finds more stored messages than the window (two per earlier turn)."""
        return 2 * turn_of_conversation > self.window


PLAYER_NAMES = ["", "Sam", "Kit", "Rowan", "Ash", "Lee"]  # players after the first sign their lines


def _player(player: int) -> str:
    return PLAYER_NAMES[player % len(PLAYER_NAMES)] + (str(player) if player >= len(PLAYER_NAMES) else "")


def _hint(npc: int, player: int, turn: int) -> str:
    """The player's line: each player's own, so no two conversations share more than the NPC's system prompt
    (with the same lines and memory, another player's cached prompt would stand in for this one's)."""
    signed = f", {_player(player)}" if player else ""
    return f"{HINTS[(turn + npc + 3 * player) % len(HINTS)]} (turn {turn + 1}{signed})"


def _initial_facts(setup: Setup, player: int) -> list[str]:
    """The facts a conversation's memory starts with: each player's own selection."""
    return [FACTS[(3 * player + i) % len(FACTS)] for i in range(setup.facts)]


def _fact(setup: Setup, player: int, turn: int) -> str:
    index = (setup.facts + 3 * player + turn // max(1, setup.edit_every)) % len(FACTS)
    return FACTS[index] + f" (noted on turn {turn + 1})"


def server_rss_mb(server: LlamaServerProcess) -> float:
    """The model server's resident memory (what Health reports), in MB."""
    return process_rss_bytes(server.pid) / (1 << 20)


async def timed_turn(orchestrator: Any, request: AiTaskRequest, name: str,
                     completed_is_enough: bool = False, timer: TimedModel | None = None,
                     breakdown: Breakdown | None = None, record: bool = False) -> tuple[TurnUsage, float, float]:
    """One streamed turn: its usage, the time to its first visible text, its whole time (s); exits if it failed
    (`completed_is_enough`: a tool loop ended with a reply counts too). `timer`: its breakdown into `breakdown`."""
    began = timer.start() if timer is not None else time.perf_counter()
    first: float | None = None
    final = None
    async for event in orchestrator.stream_task(request):
        if isinstance(event, TextDeltaEvent) and event.text and first is None:
            first = time.perf_counter() - began
        if isinstance(event, FinalEvent):
            final = event.result
    elapsed = time.perf_counter() - began
    if timer is not None and breakdown is not None:
        timer.stop(began, first, breakdown, record)
    if final is None or not (final.status.completed if completed_is_enough else final.ok):
        raise SystemExit(f"{name}: a turn failed: {final.error if final else 'no result'}")
    return final.usage, first if first is not None else elapsed, elapsed


MEMORY_DESIGN: str | None = None  # --memory-design: None = what `serve` picks for the model (model_profile)
MEMORY_BLOCK: dict[str, bool | None] = {"auto": None, "moves": False, "stays": True}  # --memory-block
MEMORY_LAST_STAYS: bool | None = None  # the orchestrator's memory_last_stays


def add_memory_block_argument(parser: argparse.ArgumentParser) -> None:
    """`--memory-block auto|moves|stays`: the orchestrator's `memory_last_stays` (`MEMORY_BLOCK[value]`)."""
    parser.add_argument("--memory-block", choices=tuple(MEMORY_BLOCK), default="auto",
                        help="writer design: where the memory block goes: auto = before each player line while "
                             "the model keeps up with the player, else where it was first sent "
                             "(turns/between/block_pace.py); "
                             "moves = always before the player's line; stays = always where it was first sent")
BREAKDOWN = False  # --breakdown: time each turn's steps to its first token (runtime and naive passes)
RSS_EVERY = 0  # --rss-every: record the server's RSS every this many turns of a runtime pass (0: at its end only)
# --think-s: pause after each turn of every pass (a player reading), not timed
THINK_S: tuple[float, float] = (0.0, 0.0)


def think_times(turns: int) -> list[float]:
    """The pause after each turn: `--think-s A [B]`, uniform in [A, B], the same seeded sequence for every pass."""
    rng = random.Random(24)
    low, high = THINK_S
    return [rng.uniform(low, high) for _ in range(turns)]


def _counters(orchestrator: Any) -> dict[str, int]:
    """The orchestrator's running counts of the work between turns (for `Pass.context`)."""
    p, c, b = orchestrator.prewarms.stats, orchestrator.compaction_stats, orchestrator.block_pace
    return {"prewarm sent": p.sent, "prewarm skipped": p.skipped, "prewarm pre-empted": p.preempted,
            "fold made": c.folded, "fold sent": c.sent, "previous head": c.deferred, "fold in the turn": c.in_turn,
            "fold lost": c.lost, "block moved": b.turns_moved}


def _memory_text(stores: Any, key: str) -> str:
    loaded = stores.memory.try_load(key)
    return loaded.state.memory if loaded.state is not None else ""


def _turn_context(edited: bool, written: bool, previous: dict[str, int], before: dict[str, int],
                  after: dict[str, int]) -> str:
    """What happened between the previous turn's start and this turn's end, in words (`written`: the memory
    changed since the last turn of the conversation by another hand than the game's, i.e. the writer pass)."""
    between = [k for k in ("prewarm sent", "prewarm skipped", "prewarm pre-empted", "fold made")
               if before[k] > previous[k]]
    during = [k for k in ("fold sent", "previous head", "fold in the turn", "fold lost", "block moved")
              if after[k] > before[k]]
    return "; ".join(filter(None, ["writer edit" if written else "", "game edit" if edited else "",
                                   ", ".join(between), ", ".join(during)])) or "-"


async def runtime_pass(server: LlamaServerProcess, setup: Setup, name: str, *, prewarm: bool = True,
                       then: Setup | None = None, **orchestrator_options: Any) -> list[Pass]:
    """The session through the runtime, in a fresh data dir (`orchestrator_options`: e.g. the design note's layout);
    `then`: right after it, the same runtime and server play that setup's NPCs (others) in rotation, a second Pass."""
    result = Pass(name)
    passes = [result]
    phases = [(setup, 0, result)]
    if then is not None:
        passes.append(Pass(f"{name}, right after: {then.npcs} other NPC(s) in rotation", setup=then))
        phases.append((then, setup.npcs, passes[-1]))
    with tempfile.TemporaryDirectory() as data_dir:
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, Path(data_dir))
        policy = AgentMemoryPolicy()
        for phase, first_npc, _ in phases:
            for npc in range(first_npc, first_npc + phase.npcs):
                policy.configure_role(f"Npc{npc}", system_prompt=npc_prompt(npc),
                                      max_chat_history_messages=phase.window, with_chat_history=True,
                                      persist_chat_history=True, use_memory_tool=True, temperature=0.0)
        # --breakdown: the engine client the runtime would build, behind the timing seam
        timer = TimedModel(OpenAICompatClient(**server.client_options())) if BREAKDOWN else None
        orchestrator = build_orchestrator(server=server, client=timer, stores=stores, policy=policy,
                                          memory_design=MEMORY_DESIGN, prewarm=prewarm,
                                          memory_last_stays=MEMORY_LAST_STAYS, **orchestrator_options)
        done = 0
        since_last = _counters(orchestrator)
        memory_seen: dict[str, str] = {}  # conversation key -> its memory as the last turn found it
        for phase, first_npc, into in phases:
            into.breakdown = Breakdown() if BREAKDOWN else None
            into.memory_design = orchestrator.settings.memory_design.value
            for npc in range(first_npc, first_npc + phase.npcs):
                for player in range(phase.players):
                    tool = MemoryTool(stores.memory, stores.scoped(_scope(player)).key(f"Npc{npc}"))
                    for fact in _initial_facts(phase, player):
                        tool.execute({"action": "append", "content": fact})
            pauses = think_times(phase.turns)
            for index, (npc, player, turn) in enumerate(phase.schedule()):
                npc += first_npc
                if RSS_EVERY and done and done % RSS_EVERY == 0:
                    result.rss_trace.append((done, server_rss_mb(server)))
                    print(f"  {name}: server RSS after {done} turns: {result.rss_trace[-1][1]:.0f} MB", flush=True)
                before = _counters(orchestrator)
                key = stores.scoped(_scope(player)).key(f"Npc{npc}")
                memory = _memory_text(stores, key)
                written = key in memory_seen and memory_seen[key] != memory
                edited = phase.edit_on(turn)
                if edited:
                    MemoryTool(stores.memory, key).execute({"action": "append", "content": _fact(phase, player, turn)})
                    memory = _memory_text(stores, key)
                memory_seen[key] = memory
                request = AiTaskRequest(_hint(npc, player, turn), f"Npc{npc}", scope=_scope(player),
                                        forced_tool_mode="none", max_output_tokens=MAX_TOKENS, temperature=0.0,
                                        extra={"seed": 0})
                usage, ttft, elapsed = await timed_turn(orchestrator, request, name, timer=timer,
                                                        breakdown=into.breakdown, record=turn > 0)
                into.add(turn > 0, usage.evaluated_prompt_tokens, usage.prompt_tokens, ttft, elapsed,
                         phase.past_window(turn))
                if turn > 0:
                    into.context.append(_turn_context(edited, written, since_last, before, _counters(orchestrator)))
                since_last = before
                done += 1
                if pauses[index]:
                    await asyncio.sleep(pauses[index])
            into.rss_mb = server_rss_mb(server)
        await orchestrator.memory_passes.drain()
        await orchestrator.prewarms.cancel()
        await orchestrator.client.aclose()
        if prewarm:
            stats = orchestrator.prewarms.stats
            result.prewarm_tokens = stats.evaluated_tokens
            print(f"  {name}: prewarms sent {stats.sent}, skipped {stats.skipped}, pre-empted {stats.preempted}, "
                  f"failed {stats.failed}, {stats.evaluated_tokens} tokens evaluated by them", flush=True)
        c = orchestrator.compaction_stats
        print(f"  {name}: folds made between turns {c.folded}, sent {c.sent}; turns that sent the previous head "
              f"{c.deferred}; folds made in a turn {c.in_turn}; lost {c.lost}", flush=True)
        pace = orchestrator.block_pace
        if orchestrator.settings.memory_last:
            print(f"  {name}: memory block moved before the player's line on {pace.turns_moved} turns, stayed where "
                  f"it was sent on {pace.turns_stayed}", flush=True)
    result.rss_trace.append((setup.turns, result.rss_mb))
    print(f"  pass done: {name} (memory design {result.memory_design})", flush=True)
    return passes


async def naive_pass(server: LlamaServerProcess, setup: Setup) -> Pass:
    """The session as a game without the runtime sends it: memory in the system prompt, the whole history."""
    result = Pass("naive (memory in system prompt, whole history)")
    client: ModelClient = OpenAICompatClient(server.base_url, model=server.config.alias)
    timer = None
    if BREAKDOWN:
        client = timer = TimedModel(client)
    result.breakdown = Breakdown() if BREAKDOWN else None
    memories = {(n, p): _initial_facts(setup, p) for n in range(setup.npcs) for p in range(setup.players)}
    histories: dict[tuple[int, int], list[dict[str, str]]] = {pair: [] for pair in memories}
    pauses = think_times(setup.turns)
    counter = LlamaTokenCounter(server.config.model_path)
    n_ctx = server.config.n_ctx or DEFAULT_N_CTX
    for done, (npc, player, turn) in enumerate(setup.schedule()):
        pair = (npc, player)
        if setup.edit_on(turn):
            memories[pair].append(_fact(setup, player, turn))
        system = npc_prompt(npc) + f"\n\n{MEMORY_HEADING}\n" + "\n".join(memories[pair])
        hint = _hint(npc, player, turn)
        while True:  # the whole history, until it no longer fits the context: then without its oldest exchange
            messages = assemble_messages(system_prompt=system, history=histories[pair], user_payload=hint)
            if count_chat_tokens(counter, messages) + MAX_TOKENS <= n_ctx or not histories[pair]:
                break
            histories[pair] = histories[pair][2:]
        began = timer.start() if timer is not None else time.perf_counter()
        first: float | None = None
        text: list[str] = []
        evaluated = prompt = 0
        async with client.stream_chat(messages, max_tokens=MAX_TOKENS, temperature=0.0, extra={"seed": 0}) as stream:
            async for delta in stream:
                if isinstance(delta, TextDelta):
                    first = first if first is not None else time.perf_counter() - began
                    text.append(delta.text)
                elif isinstance(delta, UsageDelta):
                    prompt, evaluated = delta.usage.prompt_tokens, delta.usage.prompt_tokens - delta.usage.cached_tokens
        elapsed = time.perf_counter() - began
        if timer is not None and result.breakdown is not None:
            timer.stop(began, first, result.breakdown, turn > 0)
        histories[pair] += [{"role": "user", "content": hint}, {"role": "assistant", "content": "".join(text)}]
        ttft = first if first is not None else elapsed
        result.add(turn > 0, evaluated, prompt, ttft, elapsed, setup.past_window(turn))
        if pauses[done]:
            await asyncio.sleep(pauses[done])
    await client.aclose()
    result.rss_mb = server_rss_mb(server)
    return result


def _scope(player: int) -> AgentMemoryScope:
    return AgentMemoryScope(user_id=f"player{player}")


def _p(values: Sequence[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else (values[0] if values else 0.0)


PASSES = ("runtime", "no-prewarm", "design-note", "naive", "cached", "cached-no-prewarm")
CACHED_PASSES = frozenset({"cached", "cached-no-prewarm"})


def runs_cached(npcs: int, passes: Iterable[str]) -> bool:
    """Whether a setup of `npcs` NPCs runs the cached passes asked for: with several NPCs, or when only they are."""
    wanted = set(passes)
    return bool(wanted & CACHED_PASSES) and (npcs > 1 or wanted <= CACHED_PASSES)


async def run_setup(server: LlamaServerProcess, cached: LlamaServerProcess | None, setup: Setup,
                    only: tuple[str, ...] = PASSES, then: Setup | None = None) -> list[Pass]:
    """The passes of one setup (those in `only`), one after the other; `then`: the runtime pass goes on with that
    setup's NPCs in rotation on the same runtime (`--then-npcs`)."""
    began = time.perf_counter()
    passes = await runtime_pass(server, setup, "runtime", then=then) if "runtime" in only else []
    if "no-prewarm" in only:
        passes += await runtime_pass(server, setup, "runtime, no prewarm", prewarm=False)
    if "design-note" in only:
        passes += await runtime_pass(server, setup, "runtime, design-note order, no hysteresis",
                                     assemble=assemble_design_note, compaction_target_ratio=NO_HYSTERESIS)
    if "naive" in only:
        passes.append(await naive_pass(server, setup))
    if cached is not None and runs_cached(setup.npcs, only) and "cached" in only:
        passes += await runtime_pass(cached, setup, f"runtime + prompt cache {cached.config.prompt_cache_mb} MB")
    if cached is not None and runs_cached(setup.npcs, only) and "cached-no-prewarm" in only:
        passes += await runtime_pass(cached, setup, f"runtime + prompt cache {cached.config.prompt_cache_mb} MB, "
                                     "no prewarm", prewarm=False)
    print(f"  passes done in {time.perf_counter() - began:.0f} s", flush=True)
    return passes


HEADER = ("| NPCs x players | turns, edit every | approach | tokens evaluated per turn, median / p90 / max | "
          "prompt tokens, median | TTFT p50 / p90 / max s | turn median s | server RSS MB |\n"
          "|---|---|---|---|---|---|---|---|")


def row(setup: Setup, p: Pass) -> str:
    """One table row."""
    setup = p.setup or setup
    return (f"| {setup.npcs} x {setup.players} | {setup.turns}, {setup.edit_every} | {p.name} | "
            f"{statistics.median(p.evaluated):g} / {_p(p.evaluated, 90):.0f} / {max(p.evaluated)} | "
            f"{statistics.median(p.prompt):g} | {statistics.median(p.ttft):.2f} / {_p(p.ttft, 90):.2f} / "
            f"{max(p.ttft):.2f} | {statistics.median(p.turn_s):.2f} | {p.rss_mb:.0f} |")


def past_window_ratios(runtime: Pass, naive: Pass) -> str:
    """The long-session ratios past the window (docs/benchmarks.md), runtime against the naive game in this run."""
    r_ttft, n_ttft = runtime.past_window(runtime.ttft), naive.past_window(naive.ttft)
    r_eval, n_eval = runtime.past_window(runtime.evaluated), naive.past_window(naive.evaluated)
    r_sent, n_sent = runtime.past_window(runtime.prompt), naive.past_window(naive.prompt)
    return (f"TTFT p50 {statistics.median(r_ttft) / statistics.median(n_ttft):.2f}x, p90 "
            f"{_p(r_ttft, 90) / _p(n_ttft, 90):.2f}x, max {max(r_ttft) / max(n_ttft):.2f}x (runtime max "
            f"{max(r_ttft):.2f} s); tokens evaluated median "
            f"{statistics.median(r_eval) / max(1, statistics.median(n_eval)):.2f}x, the runtime's largest turn "
            f"{max(runtime.evaluated) / max(1, statistics.median(runtime.evaluated)):.1f}x its "
            f"median; prompt tokens sent median {statistics.median(r_sent) / statistics.median(n_sent):.2f}x "
            f"({statistics.median(r_sent):g} vs {statistics.median(n_sent):g})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[40],
                        help="turns per setup (rotating over the conversations); several: one setup each")
    parser.add_argument("--npcs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--players", type=int, default=1)
    parser.add_argument("--facts", type=int, default=10, help="facts each conversation's memory starts with")
    parser.add_argument("--edit-every", type=int, nargs="+", default=[5],
                        help="the game appends a fact every N turns (0: never); several: one setup each")
    parser.add_argument("--window", type=int, default=8, help="the roles' MaxChatHistoryMessages")
    parser.add_argument("--prompt-cache-mb", type=int, default=256, help="the cached server's RAM cache (0: no pass)")
    parser.add_argument("--passes", nargs="+", choices=PASSES, default=list(PASSES), help="which approaches to run")
    parser.add_argument("--memory-design", choices=("auto", "tool", "writer"), default="auto",
                        help="the runtime's memory design: auto = what serve picks for the served model "
                             "(SmolLM2-135M: the writer pass after the reply, the memory last), tool = the memory "
                             "tool in the reply (its contract in the system prompt), writer")
    add_memory_block_argument(parser)
    parser.add_argument("--then-npcs", type=int, default=0,
                        help="right after the runtime pass's session, the same runtime and server play this many "
                             "other NPCs in rotation (four NPCs right after a long game session)")
    parser.add_argument("--then-turns", type=int, default=0,
                        help="turns of the --then-npcs rotation (default: 10 per NPC)")
    parser.add_argument("--breakdown", action="store_true",
                        help="time each turn from its start to the request leaving the client, to the first SSE "
                             "line, to the first visible text (runtime and naive passes)")
    parser.add_argument("--rss-every", type=int, default=0,
                        help="also record the server's RSS every N turns of a runtime pass (long-run memory)")
    parser.add_argument("--think-s", type=float, nargs="+", default=[0.0],
                        help="pause after each turn (a player reading the reply; the work between turns runs then): "
                             "S seconds, or A B for a seeded uniform pause in [A, B]; default 0")
    args = parser.parse_args()
    global RSS_EVERY, THINK_S, MEMORY_DESIGN, BREAKDOWN, MEMORY_LAST_STAYS
    MEMORY_LAST_STAYS = MEMORY_BLOCK[args.memory_block]
    RSS_EVERY, THINK_S = args.rss_every, (args.think_s[0], args.think_s[-1])
    MEMORY_DESIGN = None if args.memory_design == "auto" else args.memory_design
    BREAKDOWN = args.breakdown
    config = LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS, port=free_port())
    rows: list[tuple[Setup, list[Pass]]] = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(LlamaServerProcess(config))
        cached = None
        if args.prompt_cache_mb > 0 and any(runs_cached(npcs, args.passes) for npcs in args.npcs):
            cached = stack.enter_context(LlamaServerProcess(replace(config, port=free_port(),
                                                                    prompt_cache_mb=args.prompt_cache_mb)))
        print(f"SmolLM2-135M-Instruct Q4_1 hosted (game settings), {args.turns} turns per setup in rotation, "
              f"memory of {args.facts} facts + 1 every {args.edit_every} turns of a conversation, window "
              f"{args.window} messages (hysteresis target {COMPACTION_TARGET_RATIO}), {MAX_TOKENS}-token replies, "
              f"{THINK_S[0]:g}-{THINK_S[1]:g} s between a reply and the next line; each conversation's first turn "
              "excluded", flush=True)
        print(HEADER, flush=True)
        for npcs in args.npcs:
            for turns in args.turns:
                for edit_every in args.edit_every:
                    setup = Setup(npcs, args.players, turns, args.facts, edit_every, args.window)
                    began = time.perf_counter()
                    then = Setup(args.then_npcs, args.players, args.then_turns or 10 * args.then_npcs, args.facts,
                                 edit_every, args.window) if args.then_npcs > 0 else None
                    passes = asyncio.run(run_setup(server, cached, setup, tuple(args.passes), then))
                    rows.append((setup, passes))
                    for p in passes:  # as soon as a setup is done: a bounded run still reports what it measured
                        print(row(setup, p), flush=True)
                    print(f"  ({npcs} NPC(s) x {args.players} player(s), {turns} turns, an edit every {edit_every}: "
                          f"{time.perf_counter() - began:.0f} s)", flush=True)
    for setup, passes in rows:
        by_name = {p.name: p for p in passes}
        runtime, naive = by_name.get("runtime"), by_name.get("naive (memory in system prompt, whole history)")
        if runtime is not None and naive is not None:
            print(f"{setup.npcs} NPC(s), {setup.turns} turns, an edit every {setup.edit_every}: runtime/naive past the "
                  f"window: {past_window_ratios(runtime, naive)}")
        rotation = next((p for p in passes if p.setup is not None), None)
        if runtime is not None and rotation is not None:
            others = rotation.setup.npcs if rotation.setup else 0
            print(f"{setup.npcs} NPC(s), {setup.turns} turns, then {others} other "
                  f"NPCs in rotation on the same runtime: TTFT p50 {statistics.median(rotation.ttft):.2f} s vs "
                  f"{statistics.median(runtime.ttft):.2f} s in the session before: "
                  f"{statistics.median(rotation.ttft) / statistics.median(runtime.ttft):.2f}x (target: <= 1.3x); "
                  f"tokens evaluated median {statistics.median(rotation.evaluated):g} vs "
                  f"{statistics.median(runtime.evaluated):g}")
        if runtime is not None and naive is not None:
            total = sum(runtime.evaluated) + runtime.prewarm_tokens  # the work moved between turns counts too
            print(f"{setup.npcs} NPC(s): runtime/naive tokens evaluated per turn, median "
                  f"{statistics.median(runtime.evaluated) / max(1, statistics.median(naive.evaluated)):.2f}x, "
                  f"total with the prewarms {total / max(1, sum(naive.evaluated)):.2f}x ({total} vs "
                  f"{sum(naive.evaluated)}); TTFT p50 "
                  f"{statistics.median(runtime.ttft) / statistics.median(naive.ttft):.2f}x")
        for p in passes:
            if p.breakdown is not None:
                print(p.breakdown.line(p.name))
            for line in p.outliers():
                print(f"  {p.name}: over 3x its median: {line}")
            if len(p.evaluated) <= 120:
                print(f"  {p.name}: evaluated per turn {' '.join(str(e) for e in p.evaluated)}")
            if args.rss_every and p.rss_trace:
                print(f"  {p.name}: server RSS MB after N turns: "
                      + ", ".join(f"{n}: {mb:.0f}" for n, mb in p.rss_trace))
    print("\nRun: nice -n 10 .venv/bin/python bench/bench_npcs.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
