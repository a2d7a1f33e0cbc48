"""Per-save admission for calls that run on a shared worker pool: a busy save never holds a worker.

A call run under `admitted()` (the service's worker pool does this) that finds its save busy — a
lock held by another process, or another call already holding it with one more waiting — raises
`SaveBusy` at once, before it has changed anything; the pool's caller then waits off the pool
(`asyncio.sleep`) and runs the call again, until the store's lock timeout has passed since the
first try, when the store raises the clear StoreLockedError instead. So one stuck save (a paused
process holding its file lock) costs no worker at all, however many calls pile onto it. Calls
outside an admission (the CLI, threads of their own) wait for locks as before.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


class SaveBusy(BaseException):
    """The save is busy and the call has done nothing: run it again after a short wait (off the pool).

    Control flow, not an error: a BaseException, so that no `except Exception` between the store
    and the pool (the memory tool turns store errors into tool results) can swallow it.
    """


@dataclass
class Admission:
    """One call's admission: when it first tried, and whether this try may still be turned away."""

    started: float = field(default_factory=time.monotonic)
    may_bounce: bool = True  # until the try holds its first lock; later locks wait as usual
    thread: int | None = None  # the try's own thread; threads it starts (bulk import) wait as usual
    saw_other_process: bool = False  # a try found the save's file lock held by another process

    def deadline(self, lock_timeout: float) -> float:
        """The monotonic time by which the call must have its lock (lock_timeout after the first try)."""
        return self.started + lock_timeout


_CURRENT: contextvars.ContextVar[Admission | None] = contextvars.ContextVar("coreai_admission", default=None)


@contextmanager
def admitted(admission: Admission) -> Iterator[None]:
    """Run one try of a call under admission (the stores may raise SaveBusy before doing anything)."""
    admission.may_bounce = True
    admission.thread = threading.get_ident()
    token = _CURRENT.set(admission)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> Admission | None:
    """The admission of the running try, if any (None in threads the try started: they share its context)."""
    admission = _CURRENT.get()
    if admission is None or admission.thread != threading.get_ident():
        return None
    return admission
