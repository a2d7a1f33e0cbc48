"""Admission of turns: as many run at once as the model can serve, the rest wait their turn, fairly, within their
deadline; a turn is refused (RESOURCE_EXHAUSTED, with a retry hint) only when the queue is full or its deadline
cannot be met.

Pure asyncio, no I/O: the services run on one event loop. As many turns run at once as the model serves calls
at once and a few more (`running_places`). A conversation (role + scope + actor, the storage key)
runs one turn at a time, in the order its turns came (the next one then reads the reply before it in its
history); waiting turns are served round-robin by conversation, not first come first served, so one player who
sends ten lines does not hold nine others back. A conversation holds at most `max_per_conversation` turns
(running and waiting), the queue at most `max_queued`.

Without a bound a fire-and-forget client (200 turns seen) made a new turn wait minutes; refusing beyond a fixed
count (16) instead turned 819 of 1,000 turns of 100 players into errors while the engine had room. Now a turn that
cannot be served in time is told at once, with how long to wait (`retry_after_s`): the time the queue ahead of it
is expected to take, from the turns that finished lately.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pyruntime.service.status import ServiceError, StatusCode

DEFAULT_MAX_QUEUED = 512
DEFAULT_MAX_TURNS_PER_CONVERSATION = 4
DEFAULT_MAX_RUNNING = 4  # until the turn engine says what its model serves at once (`size_to`)
MAX_LIMIT = 65536
MIN_RETRY_S = 0.1
MAX_RETRY_S = 60.0
# How fast the expected turn time follows the turns that finish: about the last ten count.
SERVICE_SMOOTHING = 0.1


@dataclass(frozen=True)
class AdmissionSnapshot:
    """What admission holds now and its limits (Health and /metrics read it)."""

    running: int
    queued: int
    max_running: int
    max_queued: int
    max_per_conversation: int

    @property
    def in_flight(self) -> int:
        """Turns admitted and not finished, running or waiting."""
        return self.running + self.queued


@dataclass
class _Waiter:
    future: asyncio.Future[None]
    since: float


class TurnAdmission:
    """Runs up to `max_running` turns at once; queues up to `max_queued` more, round-robin by conversation."""

    def __init__(self, max_running: int | None = None, max_queued: int = DEFAULT_MAX_QUEUED,
                 max_per_conversation: int = DEFAULT_MAX_TURNS_PER_CONVERSATION) -> None:
        """Limits of at least 1 (`max_queued` may be 0: no waiting, the old refuse-at-once behaviour).
        `max_running` None: sized to the model by `size_to` (until then `DEFAULT_MAX_RUNNING`)."""
        _check("max_running", max_running if max_running is not None else 1, 1)
        _check("max_queued", max_queued, 0)
        _check("max_per_conversation", max_per_conversation, 1)
        self.fixed_running = max_running is not None
        self.max_running = max_running if max_running is not None else DEFAULT_MAX_RUNNING
        self.max_queued = max_queued
        self.max_per_conversation = max_per_conversation
        self._running = 0
        self._queued = 0
        self._held: dict[str, int] = {}  # conversation -> its turns admitted or waiting (bounded by those)
        self._busy: set[str] = set()  # conversations with a turn running
        self._waiting: dict[str, deque[_Waiter]] = {}  # conversation -> its waiting turns, oldest first
        self._rotation: deque[str] = deque()  # conversations with waiting turns, next to serve first
        self._service_s: float | None = None  # the expected time a turn holds its place

    def size_to(self, model_concurrency: int) -> None:
        """Run as many turns at once as the model serves calls, and a few more (unless a limit was given): a turn
        holds its place while it prepares, records and waits for a game tool's result, not only while the model
        decodes it, and the model's own queue orders the calls of the turns that run (players first)."""
        if not self.fixed_running:
            self.max_running = running_places(model_concurrency)
            self._dispatch()

    def snapshot(self) -> AdmissionSnapshot:
        """The counts and limits now (the one way to read them: one value, not fields read one by one)."""
        return AdmissionSnapshot(self._running, self._queued, self.max_running, self.max_queued,
                                 self.max_per_conversation)

    def expected_wait_s(self, ahead: int) -> float | None:
        """How long `ahead` waiting turns are expected to take to start (None: no turn has finished yet)."""
        if self._service_s is None:
            return None
        return self._service_s * (ahead + 1) / self.max_running

    @contextlib.asynccontextmanager
    async def admit(self, key: str, deadline_s: float | None = None) -> AsyncIterator[float]:
        """Hold a place for one turn of conversation `key` for the body; yields the seconds it waited.

        RESOURCE_EXHAUSTED (with `retry_after_s`) when the conversation or the queue is full, when the wait expected
        exceeds `deadline_s` (None: no deadline), or when `deadline_s` passes while it waits.
        """
        held = self._held.get(key, 0)
        if held >= self.max_per_conversation:
            raise self._refusal(f"this conversation already has {held} turns in flight (limit "
                                f"{self.max_per_conversation}); wait for them before sending more", held)
        waited = 0.0
        if not self._can_start(key):
            waited = await self._wait(key, deadline_s)
        else:
            self._start(key)
        began = time.monotonic()
        try:
            yield waited
        finally:
            self._finish(key, time.monotonic() - began)

    def _can_start(self, key: str) -> bool:
        """A place is free and the conversation runs no turn. (With a place free, every turn still waiting is one
        whose conversation runs a turn: `_dispatch` hands free places out as soon as they free.)"""
        return self._running < self.max_running and key not in self._busy

    def _start(self, key: str) -> None:
        self._running += 1
        self._busy.add(key)
        self._held[key] = self._held.get(key, 0) + 1

    async def _wait(self, key: str, deadline_s: float | None) -> float:
        if self._queued >= self.max_queued:
            raise self._refusal(f"the runtime is full: {self._running} turns running and {self._queued} waiting "
                                f"(limits {self.max_running} and {self.max_queued})", self._queued)
        expected = self.expected_wait_s(self._queued)
        if deadline_s is not None and expected is not None and expected > deadline_s:
            raise self._refusal(f"the turn cannot start within its deadline ({deadline_s:g} s): {self._queued} turns "
                                f"wait ahead of it, about {expected:.1f} s", self._queued)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future(), loop.time())
        queue = self._waiting.get(key)
        if queue is None:
            queue = self._waiting[key] = deque()
            self._rotation.append(key)
        queue.append(waiter)
        self._queued += 1
        self._held[key] = self._held.get(key, 0) + 1
        try:
            async with asyncio.timeout(deadline_s):
                await waiter.future
        except BaseException as exc:
            granted = waiter.future.done() and not waiter.future.cancelled()
            if granted and isinstance(exc, TimeoutError):
                return loop.time() - waiter.since  # the place came with the deadline: take it
            if granted:
                self._finish(key, None)  # handed over just as the caller left: to the next in line
                raise
            self._forget(key, waiter)
            if isinstance(exc, TimeoutError):
                raise self._refusal(f"no place came free within the turn's deadline ({deadline_s:g} s)",
                                    self._queued) from None
            raise
        return loop.time() - waiter.since

    def _forget(self, key: str, waiter: _Waiter) -> None:
        """A waiter that leaves before its turn: its place in the queue goes."""
        queue = self._waiting.get(key)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            self._queued -= 1
            if not queue:
                del self._waiting[key]
                self._rotation.remove(key)
        self._release_hold(key)
        waiter.future.cancel()

    def _release_hold(self, key: str) -> None:
        left = self._held[key] - 1
        if left:
            self._held[key] = left
        else:
            del self._held[key]  # bounded by the turns in flight, never by players seen

    def _finish(self, key: str, held_s: float | None) -> None:
        self._running -= 1
        self._busy.discard(key)
        self._release_hold(key)
        if held_s is not None:
            self._service_s = held_s if self._service_s is None else (
                self._service_s + SERVICE_SMOOTHING * (held_s - self._service_s))
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free places round-robin to the conversations waiting that run no turn now."""
        for _ in range(len(self._rotation)):
            if self._running >= self.max_running:
                return
            key = self._rotation[0]
            self._rotation.rotate(-1)  # served or not, it goes to the back
            if key in self._busy:
                continue
            queue = self._waiting[key]
            waiter = queue.popleft()
            self._queued -= 1
            if not queue:
                del self._waiting[key]
                self._rotation.remove(key)
            self._running += 1
            self._busy.add(key)
            waiter.future.set_result(None)

    def _refusal(self, message: str, ahead: int) -> ServiceError:
        expected = self.expected_wait_s(ahead)
        retry = MIN_RETRY_S if expected is None else min(MAX_RETRY_S, max(MIN_RETRY_S, expected))
        return ServiceError(StatusCode.RESOURCE_EXHAUSTED, message + f"; retry in {retry:.1f} s",
                            retry_after_s=round(retry, 3))


def running_places(model_concurrency: int) -> int:
    """The turns run at once for a model that serves `model_concurrency` calls at once: those, and a quarter more
    (at least 4 more)."""
    concurrency = max(1, model_concurrency)
    return min(MAX_LIMIT, concurrency + max(4, concurrency // 4))


def _check(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_LIMIT:
        raise ValueError(f"{name} must be an integer within {least}..{MAX_LIMIT}")
