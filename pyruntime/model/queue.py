"""The per-model request queue: one request in flight at a time, player turns before background work.

Pure asyncio, no I/O. llama.cpp decodes one request at a time anyway; queueing here decides the
order (its own lock is first come, first served) and keeps a waiting request cancellable.

A turn's model calls stay together: calls that name an `owner` (a turn, from `new_owner`) are served
oldest owner first, and a holder that says another call of its turn follows (`SlotGrant.expect_more`)
keeps the slot reserved for up to `linger` seconds. Without that, four concurrent three-call turns
interleave their calls and each call finds another turn's prompt in llama.cpp's single KV cache.

Background work that can be redone (a prewarm, a compaction between turns) holds the slot
`preemptible`: a player call that comes for the model while it runs stops it (its body raises
`Preempted`, which closes its stream) and is handed the slot, so a player never waits for work
nobody is watching (issue 24).
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
        self._preemptible: SlotGrant | None = None  # the holder, while it is background work a player may stop

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
    async def slot(self, priority: Priority = Priority.PLAYER, owner: int | None = None, *,
                   preemptible: bool = False) -> AsyncIterator[SlotGrant]:
        """Hold the model for the body of `async with`; waits for its turn first.

        `preemptible` (background work only): a player call that comes while the body runs stops it:
        the body is cancelled and `async with` raises `Preempted`; the player call gets the slot.
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
            self._preemptible = grant
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
            if self._preemptible is grant:
                self._preemptible = None
            grant._scope = None
            self._release(owner if grant.more_coming else None)

    def _player_waiting(self) -> bool:
        return any(p == Priority.PLAYER and not f.done() for p, *_, f in self._waiters)

    async def _acquire(self, priority: Priority, owner: int | None) -> None:
        if priority is Priority.PLAYER and self._preemptible is not None:
            self._preemptible._preempt()  # a player never waits for background work that can be redone
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
