"""Stop signals on every desktop OS: asyncio's signal handlers where the loop has them, `signal.signal` elsewhere.

Windows' event loop has no `add_signal_handler` (NotImplementedError). There a plain `signal.signal`
handler hands the stop to the loop with `call_soon_threadsafe`; asyncio's proactor loop wakes up for
signals through its wake-up fd. On Windows SIGINT is Ctrl+C and SIGBREAK is Ctrl+Break, the console
control events the C runtime turns into signals; SIGTERM is accepted but Windows never sends it (a
`TerminateProcess` cannot be caught: the launcher's job object and the model child's own watch cover it).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGBREAK")  # SIGBREAK exists on Windows only


def stop_signals() -> list[signal.Signals]:
    """The signals that stop the runtime on this OS."""
    return [getattr(signal, name) for name in STOP_SIGNAL_NAMES if hasattr(signal, name)]


@contextlib.contextmanager
def stop_on_signals(loop: asyncio.AbstractEventLoop, on_stop: Callable[[], None]) -> Iterator[None]:
    """While inside, every stop signal calls `on_stop` on `loop`; the previous handlers come back after."""
    through_loop: list[signal.Signals] = []
    previous: dict[signal.Signals, object] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(on_stop)

    try:
        for sig in stop_signals():
            try:
                loop.add_signal_handler(sig, on_stop)
                through_loop.append(sig)
            except NotImplementedError:  # Windows' event loops
                previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig in through_loop:
            loop.remove_signal_handler(sig)
        for sig, old in previous.items():
            signal.signal(sig, old)  # type: ignore[arg-type]  # whatever signal.signal returned before
