"""asyncio helpers the runtime's parts share."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from typing import Any


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
