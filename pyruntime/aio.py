"""asyncio helpers the runtime's parts share."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from types import TracebackType
from typing import Any, Self


async def finish_or_cancel(running: Set[asyncio.Task[Any]], grace: float, cancel_wait: float) -> int:
    """Shutdown of a set of tasks: give them `grace` s to finish, cancel the ones still in `running` then (read
    again, so a task started meanwhile is cancelled too) and wait up to `cancel_wait` s for them to end.

    Returns how many were cancelled.
    """
    if running:
        await asyncio.wait(set(running), timeout=grace)
    left = set(running)
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left, timeout=cancel_wait)
    return len(left)


class AsyncClosing:
    """A base for an object with `aclose()`: `async with obj` hands back obj and closes it on the way out."""

    async def aclose(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
