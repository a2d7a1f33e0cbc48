"""The per-model request queue: one request in flight at a time, player turns before background work.

Pure asyncio, no I/O. llama.cpp decodes one request at a time anyway; queueing here decides the
order (its own lock is first come, first served) and keeps a waiting request cancellable.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import IntEnum


class Priority(IntEnum):
    """Who is waiting: lower values are served first."""

    PLAYER = 0  # a player-facing turn
    BACKGROUND = 1  # compaction, summaries and other work nobody is watching


class ModelRequestQueue:
    """Grants one slot at a time, by priority, FIFO within a priority; cancellation-safe."""

    def __init__(self) -> None:
        """An idle queue."""
        self._busy = False
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def busy(self) -> bool:
        """True while a request holds the slot."""
        return self._busy

    @property
    def waiting(self) -> int:
        """Number of requests waiting for the slot."""
        return sum(1 for _, _, f in self._waiters if not f.done())

    @asynccontextmanager
    async def slot(self, priority: Priority = Priority.PLAYER) -> AsyncIterator[None]:
        """Hold the model for the body of `async with`; waits for its turn first."""
        await self._acquire(Priority(priority))
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: Priority) -> None:
        if not self._busy and not self.waiting:
            self._busy = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(priority), next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # The slot was handed to us just as we were cancelled: pass it on.
                self._release()
            raise
        # A cancelled waiter's future stays in the heap and is skipped in _release.

    def _release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)  # hand over: the slot stays busy for the next holder
                return
        self._busy = False
