"""Turns are bounded and fair: beyond the limits a turn is RESOURCE_EXHAUSTED at once, on both transports; a turn
that waits for the model longer than the connection timeouts is never cut by them.

The model is made busy the way a long generation makes it busy: the test holds the runtime's real model
queue slot, so admitted turns wait behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeCallError
from pyruntime.model.hosting import LlamaServerProcess
from pyruntime.app import RuntimeModel
from pyruntime.net.limits import TransportLimits
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service import StatusCode, TurnAdmission
from pyruntime.turns import AiOrchestrator, ToolCallMode
from tests.rpc.conftest import TRANSPORTS, Runtime, start_runtime
from tests.support.fixtures import tiny_llama_server, tiny_model_path  # noqa: F401  (pytest fixtures)

SHORT_S = 0.5  # connection timeouts far below how long the held turns wait


class HeldModel:
    """Holds every slot of the runtime's model queue (as running generations would) until released."""

    def __init__(self, runtime: Runtime, orchestrator: AiOrchestrator) -> None:
        self._loop = runtime.handle.loop
        self._queue = orchestrator.queue
        self._release: asyncio.Event | None = None
        self._held = threading.Event()
        self._done: Future[None] | None = None

    async def _hold(self) -> None:
        self._release = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(self._queue.capacity):  # the engine's parallel slots
                await stack.enter_async_context(self._queue.slot())
            self._held.set()
            await self._release.wait()

    def __enter__(self) -> "HeldModel":
        self._done = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        assert self._held.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._release is not None and self._done is not None
        self._loop.call_soon_threadsafe(self._release.set)
        self._done.result(30)


class LimitedRuntime:
    """A runtime over the tiny model with small turn limits and short connection timeouts."""

    def __init__(self, runtime: Runtime, orchestrator: AiOrchestrator, admission: TurnAdmission) -> None:
        self.runtime = runtime
        self.orchestrator = orchestrator
        self.admission = admission

    def held(self) -> HeldModel:
        return HeldModel(self.runtime, self.orchestrator)

    def wait_in_flight(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while self.admission.in_flight != count:
            assert time.monotonic() < deadline, f"{self.admission.in_flight} turns in flight, expected {count}"
            time.sleep(0.02)


@pytest.fixture(scope="module")
def limited(tiny_llama_server: LlamaServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitedRuntime]:
    data_dir = tmp_path_factory.mktemp("limited") / "data"
    admission = TurnAdmission(max_turns=3, max_per_key=1)
    model = RuntimeModel(tiny_llama_server.base_url, tiny_llama_server.config.alias, tiny_llama_server)
    runtime = start_runtime(data_dir, model=model, admission=admission, tool_mode=ToolCallMode.NATIVE,
                            limits=TransportLimits(request_timeout_s=SHORT_S, idle_timeout_s=SHORT_S))
    yield LimitedRuntime(runtime, runtime.orchestrator, admission)
    runtime.handle.stop(1.0)


def in_thread(call: Callable[[], Any]) -> Future[Any]:
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def turn(limited: LimitedRuntime, transport: str, player: str, *, stream: bool = False) -> Callable[[], Any]:
    """A short PlainChat turn of one player's conversation, over one transport."""

    def call() -> Any:
        with limited.runtime.client(transport) as client:
            kwargs: dict[str, Any] = dict(role_id="PlainChat", scope=AgentMemoryScope(user_id=player),
                                          max_output_tokens=4, forced_tool_mode="none", timeout_ms=120_000)
            if stream:
                return list(client.stream_task("hello", **kwargs))[-1].final
            return client.run_task("hello", **kwargs)

    return call


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_turns_beyond_the_limits_are_resource_exhausted_and_the_admitted_ones_finish(
        limited: LimitedRuntime, transport: str) -> None:
    with limited.held():
        first = in_thread(turn(limited, transport, "ann"))
        limited.wait_in_flight(1)
        # One conversation cannot take every place ...
        with pytest.raises(RuntimeCallError) as same:
            turn(limited, transport, "ann")()
        assert same.value.code is StatusCode.RESOURCE_EXHAUSTED and "conversation" in str(same.value)
        # ... so other players still get in, up to the overall limit.
        others = [in_thread(turn(limited, transport, name, stream=True)) for name in ("bob", "cyd")]
        limited.wait_in_flight(3)
        with pytest.raises(RuntimeCallError) as full:
            turn(limited, transport, "dan", stream=True)()
        assert full.value.code is StatusCode.RESOURCE_EXHAUSTED and "retry" in str(full.value)
    # Released: every admitted turn ends normally, and the places are free again.
    assert first.result(120).status == pb.TURN_STATUS_OK
    assert [f.result(120).status for f in others] == [pb.TURN_STATUS_OK] * 2
    limited.wait_in_flight(0)
    assert turn(limited, transport, "dan")().status == pb.TURN_STATUS_OK


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_turn_waiting_for_the_model_outlives_the_connection_timeouts(limited: LimitedRuntime,
                                                                      transport: str) -> None:
    with limited.held():
        waiting = in_thread(turn(limited, transport, f"patient-{transport}", stream=True))
        limited.wait_in_flight(1)
        time.sleep(SHORT_S * 4)  # the request is complete and its answer pending: neither idle nor half-sent
        assert not waiting.done()
    assert waiting.result(120).status == pb.TURN_STATUS_OK


def test_refused_and_finished_turns_are_counted_in_the_metrics(limited: LimitedRuntime) -> None:
    with limited.held():
        admitted = in_thread(turn(limited, "connect", "eve"))
        limited.wait_in_flight(1)
        assert "coreai_turns_in_flight 1.0" in limited.runtime.services.metrics.render().decode()
        with pytest.raises(RuntimeCallError):
            turn(limited, "grpc", "eve")()
    assert admitted.result(120).status == pb.TURN_STATUS_OK
    limited.wait_in_flight(0)
    text = limited.runtime.services.metrics.render().decode()
    assert 'coreai_turns_total{status="ok"}' in text
    assert 'coreai_turns_total{status="resource_exhausted"}' in text
    assert "coreai_turns_in_flight 0.0" in text
