"""The per-model request queue: as many requests in flight as the model server has slots, player turns first.

Pure asyncio, no I/O. The hosted llama.cpp server decodes `capacity` requests at once (its parallel
slots); queueing here decides the order (its own scheduler is first come, first served) and keeps a
waiting request cancellable. Background work (the memory writer pass, prewarms, LLM compaction) never
takes the last free slot: with two or more slots, one stays for the player, so a player's turn never
waits behind work nobody is watching.

A turn's model calls stay together: calls that name an `owner` (a turn, from `new_owner`) are served
oldest owner first, and a holder that says another call of its turn follows (`SlotGrant.expect_more`)
keeps its slot reserved for up to `linger` seconds. Without that, concurrent multi-call turns
interleave their calls and each call can find another turn's prompt where its own was.

Background work that can be redone (a prewarm, a compaction between turns) holds its slot
`preemptible`: a player call that finds no free slot stops one such holder (its body raises
`Preempted`, which closes its stream) and is handed that slot, so a player never waits for work
nobody is watching.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import IntEnum

# How long a turn between two of its model calls (running a tool, building the next prompt) keeps the
# slot from the next waiter: long enough for a memory write, short enough that a slow game tool does
# not hold other NPCs.
DEFAULT_LINGER_S = 0.2


class Priority(IntEnum):
    """Who is waiting: lower values are served first."""

    PLAYER = 0  # a player-facing turn
    BACKGROUND = 1  # compaction, summaries and other work nobody is watching


class Preempted(Exception):
    """A player's call came for the model while this background call held it: it was stopped; redo it later."""


class SlotGrant:
    """What the holder of the slot can say about its release (and, for background work, whether it was pre-empted)."""

    def __init__(self, preemptible: bool = False) -> None:
        """A grant whose owner makes no further call."""
        self.more_coming = False
        self.preemptible = preemptible
        self.preempted = False
        self._scope: asyncio.Timeout | None = None

    def expect_more(self) -> None:
        """Another call of the same owner follows at once: keep the slot reserved for it (briefly)."""
        self.more_coming = True

    def _preempt(self) -> None:
        """Stop the holder's body now (a preemptible grant only): it raises `Preempted` at its next await."""
        if not self.preemptible or self.preempted:
            return
        self.preempted = True
        if self._scope is not None:
            self._scope.reschedule(asyncio.get_running_loop().time())


def background_share(capacity: int) -> int:
    """How many background requests may run at once: all but one slot, at least one."""
    return max(1, capacity - 1)


class ModelRequestQueue:
    """Grants up to `capacity` slots at once: by priority, then oldest owner, then FIFO; cancellation-safe."""

    def __init__(self, linger: float = DEFAULT_LINGER_S, *, capacity: int = 1,
                 background_capacity: int | None = None) -> None:
        """An idle queue of `capacity` slots (the model server's parallel slots); `linger` bounds how long a
        reservation for an owner's next call lasts; `background_capacity` (default: all slots but one, at
        least one) bounds the background requests running at once."""
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.linger = linger
        self.capacity = capacity
        self.background_capacity = background_share(capacity) if background_capacity is None else background_capacity
        if not 1 <= self.background_capacity <= capacity:
            raise ValueError("background_capacity must be within 1..capacity")
        self._in_use = 0  # slots held or reserved
        self._background = 0  # of which background holders
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._reserved: dict[int, asyncio.TimerHandle] = {}
        self._preemptible: list[SlotGrant] = []  # holders whose background work a player may stop, oldest first

    @property
    def busy(self) -> bool:
        """True while a request holds a slot (or one is reserved for an owner's next call)."""
        return self._in_use > 0

    @property
    def in_use(self) -> int:
        """Slots held or reserved now."""
        return self._in_use

    @property
    def waiting(self) -> int:
        """Number of requests waiting for a slot."""
        return sum(1 for *_, f in self._waiters if not f.done())

    def new_owner(self) -> int:
        """An owner id for the calls of one turn; older owners are served first within a priority."""
        return next(self._order)

    @asynccontextmanager
    async def slot(self, priority: Priority = Priority.PLAYER, owner: int | None = None, *,
                   preemptible: bool = False) -> AsyncIterator[SlotGrant]:
        """Hold a slot for the body of `async with`; waits for its turn first.

        `preemptible` (background work only): a player call that finds no free slot while the body runs
        stops it: the body is cancelled and `async with` raises `Preempted`; the player call gets the slot.
        """
        priority = Priority(priority)
        if preemptible and priority is not Priority.BACKGROUND:
            raise ValueError("only background work can be preemptible")
        await self._acquire(priority, owner)
        grant = SlotGrant(preemptible)
        try:
            if not preemptible:
                yield grant
                return
            self._preemptible.append(grant)
            scope = grant._scope = asyncio.timeout(None)
            try:
                async with scope:
                    if self._player_waiting():  # one came between the hand-over and this task's resuming
                        grant._preempt()
                    yield grant
            except TimeoutError:
                if grant.preempted and scope.expired():
                    raise Preempted("a player's call took the model") from None
                raise
        finally:
            if grant in self._preemptible:
                self._preemptible.remove(grant)
            grant._scope = None
            self._release(priority, owner if grant.more_coming else None)

    def _player_waiting(self) -> bool:
        return any(p == Priority.PLAYER and not f.done() for p, *_, f in self._waiters)

    async def _acquire(self, priority: Priority, owner: int | None) -> None:
        if owner is not None and owner in self._reserved:
            self._reserved.pop(owner).cancel()  # the slot waited for this call: it stays in use, now ours
            self._background += priority is Priority.BACKGROUND
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        order = next(self._order)
        heapq.heappush(self._waiters, (int(priority), order if owner is None else owner, order, future))
        self._dispatch()
        if priority is Priority.PLAYER and not future.done():
            self._preempt_one()  # a player never waits for background work that can be redone
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # A slot was handed to us just as we were cancelled: pass it on.
                self._release(priority, None)
            raise
        # A cancelled waiter's future stays in the heap and is skipped in _dispatch.

    def _preempt_one(self) -> None:
        """Stop the most recent preemptible holder that is not stopping already (its slot goes to the player)."""
        for grant in reversed(self._preemptible):
            if not grant.preempted:
                grant._preempt()
                return

    def _release(self, priority: Priority, reserve_for: int | None) -> None:
        self._background -= priority is Priority.BACKGROUND
        if reserve_for is not None and self.waiting and self.linger > 0:
            # Others wait: hold the slot for the owner's next call, up to `linger`.
            loop = asyncio.get_running_loop()
            self._reserved[reserve_for] = loop.call_later(self.linger, self._expire, reserve_for)
            return
        self._in_use -= 1
        self._dispatch()

    def _expire(self, owner: int) -> None:
        if self._reserved.pop(owner, None) is not None:
            self._in_use -= 1
            self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to the waiters first in order; background ones only within their share."""
        while self._waiters and self._in_use < self.capacity:
            priority, *_, future = self._waiters[0]
            if future.done():
                heapq.heappop(self._waiters)
                continue
            background = priority == Priority.BACKGROUND
            if background and self._background >= self.background_capacity:
                return  # every waiter left is background (players sort first): they wait for a background end
            heapq.heappop(self._waiters)
            self._in_use += 1
            self._background += background
            future.set_result(None)
