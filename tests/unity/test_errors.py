"""Every failure a game can meet arrives as its own CoreAIRuntimeException (or OperationCanceledException)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.support.internals import internal, member
from tests.unity.conftest import TOKEN, wait
from tests.unity_layer.processes import wait_for


def test_wrong_token_is_unauthenticated(runtime: Any) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.Runtime import ConnectCode, UnauthenticatedException

    client = runtime.client(token="not-the-token-0123456789")
    try:
        store = client.CreateMemoryStore()
        with pytest.raises(UnauthenticatedException) as info:
            store.ExecuteMemoryTool("Teacher", MemoryToolCall.Write("x"))
        assert info.value.Code == ConnectCode.Unauthenticated and info.value.CodeName == "unauthenticated"
        with pytest.raises(UnauthenticatedException):
            store.GetChatHistory("Teacher", 0)
        assert wait(client.HealthAsync()).Ready  # Health needs no token
    finally:
        client.Dispose()
    assert not (runtime.memory_dir / "Teacher.json").exists()


def test_missing_token_is_unauthenticated_for_streams_too(runtime: Any) -> None:
    from CoreAI.Ai import AiTaskRequest
    from CoreAI.Runtime import UnauthenticatedException
    from CoreAI.Tests import StreamRecording
    from System.Threading import CancellationToken

    client = runtime.client(token=None)
    try:
        request = AiTaskRequest()
        request.RoleId, request.Hint = "AINpc", "hello"
        with pytest.raises(UnauthenticatedException):
            wait(StreamRecording.RecordAsync(client.CreateOrchestrator(), request, CancellationToken(False)))
    finally:
        client.Dispose()


@pytest.mark.parametrize("role", ["", "   "])
def test_blank_role_is_invalid_argument_and_writes_nothing(client: Any, runtime: Any, role: str) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.Runtime import InvalidArgumentException

    store = client.CreateMemoryStore()
    with pytest.raises(InvalidArgumentException, match="role_id"):
        store.ExecuteMemoryTool(role, MemoryToolCall.Write("x"))
    with pytest.raises(InvalidArgumentException, match="role_id"):
        store.AppendChatMessage(role, "user", "x")
    assert not runtime.memory_dir.exists() or not any(runtime.memory_dir.iterdir())


def test_unknown_action_is_invalid_argument(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.Runtime import InvalidArgumentException

    call = MemoryToolCall()
    call.Action = "explode"
    with pytest.raises(InvalidArgumentException, match="Unknown action"):
        client.CreateMemoryStore().ExecuteMemoryTool("Teacher", call)


def test_unknown_version_is_not_found(client: Any) -> None:
    from CoreAI.Ai import AgentMemoryStoreExtensions, MemoryToolCall
    from CoreAI.Runtime import NotFoundException

    store = client.CreateMemoryStore()
    store.ExecuteMemoryTool("Teacher", MemoryToolCall.Write("v1"))
    with pytest.raises(NotFoundException):
        AgentMemoryStoreExtensions.RevertVersion(store, "Teacher", 99)
    with pytest.raises(NotFoundException):
        store.RevertVersion("NobodyEverWrote", 1)
    assert store.TryLoad("Teacher", None)[1].Memory == "v1"


def test_unreadable_document_is_failed_precondition_and_never_overwritten(client: Any, runtime: Any) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.Runtime import FailedPreconditionException

    runtime.memory_dir.mkdir(parents=True, exist_ok=True)
    broken = runtime.memory_dir / "Teacher.json"
    broken.write_bytes(b"{ this is not json")
    store = client.CreateMemoryStore()
    with pytest.raises(FailedPreconditionException):
        store.TryLoad("Teacher", None)
    with pytest.raises(FailedPreconditionException):
        store.ExecuteMemoryTool("Teacher", MemoryToolCall.Append("x"))
    with pytest.raises(FailedPreconditionException):
        store.ExecuteMemoryTool("Teacher", MemoryToolCall.Read())
    assert broken.read_bytes() == b"{ this is not json"
    store.Clear("Teacher")  # the documented way back to a working memory
    assert store.ExecuteMemoryTool("Teacher", MemoryToolCall.Write("fresh")).Success


def test_memory_limit_is_resource_exhausted(client: Any) -> None:
    from CoreAI.Ai import AgentBuilder, MemoryToolCall
    from CoreAI.Runtime import ResourceExhaustedException

    AgentBuilder("Scribe", client.Policy).WithMaxMemoryChars(10).Build()  # pushed before the tool call
    store = client.CreateMemoryStore()
    with pytest.raises(ResourceExhaustedException, match="10"):
        store.ExecuteMemoryTool("Scribe", MemoryToolCall.Write("far more than ten characters"))
    assert store.TryLoad("Scribe", None)[0] is False


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_runtime_down_is_unavailable(assemblies: Any) -> None:
    from CoreAI.Ai import AiTaskRequest, MemoryToolCall
    from CoreAI.Runtime import CoreAIRuntimeClient, UnavailableException

    client = CoreAIRuntimeClient(f"http://127.0.0.1:{_dead_port()}", TOKEN, None)
    try:
        with pytest.raises(UnavailableException, match="cannot be reached"):
            client.CreateMemoryStore().ExecuteMemoryTool("Teacher", MemoryToolCall.Read())
        request = AiTaskRequest()
        request.Hint = "hi"
        with pytest.raises(UnavailableException):
            wait(client.CreateOrchestrator().RunTaskWithResultAsync(request))
        with pytest.raises(UnavailableException):
            wait(client.HealthAsync())
    finally:
        client.Dispose()


def test_stopped_runtime_is_unavailable_and_resets_the_policy_sync(runtime_factory: Any, tmp_path: Any) -> None:
    from CoreAI.Ai import AgentBuilder, AgentMemoryPolicy, MemoryToolAction
    from CoreAI.Runtime import UnavailableException

    first = runtime_factory(tmp_path / "d")
    policy = AgentMemoryPolicy()
    AgentBuilder("Smith", policy).WithMemory(MemoryToolAction.Rename).Build()
    client = first.client(policy=policy)
    wait(client.SyncPolicyAsync())
    first.stop()
    with pytest.raises(UnavailableException):
        client.CreateMemoryStore().GetChatHistory("Smith", 0)
    client.Dispose()
    # A restarted runtime forgot the role; the client pushes it again on the next sync.
    second = runtime_factory(tmp_path / "d")
    again = second.client(policy=policy)
    try:
        assert str(wait(again.GetRoleConfigAsync("Smith")).DefaultAction) == "Append"
        wait(again.SyncPolicyAsync())
        assert str(wait(again.GetRoleConfigAsync("Smith")).DefaultAction) == "Rename"
    finally:
        again.Dispose()


def test_client_timeout_is_deadline_exceeded_and_cancellation_is_operation_canceled(runtime: Any) -> None:
    from CoreAI.Ai import AgentMemoryScope, AiTaskRequest
    from CoreAI.Runtime import ConnectClientOptions, CoreAIRuntimeClient, DeadlineExceededException
    from CoreAI.V1 import HealthRequest
    from System import OperationCanceledException, TimeSpan
    from System.Threading import CancellationToken, CancellationTokenSource

    CallOptions, ProtoMapping = internal("CoreAI.Runtime.CallOptions"), internal("CoreAI.Ai.ProtoMapping")

    options = ConnectClientOptions()
    options.BaseUrl, options.Token = runtime.url, TOKEN
    client = CoreAIRuntimeClient(options, None)
    try:
        request = AiTaskRequest()
        request.RoleId, request.Hint = "AINpc", "tell me a long story"
        proto = ProtoMapping.ToProto(request, AgentMemoryScope.Empty)
        with pytest.raises(DeadlineExceededException):
            one_ms = CallOptions.WithTimeout(TimeSpan.FromMilliseconds(1))
            wait(member(client, "Orchestrator").RunTaskAsync(proto, one_ms, CancellationToken(False)))
        # A turn's own Timeout is the runtime's to enforce: the turn ends and says so. Once the abandoned turn has
        # left the runtime: a conversation runs one turn at a time, and a 1 ms turn cannot wait for its place.
        admission = runtime.services.orchestrator.admission
        wait_for(lambda: admission.snapshot().in_flight == 0, 30, "the abandoned turn to end")
        request.Timeout = TimeSpan.FromMilliseconds(1)
        result = wait(client.CreateOrchestrator().RunTaskWithResultAsync(request))
        assert str(result.Status) == "TimedOut" and not result.Succeeded
        cts = CancellationTokenSource()
        cts.Cancel()
        with pytest.raises(OperationCanceledException):
            five_s = CallOptions.WithTimeout(TimeSpan.FromSeconds(5))
            wait(member(client, "Orchestrator").HealthAsync(HealthRequest(), five_s, cts.Token))
    finally:
        client.Dispose()


def test_a_turn_the_runtime_cannot_take_now_is_resource_exhausted_with_the_retry_hint(runtime: Any,
                                                                                     client: Any) -> None:
    import asyncio
    import threading

    from CoreAI.Ai import AiTaskRequest
    from CoreAI.Runtime import ResourceExhaustedException
    from CoreAI.Tests import StreamRecording
    from System.Threading import CancellationToken

    admission = runtime.services.orchestrator.admission
    admission.max_running, admission.fixed_running, admission.max_queued = 1, True, 0
    held, release = threading.Event(), threading.Event()

    async def hold_the_one_place() -> None:
        async with admission.admit("someone else"):
            held.set()
            await asyncio.to_thread(release.wait, 30)

    holder = asyncio.run_coroutine_threadsafe(hold_the_one_place(), runtime.handle.loop)
    assert held.wait(30)
    try:
        request = AiTaskRequest()
        request.RoleId, request.Hint = "AINpc", "hello"
        with pytest.raises(ResourceExhaustedException) as unary:
            wait(client.CreateOrchestrator().RunTaskWithResultAsync(request))
        with pytest.raises(ResourceExhaustedException) as streamed:
            wait(StreamRecording.RecordAsync(client.CreateOrchestrator(), request, CancellationToken(False)))
    finally:
        release.set()
        holder.result(30)
    for error in (unary.value, streamed.value):
        assert "full" in error.Message
        assert error.RetryAfter is not None and error.RetryAfter.TotalSeconds > 0
