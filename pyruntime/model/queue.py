"""The per-model request queue: one request in flight at a time, player turns before background work.

Pure asyncio, no I/O. llama.cpp decodes one request at a time anyway; queueing here decides the
order (its own lock is first come, first served) and keeps a waiting request cancellable.

A turn's model calls stay together: calls that name an `owner` (a turn, from `new_owner`) are served
oldest owner first, and a holder that says another call of its turn follows (`SlotGrant.expect_more`)
keeps the slot reserved for up to `linger` seconds. Without that, four concurrent three-call turns
interleave their calls and each call finds another turn's prompt in llama.cpp's single KV cache.
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


class SlotGrant:
    """What the holder of the slot can say about its release."""

    def __init__(self) -> None:
        """A grant whose owner makes no further call."""
        self.more_coming = False

    def expect_more(self) -> None:
        """Another call of the same owner follows at once: keep the slot reserved for it (briefly)."""
        self.more_coming = True


class ModelRequestQueue:
    """Grants one slot at a time: by priority, then oldest owner, then FIFO; cancellation-safe."""

    def __init__(self, linger: float = DEFAULT_LINGER_S) -> None:
        """An idle queue; `linger` bounds how long a reservation for an owner's next call lasts."""
        self.linger = linger
        self._busy = False
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._reserved_for: int | None = None
        self._reservation: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """True while a request holds the slot (or it is reserved for an owner's next call)."""
        return self._busy

    @property
    def waiting(self) -> int:
        """Number of requests waiting for the slot."""
        return sum(1 for *_, f in self._waiters if not f.done())

    def new_owner(self) -> int:
        """An owner id for the calls of one turn; older owners are served first within a priority."""
        return next(self._order)

    @asynccontextmanager
    async def slot(self, priority: Priority = Priority.PLAYER, owner: int | None = None) -> AsyncIterator[SlotGrant]:
        """Hold the model for the body of `async with`; waits for its turn first."""
        await self._acquire(Priority(priority), owner)
        grant = SlotGrant()
        try:
            yield grant
        finally:
            self._release(owner if grant.more_coming else None)

    async def _acquire(self, priority: Priority, owner: int | None) -> None:
        if owner is not None and self._reserved_for == owner:
            self._end_reservation()  # the slot waited for this call: it stays busy, now ours
            return
        if not self._busy and not self.waiting:
            self._busy = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        order = next(self._order)
        heapq.heappush(self._waiters, (int(priority), order if owner is None else owner, order, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # The slot was handed to us just as we were cancelled: pass it on.
                self._release(None)
            raise
        # A cancelled waiter's future stays in the heap and is skipped in _release.

    def _release(self, reserve_for: int | None) -> None:
        if reserve_for is not None and self.waiting and self.linger > 0:
            # Others wait: hold the slot for the owner's next call, up to `linger`.
            self._reserved_for = reserve_for
            self._reservation = asyncio.get_running_loop().call_later(self.linger, self._expire, reserve_for)
            return
        self._hand_over()

    def _expire(self, owner: int) -> None:
        if self._reserved_for == owner:
            self._end_reservation()
            self._hand_over()

    def _end_reservation(self) -> None:
        if self._reservation is not None:
            self._reservation.cancel()
        self._reserved_for = None
        self._reservation = None

    def _hand_over(self) -> None:
        while self._waiters:
            *_, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)  # hand over: the slot stays busy for the next holder
                return
        self._busy = False
