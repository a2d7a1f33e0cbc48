"""Model faults, for real (issue 9): a model server killed, hung (SIGSTOP) or producing no text mid-turn,
a cancelled turn, output caps in both tool-call modes, the turn timeout and the queue, the guarded port.

Real llama.cpp children hosting tiny GGUFs on loopback; every wait is bounded (a hang fails the test,
never a duration). The watchdog runs with short intervals here; its defaults are in supervisor.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from pyruntime.model.errors import ModelStalledError, ModelUnavailableError
from pyruntime.model.hosting import LlamaServerProcess, generate_model_key
from pyruntime.model.supervisor import ModelState, ModelSupervisor, WatchdogSettings, stuck_generation
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig
from pyruntime.service.status import StatusCode, status_for
from pyruntime.turns import build_orchestrator
from pyruntime.turns.events import FinalEvent, TextDeltaEvent, TurnStatus
from pyruntime.turns.orchestrator import ROUND_SEPARATOR, AiOrchestrator
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.tools import ToolOutput, ToolRegistry
from tests.support.fixtures import start_llama_server
from tests.support.tiny_model import write_tiny_model

pytestmark = pytest.mark.timeout(180)

FAST_WATCHDOG = WatchdogSettings(interval_s=0.2, probe_timeout_s=1.0, failed_probes=2, max_restarts=3)
STUCK_CONTEXT = 32768
LONG_REPLY = 30000  # tokens: minutes of decoding for the stuck model if nobody stops it
WAIT_S = 60.0  # bound of every wait for something that takes milliseconds to seconds


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll `condition` until it holds; fail naming `what` if it never does (a hang guard, not a timing)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


async def wait_until_async(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """`wait_until` without blocking the event loop (the turn under test runs on it)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(scope="module")
def stuck_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that only emits the UTF-8 lead byte 0xF0: its streams carry no text at all."""
    return write_tiny_model(tmp_path_factory.mktemp("stuck") / "stuck.gguf", stuck_utf8=True,
                            context_length=STUCK_CONTEXT)


@pytest.fixture
def stuck_server(stuck_model_path: Path) -> Iterator[LlamaServerProcess]:
    server = start_llama_server(stuck_model_path, n_ctx=STUCK_CONTEXT, api_key=generate_model_key())
    yield server
    server.stop()


@pytest.fixture
def supervised(tiny_endless_model_path: Path) -> Iterator[ModelSupervisor]:
    """The endless tiny model (streams run to max_tokens) under a fast watchdog; tests may kill it."""
    server = start_llama_server(tiny_endless_model_path, api_key=generate_model_key())
    supervisor = ModelSupervisor(server, FAST_WATCHDOG)
    supervisor.watch()
    yield supervisor
    supervisor.close()


def plain_orchestrator(server: LlamaServerProcess, supervisor: ModelSupervisor | None = None,
                       **settings: object) -> AiOrchestrator:
    """Session-only stores, the server's key passed by the factory, the watchdog as the client's gate."""
    orchestrator = build_orchestrator(server=server, **settings)  # type: ignore[arg-type]
    if supervisor is not None:
        orchestrator.client.gate = supervisor.check_available
    return orchestrator


def plain_turn(hint: str = "hello", **fields: object) -> AiTaskRequest:
    """A PlainChat turn (no tools): the reply streams as free text."""
    return AiTaskRequest(hint=hint, role_id="PlainChat", **fields)  # type: ignore[arg-type]


async def first_text_then(orchestrator: AiOrchestrator, request: AiTaskRequest,
                          fault: Callable[[], None]) -> FinalEvent:
    """Stream a turn, inject `fault` once its first text arrived, return its final event."""
    injected = False
    async for event in orchestrator.stream_task(request):
        if isinstance(event, TextDeltaEvent) and not injected:
            injected = True
            fault()
        if isinstance(event, FinalEvent):
            assert injected, "the turn ended before any text arrived"
            return event
    raise AssertionError("no final event")


# -- a cancelled or silent generation is stopped upstream ----------------------------------------------


def test_a_cancelled_turn_stops_the_generation_in_the_model_server(stuck_server: LlamaServerProcess) -> None:
    async def scenario() -> None:
        orchestrator = plain_orchestrator(stuck_server)
        orchestrator.client.first_text_s = None  # only the cancel may stop it here
        task = asyncio.create_task(orchestrator.run_task(plain_turn(max_output_tokens=LONG_REPLY)))
        await wait_until_async(lambda: stuck_server.status().get("tokens", 0) > 20, "the generation started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await orchestrator.client.aclose()

    asyncio.run(scenario())
    # llama-cpp-python alone would decode on (it sends nothing while it holds back incomplete UTF-8,
    # so it never notices the client left): here the child stops at its next token.
    wait_until(lambda: not stuck_server.status()["generating"], "the generation stopped")
    status = stuck_server.status()
    assert status["last_stopped_early"] and status["stopped_on_cancel"] == 1
    assert status["last_tokens"] < LONG_REPLY
    # The single model slot is free again: a request that needs the model lock is answered.
    models = httpx.get(f"{stuck_server.base_url}/models", headers=stuck_server.auth_headers, timeout=WAIT_S)
    assert models.status_code == 200


def test_a_generation_without_visible_text_is_stopped_and_reported(stuck_server: LlamaServerProcess) -> None:
    async def scenario() -> tuple[object, object]:
        orchestrator = plain_orchestrator(stuck_server)
        orchestrator.client.first_text_s = 1.0
        result = await orchestrator.run_task(plain_turn(max_output_tokens=LONG_REPLY, timeout=WAIT_S))
        await orchestrator.client.aclose()
        return result.status, result.error

    status, error = asyncio.run(scenario())
    assert status is TurnStatus.FAILED  # not TIMED_OUT after a minute: the silent stream was stopped
    assert "no text for 1 s" in str(error)
    wait_until(lambda: not stuck_server.status()["generating"], "the generation stopped")
    assert stuck_server.status()["last_stopped_early"]


def test_the_client_reports_a_stall_and_a_deadline_as_errors(stuck_server: LlamaServerProcess) -> None:
    async def scenario() -> tuple[BaseException, BaseException]:
        orchestrator = plain_orchestrator(stuck_server)
        client = orchestrator.client
        messages = [{"role": "user", "content": "hi"}]
        client.first_text_s = 0.5
        with pytest.raises(ModelStalledError) as stalled:
            async with client.stream_chat(messages, max_tokens=LONG_REPLY) as stream:
                async for _ in stream:
                    pass
        wait_until(lambda: not stuck_server.status()["generating"], "the stalled generation stopped")
        client.first_text_s, client.deadline_s = None, 0.5
        with pytest.raises(ModelUnavailableError) as late:
            await client.chat(messages, max_tokens=LONG_REPLY)  # non-streamed: the deadline still holds
        await client.aclose()
        return stalled.value, late.value

    stalled, late = asyncio.run(scenario())
    assert "no text for 0.5 s" in str(stalled) and "within 0.5 s" in str(late)
    # A non-streamed request is stopped too once its client gives up (its disconnect is watched).
    wait_until(lambda: stuck_server.status()["stopped_on_cancel"] == 2, "the non-streamed generation stopped")


def test_max_tokens_holds_while_the_server_holds_back_incomplete_utf8(stuck_server: LlamaServerProcess) -> None:
    async def scenario() -> tuple[str | None, str]:
        orchestrator = plain_orchestrator(stuck_server)
        orchestrator.client.first_text_s = None
        messages = [{"role": "user", "content": "hi"}]
        finish = None
        async with orchestrator.client.stream_chat(messages, max_tokens=40) as stream:
            async for delta in stream:
                finish = getattr(delta, "finish_reason", finish)
        completion = await orchestrator.client.chat(messages, max_tokens=1)
        await orchestrator.client.aclose()
        return finish, str(completion.finish_reason)

    # llama-cpp-python checks max_tokens only after it emitted text: alone, `max_tokens: 1` decoded thousands.
    streamed, plain = asyncio.run(scenario())
    assert (streamed, plain) == ("length", "length")
    status = stuck_server.status()
    assert status["last_tokens"] == 1 and status["last_capped"] and status["finished"] == 2


# -- the watchdog: killed, hung, restarting ---------------------------------------------------------


def test_a_model_server_killed_mid_turn_fails_the_turn_and_is_restarted(supervised: ModelSupervisor) -> None:
    server = supervised.server
    killed = server.pid
    assert killed is not None

    async def scenario() -> tuple[FinalEvent, TurnStatus]:
        orchestrator = plain_orchestrator(server, supervised)
        final = await first_text_then(orchestrator, plain_turn(max_output_tokens=1500),
                                      lambda: os.kill(killed, signal.SIGKILL))
        await wait_until_async(lambda: supervised.restarts == 1 and supervised.ready(), "the server was restarted")
        after = await orchestrator.run_task(plain_turn(max_output_tokens=8))
        await orchestrator.client.aclose()
        return final, after.status

    final, after = asyncio.run(scenario())
    assert final.result.status is TurnStatus.FAILED and "model server" in final.result.error
    assert supervised.last_restart_reason == "the model server exited"
    assert server.pid != killed and after is TurnStatus.OK


def test_a_hung_model_server_is_restarted_and_its_turn_fails_instead_of_hanging(
        supervised: ModelSupervisor) -> None:
    server = supervised.server
    stopped = server.pid
    assert stopped is not None

    async def scenario() -> tuple[FinalEvent, TurnStatus]:
        orchestrator = plain_orchestrator(server, supervised)
        # Turn timeout of a minute: the old runtime waited it out (TIMED_OUT); now the restart ends it.
        final = await first_text_then(orchestrator, plain_turn(max_output_tokens=1500, timeout=WAIT_S),
                                      lambda: os.kill(stopped, signal.SIGSTOP))
        await wait_until_async(supervised.ready, "the server is back")
        after = await orchestrator.run_task(plain_turn(max_output_tokens=8))
        await orchestrator.client.aclose()
        return final, after.status

    try:
        final, after = asyncio.run(scenario())
    finally:
        if server.pid == stopped:  # not restarted (the test failed): let the fixture stop it
            os.kill(stopped, signal.SIGCONT)
    assert final.result.status is TurnStatus.FAILED, final.result.error
    assert "model server" in final.result.error
    assert supervised.restarts == 1 and "did not answer" in supervised.last_restart_reason
    assert server.pid != stopped and after is TurnStatus.OK


def test_turns_fail_fast_with_a_retry_hint_while_the_model_restarts_and_after_it_gave_up(
        tiny_model_path: Path, tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(tiny_model_path.read_bytes())
    server = start_llama_server(model, api_key=generate_model_key())
    supervisor = ModelSupervisor(server, WatchdogSettings(interval_s=0.5, probe_timeout_s=1.0, failed_probes=2,
                                                          max_restarts=4))
    supervisor.watch()
    seen: list[ModelUnavailableError] = []

    async def scenario() -> None:
        orchestrator = plain_orchestrator(server, supervisor)
        model.write_bytes(b"not a model")  # every restart now fails: the watchdog retries, then gives up
        server.kill()
        await wait_until_async(lambda: supervisor.state is ModelState.RESTARTING, "a restart began")
        for _ in range(2):
            with pytest.raises(ModelUnavailableError) as failed:
                await orchestrator.run_task(plain_turn())
            seen.append(failed.value)
            await wait_until_async(lambda: supervisor.state is ModelState.FAILED, "the watchdog gave up")
        await orchestrator.client.aclose()

    try:
        asyncio.run(scenario())
    finally:
        supervisor.close()
    restarting, failed = seen
    if "restarting" in str(restarting):  # (the state may already have moved on to failed)
        assert "retry in about" in str(restarting) and restarting.retry_after_s is not None
    assert "restart the runtime" in str(failed) and failed.retry_after_s is None
    # Over RPC both are UNAVAILABLE (what the client retries), not INTERNAL.
    assert status_for(failed).code is StatusCode.UNAVAILABLE
    assert supervisor.restarts == 0


def test_a_slow_but_progressing_generation_is_not_restarted(supervised: ModelSupervisor) -> None:
    async def scenario() -> TurnStatus:
        orchestrator = plain_orchestrator(supervised.server, supervised)
        result = await orchestrator.run_task(plain_turn(max_output_tokens=1500))
        await orchestrator.client.aclose()
        return result.status

    assert asyncio.run(scenario()) is TurnStatus.OK  # many probes answered while it decoded
    assert supervised.restarts == 0 and supervised.ready()


def test_stuck_generation_rules() -> None:
    settings = WatchdogSettings(cancel_grace_s=30, stall_s=300)
    assert stuck_generation({"generating": False, "cancelled_s": 999}, settings) is None
    assert stuck_generation({"generating": True, "cancelled_s": 10, "since_progress_s": 1}, settings) is None
    assert "cancelled" in str(stuck_generation({"generating": True, "cancelled_s": 31}, settings))
    assert "no progress" in str(stuck_generation({"generating": True, "since_progress_s": 301}, settings))


# -- the turn timeout and the queue ---------------------------------------------------------------


@pytest.mark.parametrize("includes_queue", [False, True])
def test_the_turn_timeout_counts_queue_waiting_only_when_asked(tiny_llama_server: LlamaServerProcess,
                                                               includes_queue: bool) -> None:
    timeout = 3.0

    async def scenario() -> tuple[TurnStatus, int]:
        orchestrator = plain_orchestrator(tiny_llama_server)
        orchestrator.timeout_includes_queue = includes_queue  # AiOrchestrator(timeout_includes_queue=...)
        holding = asyncio.Event()
        release = asyncio.Event()

        async def hold_the_model() -> None:
            async with orchestrator.queue.slot():
                holding.set()
                await release.wait()

        holder = asyncio.create_task(hold_the_model())
        await holding.wait()
        turn = asyncio.create_task(orchestrator.run_task(plain_turn(max_output_tokens=4, timeout=timeout)))
        # Longer than the turn's timeout: released only once a timeout that counted the wait has fired.
        await asyncio.wait({turn}, timeout=timeout + 1.0)
        release.set()
        result = await turn
        await holder
        await orchestrator.client.aclose()
        return result.status, result.usage.model_calls

    status, model_calls = asyncio.run(scenario())
    if includes_queue:
        assert status is TurnStatus.TIMED_OUT and model_calls == 0
    else:
        assert status is TurnStatus.OK and model_calls == 1


# -- output caps -------------------------------------------------------------------------------------


class _Ping(BaseModel):
    n: int


def _pinger() -> tuple[ToolRegistry, AgentMemoryPolicy]:
    tools = ToolRegistry()
    tools.register("Pinger", "ping", "Ping the server.", _Ping, lambda args: ToolOutput(True, "pong"))
    policy = AgentMemoryPolicy()
    policy.set(RoleMemoryConfig("Pinger", use_memory_tool=False, with_chat_history=False))
    return tools, policy


@pytest.mark.parametrize("mode", ["structured", "native"])
def test_a_small_output_cap_bounds_the_reply_but_never_cuts_the_tool_call(tiny_llama_server: LlamaServerProcess,
                                                                         mode: str) -> None:
    cap = 4
    tools, policy = _pinger()

    async def scenario() -> list[tuple[TurnStatus, list[bool], list[str]]]:
        orchestrator = plain_orchestrator(tiny_llama_server, tool_mode=mode, tools=tools, policy=policy)
        results = []
        for seed in range(5):
            pieces: list[str] = []
            final = None
            request = AiTaskRequest(hint=f"ping {seed}", role_id="Pinger", max_output_tokens=cap,
                                    forced_tool_mode="ping", temperature=0.8, extra={"seed": seed})
            async for event in orchestrator.stream_task(request):
                if isinstance(event, TextDeltaEvent):
                    pieces.append(event.text)
                elif isinstance(event, FinalEvent):
                    final = event.result
            assert final is not None
            results.append((final.status, [r.success for r in final.tool_results], pieces, final.usage))
        await orchestrator.client.aclose()
        return results

    for status, successes, pieces, usage in asyncio.run(scenario()):
        # Every round was closed at the cap, before the stream's final usage chunk: the counts still arrive
        # (the prompt's come before the first token, the completion is the pieces streamed).
        assert 0 < usage.cached_prompt_tokens < usage.prompt_tokens
        assert usage.completion_tokens >= len(pieces)
        # With the cap sent as max_tokens, the call's JSON was cut: 3 failing rounds, TOOL_LOOP_ENDED.
        assert status is TurnStatus.OK
        assert successes and successes[0], "the forced call arrived whole and ran"
        per_round = [0]
        for piece in pieces:
            if piece == ROUND_SEPARATOR:
                per_round.append(0)
            else:
                per_round[-1] += 1
        assert max(per_round) <= cap, per_round


def test_every_role_has_an_output_cap_and_max_output_tokens_overrides_it() -> None:
    policy = AgentMemoryPolicy()
    for role in ("PlainChat", "SmartChat", "Creator"):
        assert policy.get(role).effective_max_output_tokens == 512
    assert RoleMemoryConfig("R", max_output_tokens=64).effective_max_output_tokens == 64


def test_a_plain_reply_stops_at_the_default_cap(tiny_endless_model_path: Path) -> None:
    server = start_llama_server(tiny_endless_model_path)
    try:
        async def scenario() -> TurnStatus:
            orchestrator = plain_orchestrator(server)
            result = await orchestrator.run_task(plain_turn())  # no max_output_tokens: the role's default
            await orchestrator.client.aclose()
            return result.status

        assert asyncio.run(scenario()) is TurnStatus.OK
        # Tokens the server decoded (streams carry no usage): the endless model would fill the context.
        assert server.status()["last_tokens"] == 512
    finally:
        server.stop()


# -- the model port is guarded like the RPC ports -------------------------------------------------


def test_the_model_port_refuses_requests_without_the_key_or_from_web_pages(stuck_server: LlamaServerProcess
                                                                          ) -> None:
    base = stuck_server.base_url
    port = stuck_server.config.port
    key = stuck_server.auth_headers
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    assert httpx.get(f"{base}/models").status_code == 401
    assert httpx.get(f"{base}/models", headers={"Authorization": "Bearer wrong-key-wrong-key"}).status_code == 401
    assert httpx.post(f"{base}/chat/completions", json=body).status_code == 401
    assert httpx.get(f"{base}/models", headers=key).status_code == 200
    # DNS rebinding (foreign Host) and cross-site requests (foreign Origin) are refused even with the key.
    for headers in ({"Host": f"evil.example:{port}"}, {"Origin": "http://evil.example"}, {"Host": "["},
                    {"Origin": "http://["}):
        assert httpx.get(f"{base}/models", headers={**key, **headers}).status_code == 403, headers
    assert httpx.get(f"{base}/models", headers={**key, "Origin": f"http://127.0.0.1:{port}"}).status_code == 200
    # No permissive CORS: a preflight gets no Access-Control-Allow-Origin, from anyone.
    preflight = httpx.options(f"{base}/chat/completions", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization"})
    assert "access-control-allow-origin" not in preflight.headers
    answered = httpx.post(f"{base}/chat/completions", json=body, headers={**key, "Origin": f"http://localhost:{port}"})
    assert "access-control-allow-origin" not in answered.headers
    # The status probe is behind the key too.
    assert httpx.get(base.removesuffix("/v1") + "/coreai/status").status_code == 401
