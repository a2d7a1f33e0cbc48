"""Which asyncio event loop `serve` runs on: uvloop where it is installed, else the standard one.

uvloop (libuv under asyncio's API) runs the same code with less CPU per wake-up, and a server of hundreds of
players wakes up for every piece of every reply: measured ~7 % less `serve` CPU per turn (docs/benchmarks.md,
"Players on one server"). It does not exist on Windows, where the standard loop runs; `--event-loop asyncio`
chooses the standard one anywhere.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pyruntime.errors import InvalidArgumentError

T = TypeVar("T")

CHOICES = ("auto", "uvloop", "asyncio")


def uvloop_available() -> bool:
    """Whether uvloop can run here (installed; never on Windows)."""
    if sys.platform == "win32":
        return False
    try:
        return importlib.util.find_spec("uvloop") is not None
    except ImportError:
        return False


def resolve(choice: str) -> str:
    """The loop `choice` runs on: "uvloop" or "asyncio" (`auto`: uvloop where it can)."""
    if choice not in CHOICES:
        raise InvalidArgumentError(f"--event-loop must be one of {', '.join(CHOICES)}")
    if choice == "uvloop" and not uvloop_available():
        raise InvalidArgumentError("--event-loop uvloop: uvloop is not installed here (it does not exist on Windows)")
    if choice == "auto":
        return "uvloop" if uvloop_available() else "asyncio"
    return choice


def loop_factory(loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory of `loop`'s event loops (None: asyncio's default)."""
    if loop != "uvloop":
        return None
    import uvloop

    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], loop: str) -> T:
    """`asyncio.run(main)` on `loop` ("uvloop" or "asyncio")."""
    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        return runner.run(main)
