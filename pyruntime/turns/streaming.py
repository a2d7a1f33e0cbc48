"""Streaming a turn's events (contract §7, docs/contract.md): a bounded channel between the turn and its consumer.

The turn runs as its own task and emits into the channel (back-pressure: it waits while `buffer` events are
unread); the consumer gets each event as it happens, each piece of text as the model sent it. An event already
waiting is taken without a wait (a future and `asyncio.wait` per event cost a server of hundreds of players more
than the event itself). Closing the stream early (or cancelling its consumer) cancels the turn, and the stream
waits for it to record itself: a turn never outlives its stream.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from pyruntime.turns.events import FinalEvent, MemoryWriteEvent, TaskResult, TurnEvent
from pyruntime.turns.turn import Emit


class _Channel:
    """A bounded FIFO of events that wakes its one consumer."""

    def __init__(self, limit: int) -> None:
        self._items: deque[TurnEvent] = deque()
        self._limit = limit
        self.readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    async def put(self, event: TurnEvent) -> None:
        while len(self._items) >= self._limit:
            self._writable.clear()
            await self._writable.wait()
        self._items.append(event)
        self.readable.set()

    def wake(self) -> None:
        """Wake the consumer (the turn ended)."""
        self.readable.set()

    def take(self) -> TurnEvent | None:
        """The next event; None when none waits."""
        if not self._items:
            self.readable.clear()
            return None
        self._writable.set()
        return self._items.popleft()


async def stream_events(run: Callable[[Emit], Coroutine[Any, Any, TaskResult]], buffer: int, *,
                        wait_memory_write: bool) -> AsyncGenerator[TurnEvent, None]:
    """Run `run(emit)` as a task, yielding what it emits; the last event is its `FinalEvent` (or the
    `MemoryWriteEvent` after it with `wait_memory_write`)."""
    channel = _Channel(buffer)
    task = asyncio.create_task(run(channel.put))
    task.add_done_callback(lambda _: channel.wake())
    try:
        while True:
            event = channel.take()
            if event is None:
                if task.done():
                    task.result()  # raises what the turn raised; a finished turn always emitted its FinalEvent
                    return
                await channel.readable.wait()
                continue
            yield event
            # The last event: the final one, or the memory write after it when the request waits for it
            # (a turn without a pass, memory off, ends at its final event: the task is done then).
            if isinstance(event, MemoryWriteEvent) or (isinstance(event, FinalEvent) and not wait_memory_write):
                return
    finally:
        if not task.done():
            task.cancel()
        # Wait for the turn to record itself; it never outlives its stream.
        await asyncio.gather(task, return_exceptions=True)
