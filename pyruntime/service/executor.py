"""Running the blocking core (file stores fsync) off the event loop, with errors turned into statuses."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from pyruntime.service.status import status_for
from pyruntime.stores.admission import Admission, SaveBusy, admitted

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="BlockingCalls")

DEFAULT_WORKERS = 16
BUSY_POLL_FIRST_S = 0.005
BUSY_POLL_MAX_S = 0.1
"""A call turned away by a busy save waits this long off the pool before its next try (doubling)."""


def _attempt(admission: Admission, call: Callable[[], R]) -> R:
    with admitted(admission):
        return call()


class BlockingCalls:
    """Owns the worker threads that blocking core calls run on; `close()` waits for in-flight ones."""

    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="coreai-service")

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """fn(*args) on a worker thread; any failure raised as a ServiceError.

        A cancelled caller stops waiting, but a write already running finishes on its thread:
        stores commit atomically, so the files stay consistent either way. A call whose save is
        busy (`pyruntime.stores.admission`) waits here, on the event loop, not on a worker thread,
        so a stuck save never starves the calls for other saves.
        """
        loop = asyncio.get_running_loop()
        call = functools.partial(fn, *args, **kwargs)
        admission = Admission()
        pause = BUSY_POLL_FIRST_S
        while True:
            context = contextvars.copy_context()  # the caller's context (trace id) in the worker too
            try:
                return await loop.run_in_executor(self._executor, context.run, _attempt, admission, call)
            except SaveBusy:
                await asyncio.sleep(pause)
                pause = min(pause * 2, BUSY_POLL_MAX_S)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a status
                raise status_for(exc) from None

    def close(self) -> None:
        """Wait for running calls to finish, then stop the threads (graceful shutdown)."""
        self._executor.shutdown(wait=True)


def blocking(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """Turn a blocking method of a BlockingCalls subclass into an async one that runs on its threads."""

    @functools.wraps(fn)
    async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:  # self positional, as Concatenate says
        return await self.run(fn, self, *args, **kwargs)

    return call

