"""Waiting on Unity's main thread (this test thread, under the stub engine) as Unity does: by running frames.

Blocking the main thread on a task that needs it (a main-thread game tool, a continuation posted to Unity's context)
deadlocks in Unity, and so it does here; these helpers run frames while they wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.unity_layer.processes import wait_for


def pump_until(done: Callable[[], Any], timeout: float, what: str) -> None:
    """Run frames on the main thread until `done()`; fail naming `what` after `timeout` seconds."""
    from UnityEngine import StubEngine

    def frame() -> bool:
        StubEngine.RunFrame()
        return bool(done())

    wait_for(frame, timeout, what)


def wait_on_main(task: Any, timeout: float = 120.0) -> Any:
    """The result of a .NET task awaited from the main thread, frames running meanwhile (its exception, unwrapped)."""
    pump_until(lambda: task.IsCompleted, timeout, "the task")
    return task.GetAwaiter().GetResult()
