"""Turns beyond what can run wait for a place; a full queue, a full conversation or a deadline that passes while
waiting is RESOURCE_EXHAUSTED with a retry hint, on both transports, and the admitted turns finish; a turn that waits
for the model longer than the connection timeouts is never cut by them.

The model is made busy the way a long generation makes it busy: the test holds the runtime's real model
queue slot, so admitted turns wait behind it. A model double answers the turns (admission never looks at the model).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.app import RuntimeModel
from pyruntime.client import RuntimeCallError
from pyruntime.net.limits import TransportLimits
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service import StatusCode, TurnAdmission
from pyruntime.testing import ScriptedModel
from pyruntime.turns import AiOrchestrator, ToolCallMode
from tests.rpc.conftest import TRANSPORTS, Runtime, start_runtime

SHORT_S = 1.5  # connection timeouts far below how long the held turns wait (and above a loaded machine's pauses)


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

    def __enter__(self) -> HeldModel:
        self._done = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        assert self._held.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._release is not None and self._done is not None
        self._loop.call_soon_threadsafe(self._release.set)
        self._done.result(30)


class LimitedRuntime:
    """A runtime over a model double with small turn limits and short connection timeouts."""

    def __init__(self, runtime: Runtime, orchestrator: AiOrchestrator, admission: TurnAdmission) -> None:
        self.runtime = runtime
        self.orchestrator = orchestrator
        self.admission = admission

    def held(self) -> HeldModel:
        return HeldModel(self.runtime, self.orchestrator)

    def wait_in_flight(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while (now := self.admission.snapshot().in_flight) != count:
            assert time.monotonic() < deadline, f"{now} turns in flight, expected {count}"
            time.sleep(0.02)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitedRuntime]:
    data_dir = tmp_path_factory.mktemp("limited") / "data"
    admission = TurnAdmission(max_running=2, max_queued=2, max_per_conversation=2)
    model = RuntimeModel(None, "npc-double", client=ScriptedModel(["Hello."]))
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


def turn(limited: LimitedRuntime, transport: str, player: str, *, stream: bool = False,
         timeout_ms: int = 120_000) -> Callable[[], Any]:
    """A short PlainChat turn of one player's conversation, over one transport."""

    def call() -> Any:
        with limited.runtime.client(transport) as client:
            kwargs: dict[str, Any] = dict(role_id="PlainChat", scope=AgentMemoryScope(user_id=player),
                                          max_output_tokens=4, forced_tool_mode="none", timeout_ms=timeout_ms)
            if stream:
                return list(client.stream_task("hello", **kwargs))[-1].final
            return client.run_task("hello", **kwargs)

    return call


def refused(call: Callable[[], Any]) -> RuntimeCallError:
    with pytest.raises(RuntimeCallError) as error:
        call()
    assert error.value.code is StatusCode.RESOURCE_EXHAUSTED
    assert error.value.retry_after is not None and error.value.retry_after > 0  # the RetryInfo detail arrived
    return error.value


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_turns_beyond_the_places_wait_and_a_full_queue_is_refused_with_a_retry_hint(
        limited: LimitedRuntime, transport: str) -> None:
    with limited.held():
        running = [in_thread(turn(limited, transport, name, stream=name == "bob")) for name in ("ann", "bob")]
        limited.wait_in_flight(2)
        waiting = [in_thread(turn(limited, transport, name, stream=True)) for name in ("cyd", "dan")]  # no place
        limited.wait_in_flight(4)
        assert limited.admission.snapshot().queued == 2
        full = refused(turn(limited, transport, "eli", stream=True))
        assert "full" in str(full)
    # Released: every admitted turn ends normally, those that waited included, and the places are free again.
    assert [f.result(120).status for f in running + waiting] == [pb.TURN_STATUS_OK] * 4
    limited.wait_in_flight(0)
    assert turn(limited, transport, "dan")().status == pb.TURN_STATUS_OK


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_conversation_over_its_limit_and_a_deadline_passed_while_waiting_are_refused_with_a_retry_hint(
        limited: LimitedRuntime, transport: str) -> None:
    with limited.held():
        first = in_thread(turn(limited, transport, "eve"))
        limited.wait_in_flight(1)
        second = in_thread(turn(limited, transport, "eve", stream=True))  # waits for eve's first line to end
        limited.wait_in_flight(2)
        assert "this conversation" in str(refused(turn(limited, transport, "eve")))
        limited_turn = in_thread(turn(limited, transport, "fay"))  # the second place
        limited.wait_in_flight(3)
        late = refused(turn(limited, transport, "gus", timeout_ms=300, stream=True))  # waited its 0.3 s
        assert "deadline" in str(late)
    assert [f.result(120).status for f in (first, second, limited_turn)] == [pb.TURN_STATUS_OK] * 3
    limited.wait_in_flight(0)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_turn_waiting_for_the_model_outlives_the_connection_timeouts(limited: LimitedRuntime,
                                                                      transport: str) -> None:
    with limited.held():
        waiting = in_thread(turn(limited, transport, f"patient-{transport}", stream=True))
        limited.wait_in_flight(1)
        time.sleep(SHORT_S * 3)  # the request is complete and its answer pending: neither idle nor half-sent
        assert not waiting.done()
    assert waiting.result(120).status == pb.TURN_STATUS_OK


def test_the_queue_and_its_limits_are_in_health_and_the_metrics(limited: LimitedRuntime) -> None:
    with limited.held():
        admitted = [in_thread(turn(limited, "connect", name)) for name in ("hal", "ida", "jon", "kay")]
        limited.wait_in_flight(4)
        text = limited.runtime.services.metrics.render().decode()
        assert "coreai_turns_in_flight 4.0" in text
        assert "coreai_turns_running 2.0" in text and "coreai_turns_queued 2.0" in text
        assert 'coreai_turn_limit{limit="queued"} 2.0' in text
        with limited.runtime.client("grpc") as client:
            health = client.health()
        assert (health.turns_running, health.turns_queued) == (2, 2)
        assert (health.max_turns_running, health.max_turns_queued, health.max_turns_per_conversation) == (2, 2, 2)
        assert health.model_concurrency == limited.orchestrator.queue.capacity
        refused(turn(limited, "grpc", "lee"))
    assert [f.result(120).status for f in admitted] == [pb.TURN_STATUS_OK] * 4
    limited.wait_in_flight(0)
    text = limited.runtime.services.metrics.render().decode()
    assert 'coreai_turns_total{status="ok"}' in text
    assert 'coreai_turns_total{status="resource_exhausted"}' in text
    assert "coreai_turns_in_flight 0.0" in text
    waited_sum = re.search(r"^coreai_turn_queue_wait_seconds_sum (\S+)$", text, re.M)
    assert waited_sum is not None
    waited = float(waited_sum.group(1))
    assert waited > 0  # jon and kay waited for a place
