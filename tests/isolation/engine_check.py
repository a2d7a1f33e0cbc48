"""Run an isolation schedule (`workload.py`) against the hosted llama-server and check it.

Every request goes through the runtime's own client (`OpenAICompatClient` with the engine's slot affinity), as the
orchestrator sends them. A middleware under that client sees what reaches the engine: each compared turn's first-token
distribution (`top_logprobs` at temperature 0), how many prompt tokens the engine reused (`timings.cache_n`) and from
which slot, and every slot action (erase, save, restore). Two checks come out of it:

- **Nothing reused crosses a conversation**: a turn that reused cached tokens must find its slot holding its own
  conversation's state (its own last request, or a state restored from its own file). A state that came from
  another conversation, or that the engine restored by itself, is a finding, even when the prompts are identical.
- **Every turn sees only its own prompt**: its first-token distribution equals, within `PROB_TOLERANCE`, what the
  same prompt gets from a fresh engine (one slot, no cache, the slot erased before each request).

A finding names the turn (conversation and turn number, with the schedule's seed) and what was reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.types import TextDelta
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.isolation.workload import Schedule, Step, Turn

TOP_K = 10
# The largest difference of one token's probability between a turn on the working engine and the same prompt on a
# fresh one that is still numeric noise, for the tiny F32 model with flash attention off (the suite's setting).
# Measured (bench/bench_isolation.py, docs/benchmarks.md#isolation): at most 8.6e-7 over 16 seeds x 60 turns, reuse,
# parking and concurrent batches included; one changed token of context moves some probability by 1.1e-3 at least.
# Flash attention on, or a quantized model's batch shapes (SmolLM2: up to 3.4e-2), add noise of that size.
PROB_TOLERANCE = 1e-4
CANCEL_AFTER_S = 0.05  # a cancelled prompt is abandoned this long after it was sent (mid-evaluation)

_current: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("isolation_turn", default=None)
StartEngine = Callable[[], LlamaServerProcess]
Wrap = aiohttp.ClientMiddlewareType  # what stands between the recorder and the engine


@dataclass
class Observation:
    """What one compared turn got from the engine."""

    turn: Turn
    slot: int
    cache_n: int
    prompt_n: int
    held_before: str  # whose state the slot held when the request was sent ("" = nothing)
    top: dict[int, float]


@dataclass
class Report:
    """Everything a run saw: the observations, the findings, and counts of what was exercised."""

    seed: int
    observations: list[Observation] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    reused: int = 0  # compared turns that reused cached tokens
    slot_actions: dict[str, int] = field(default_factory=dict)
    cancelled: int = 0
    restarts: int = 0


def _top(choice: dict[str, Any]) -> dict[int, float]:
    content = ((choice.get("logprobs") or {}).get("content") or [{}])[0]
    return {int(item["id"]): math.exp(float(item["logprob"])) for item in content.get("top_logprobs") or []}


class Recorder:
    """A client middleware: passes requests to the engine and notes what each one was: slot actions, and the answers
    of compared turns."""

    def __init__(self, report: Report, names: dict[str, str]) -> None:
        self._report = report
        self._names = names  # digest -> conversation name
        self.held: dict[int, str] = {}  # slot -> the digest of the conversation whose state it holds

    async def __call__(self, request: aiohttp.ClientRequest,
                       handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        raw = await request.body.as_bytes() if request.body else b""
        body: dict[str, Any] = json.loads(raw) if raw else {}
        path = request.url.path
        held = dict(self.held)
        response = await handler(request)
        if path.startswith("/slots/"):
            if response.status == 200:
                self._slot_action(int(path.rsplit("/", 1)[1]), request.url.query.get("action", ""), body)
            return response
        if not path.endswith("/chat/completions") or "id_slot" not in body:
            return response
        slot = int(body["id_slot"])
        turn = _current.get()
        if turn is not None:
            self.held[slot] = turn.conversation.digest
        if body.get("stream") or turn is None:
            return response
        content = await response.read()  # kept by the response: the client reads it again
        if response.status == 200:
            self._observe(turn, slot, held.get(slot, ""), json.loads(content))
        return response

    def _slot_action(self, slot: int, action: str, body: dict[str, Any]) -> None:
        self._report.slot_actions[action] = self._report.slot_actions.get(action, 0) + 1
        if action == "erase":
            self.held.pop(slot, None)
        elif action == "restore":
            self.held[slot] = str(body.get("filename", "")).split(".", 1)[0]

    def _observe(self, turn: Turn, slot: int, held: str, data: dict[str, Any]) -> None:
        timings = data.get("timings") or {}
        observation = Observation(turn, slot, int(timings.get("cache_n", 0)), int(timings.get("prompt_n", 0)),
                                  held, _top((data.get("choices") or [{}])[0]))
        self._report.observations.append(observation)
        if observation.cache_n:
            self._report.reused += 1
        if observation.cache_n and held != turn.conversation.digest:
            owner = self._names.get(held, "nothing the runtime put there" if not held else "an unknown state")
            self._report.findings.append(
                f"{turn.label} (seed {self._report.seed}) reused {observation.cache_n} cached tokens in slot {slot}, "
                f"which held {owner}'s state: a state crossed from one conversation to another")


def _client(server: LlamaServerProcess, recorder: Recorder, wrap: Wrap | None = None) -> OpenAICompatClient:
    options = server.client_options()
    options["middlewares"] = (recorder, wrap) if wrap is not None else (recorder,)
    return OpenAICompatClient(**options)


async def _probe(client: OpenAICompatClient, turn: Turn, conversation: str | None) -> None:
    token = _current.set(turn)
    try:
        await client.chat(list(turn.messages), max_tokens=1, temperature=0.0,
                          extra={"logprobs": True, "top_logprobs": TOP_K}, conversation=conversation)
    finally:
        _current.reset(token)


async def _cancelled(client: OpenAICompatClient, step: Step) -> None:
    turn = step.turns[0]

    async def stream() -> None:
        token = _current.set(turn)
        try:
            async with client.stream_chat(list(turn.messages), max_tokens=64, temperature=0.0,
                                          conversation=turn.conversation.digest) as deltas:
                async for delta in deltas:
                    if step.kind == "cancel_stream" and isinstance(delta, TextDelta):
                        return  # the player left while the reply streamed: leaving closes the stream
        finally:
            _current.reset(token)

    task = asyncio.ensure_future(stream())
    if step.kind == "cancel_prompt":
        await asyncio.sleep(CANCEL_AFTER_S)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def run_schedule(schedule: Schedule, start: StartEngine, wrap: Wrap | None = None) -> Report:
    """Run the schedule on engines from `start` (a new one after each restart step); the engine is stopped after.

    `wrap` puts a client middleware of the caller's between the recorder and the engine (a self-test's injected
    fault).
    """
    report = Report(schedule.seed)
    names = {c.digest: c.name for c in schedule.conversations}
    server = await asyncio.to_thread(start)
    recorder = Recorder(report, names)
    client = _client(server, recorder, wrap)
    try:
        for step in schedule.steps:
            if step.kind == "restart":
                await client.aclose()
                await asyncio.to_thread(server.stop)  # a graceful stop: the slots' states are saved
                server = await asyncio.to_thread(start)
                recorder = Recorder(report, names)
                recorder.held = dict(server.slots.holders())  # restored from their files at start
                client = _client(server, recorder, wrap)
                report.restarts += 1
            elif step.kind == "turns":
                await asyncio.gather(*(_probe(client, turn, turn.conversation.digest) for turn in step.turns))
            else:
                await _cancelled(client, step)
                report.cancelled += 1
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
    return report


async def fresh_distributions(turns: Sequence[Turn], start: StartEngine) -> dict[str, dict[int, float]]:
    """Each turn's first-token distribution on a fresh engine: one slot, no host cache, erased before each request."""
    report = Report(0)
    server = await asyncio.to_thread(start)
    client = _client(server, Recorder(report, {}))
    fresh: dict[str, dict[int, float]] = {}
    try:
        for turn in turns:
            if not await client.erase_slot(0):
                raise RuntimeError("the fresh engine refused to erase its slot")
            await _probe(client, turn, None)
            fresh[turn.label] = report.observations[-1].top
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
    return fresh


def difference(observed: dict[int, float], fresh: dict[int, float]) -> float:
    """The largest probability difference the two top-K lists allow: a token in one list and not in the other must
    be at most as likely as the other list's least likely one."""
    worst = 0.0
    for mine, theirs in ((observed, fresh), (fresh, observed)):
        floor = min(theirs.values()) if theirs else 0.0
        for token, probability in mine.items():
            other = theirs.get(token)
            worst = max(worst, abs(probability - other) if other is not None else probability - floor)
    return worst


def compare(report: Report, fresh: dict[str, dict[int, float]], tolerance: float = PROB_TOLERANCE) -> list[str]:
    """Findings for the turns whose distribution is not the fresh engine's (appended to the report's too)."""
    found = []
    for seen in report.observations:
        gap = difference(seen.top, fresh[seen.turn.label])
        if gap > tolerance:
            found.append(f"{seen.turn.label} (seed {report.seed}): its first-token distribution differs from a fresh "
                         f"engine's by {gap:.3g} (tolerance {tolerance:g}); slot {seen.slot}, {seen.cache_n} cached "
                         f"tokens reused, {seen.prompt_n} evaluated, the slot held "
                         f"{_held_name(report, seen) or 'nothing'} before")
    report.findings.extend(found)
    return found


def _held_name(report: Report, seen: Observation) -> str:
    for other in report.observations:
        if other.turn.conversation.digest == seen.held_before:
            return other.turn.conversation.name
    return seen.held_before[:12]
