"""What the runtime adds to a streamed turn's first token, measured on `serve`'s own clock.

A player's first token is the engine's time to its first token plus everything the runtime does around it:
admission, planning the request, sending it, and relaying the first piece of text. A `FirstTokenClock` lives in a
context variable for the duration of one streamed turn (tasks the turn starts see the same clock); the model client
marks each call it sends and the first text that comes back, the service marks the first text it relays. The
runtime's share is the time from the turn's arrival to that relay, less the engine's part of the call that
produced the text (earlier calls of the turn, a fold or a tool round, count as the runtime's).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

_CLOCK: ContextVar[FirstTokenClock | None] = ContextVar("coreai_first_token_clock", default=None)


@dataclass
class FirstTokenClock:
    """The moments of one streamed turn (`time.perf_counter()` seconds) up to its first relayed text."""

    arrived: float
    sent: float | None = None  # the latest model call sent before the first text was relayed
    answered: float | None = None  # that call's first text
    relayed: float | None = None  # the turn's first text handed to the transport

    def runtime_added(self) -> float | None:
        """Seconds of the first token that were the runtime's; None when no text was relayed."""
        if self.relayed is None or self.sent is None or self.answered is None:
            return None
        return max(0.0, (self.relayed - self.arrived) - (self.answered - self.sent))


@contextlib.contextmanager
def first_token_clock() -> Iterator[FirstTokenClock]:
    """A clock for the turn run in this block (and the tasks it starts)."""
    clock = FirstTokenClock(time.perf_counter())
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        with contextlib.suppress(ValueError):  # an async generator closed from another context: nothing to undo
            _CLOCK.reset(token)


def model_call_sent() -> None:
    """The model client sends a call now (its first text, if any, comes later)."""
    clock = _CLOCK.get()
    if clock is not None and clock.relayed is None:
        clock.sent, clock.answered = time.perf_counter(), None


def model_text_received() -> None:
    """The model client received text from the call it sent last."""
    clock = _CLOCK.get()
    if clock is not None and clock.relayed is None and clock.answered is None:
        clock.answered = time.perf_counter()


def text_relayed(clock: FirstTokenClock) -> None:
    """The service handed text to the transport (only the first time counts)."""
    if clock.relayed is None:
        clock.relayed = time.perf_counter()
