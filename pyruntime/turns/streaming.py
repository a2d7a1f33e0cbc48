"""Streaming a turn's events (contract §7, docs/contract.md): a bounded queue between the running turn and its consumer.

The turn runs as its own task and emits into the queue (back-pressure: it waits while `buffer` events are
unread); the consumer gets each event as it happens. Closing the stream early (or cancelling its consumer)
cancels the turn, and the stream waits for it to record itself: a turn never outlives its stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from pyruntime.turns.events import FinalEvent, MemoryWriteEvent, TaskResult, TurnEvent
from pyruntime.turns.turn_state import Emit


async def stream_events(run: Callable[[Emit], Coroutine[Any, Any, TaskResult]], buffer: int, *,
                        wait_memory_write: bool) -> AsyncGenerator[TurnEvent, None]:
    """Run `run(emit)` as a task, yielding what it emits; the last event is its `FinalEvent` (or the
    `MemoryWriteEvent` after it with `wait_memory_write`)."""
    events: asyncio.Queue[TurnEvent] = asyncio.Queue(maxsize=buffer)
    task = asyncio.create_task(run(events.put))
    try:
        while True:
            if task.done() and events.empty():
                task.result()  # raises what the turn raised; a finished turn always emitted its FinalEvent
                return
            getter = asyncio.ensure_future(events.get())
            try:
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                event = getter.result()
                yield event
                # The last event: the final one, or the memory write after it when the request waits for it
                # (a turn without a pass, memory off, ends at its final event: the task is done then).
                if isinstance(event, MemoryWriteEvent) or (
                        isinstance(event, FinalEvent) and not wait_memory_write):
                    return
    finally:
        if not task.done():
            task.cancel()
        # Wait for the turn to record itself; it never outlives its stream.
        await asyncio.gather(task, return_exceptions=True)
