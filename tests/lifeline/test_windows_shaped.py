"""The start/stop path as Windows has it: the event loop's `add_signal_handler` raises NotImplementedError
(monkeypatched: the one OS difference that cannot be provoked on Linux). `serve` still starts its model, answers,
stops on a signal, stops the model child and gives the previous signal handlers back."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from pyruntime.app import RuntimeSettings
from pyruntime.cli.serve import EXIT_OK, serve
from pyruntime.cli.signals import stop_on_signals, stop_signals
from tests.model.test_serve_cli import model_children, own_copy
from tests.support.fixtures import free_port
from tests.unity_layer.processes import is_alive, wait_for

# POSIX-only calls that Python 3.11 on Windows does not have at all.
POSIX_ONLY_OS_CALLS = ("fchmod", "pidfd_open", "sched_getaffinity", "getuid", "geteuid", "setsid", "killpg", "fork")


@pytest.fixture
def windows_like_loop(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every add_signal_handler raises NotImplementedError, as on Windows' event loops, and the POSIX-only `os`
    calls are gone, as on Windows; records the add_signal_handler attempts."""
    attempts: list[int] = []

    def add_signal_handler(self: Any, sig: int, callback: Any, *args: Any) -> None:
        attempts.append(sig)
        raise NotImplementedError

    monkeypatch.setattr(asyncio.SelectorEventLoop, "add_signal_handler", add_signal_handler)
    for name in POSIX_ONLY_OS_CALLS:
        monkeypatch.delattr(os, name, raising=False)
    return attempts


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_starts_answers_and_stops_on_a_signal_without_loop_signal_handlers(
        windows_like_loop: list[int], tiny_model_path: Path, tmp_path: Path, sig: signal.Signals) -> None:
    before = {s: signal.getsignal(s) for s in stop_signals()}
    seen: dict[str, Any] = {}
    model = own_copy(tmp_path, tiny_model_path)  # this serve's engine, told apart from the suite's own tiny servers

    def on_ready(ready: dict[str, Any]) -> None:
        def probe_then_signal() -> None:
            try:
                seen["health"] = httpx.get(f"http://127.0.0.1:{ready['connect_port']}/healthz", timeout=30).json()
                [seen["model_pid"]] = model_children(model)
            finally:
                os.kill(os.getpid(), sig)  # delivered to the main thread, where serve's loop runs

        threading.Thread(target=probe_then_signal, daemon=True).start()

    options = RuntimeSettings(model=model, port=free_port(), data_dir=tmp_path / "data", grpc_port=0, connect_port=0)
    assert asyncio.run(serve(options, on_ready=on_ready)) == EXIT_OK
    assert sorted(windows_like_loop) == sorted(stop_signals())  # the loop was asked first, and refused
    assert seen["health"]["ready"] is True
    wait_for(lambda: not is_alive(seen["model_pid"]), 10, "the model child to be gone")
    assert {s: signal.getsignal(s) for s in stop_signals()} == before


def test_stop_on_signals_uses_the_loop_where_it_can() -> None:
    before = signal.getsignal(signal.SIGTERM)

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        calls: list[str] = []
        stopped = asyncio.Event()

        def stop() -> None:
            calls.append("stop")
            stopped.set()

        with stop_on_signals(loop, stop):
            assert signal.getsignal(signal.SIGTERM) is not before  # asyncio's own handler
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(stopped.wait(), 10)
        return calls

    assert asyncio.run(scenario()) == ["stop"]
    assert signal.getsignal(signal.SIGTERM) == before
