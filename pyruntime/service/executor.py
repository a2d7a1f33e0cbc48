"""Running the blocking core (file stores fsync) off the event loop, with errors turned into statuses."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from pyruntime.service.status import ServiceError, status_for

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="BlockingCalls")

DEFAULT_WORKERS = 16


class BlockingCalls:
    """Owns the worker threads that blocking core calls run on; `close()` waits for in-flight ones."""

    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="coreai-service")

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """fn(*args) on a worker thread; any failure raised as a ServiceError.

        A cancelled caller stops waiting, but a write already running finishes on its thread:
        stores commit atomically, so the files stay consistent either way.
        """
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            raise status_for(exc) from None

    def close(self) -> None:
        """Wait for running calls to finish, then stop the threads (graceful shutdown)."""
        self._executor.shutdown(wait=True)


def blocking(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """Turn a blocking method of a BlockingCalls subclass into an async one that runs on its threads."""

    @functools.wraps(fn)
    async def call(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.run(fn, self, *args, **kwargs)

    return call

