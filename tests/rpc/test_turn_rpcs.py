"""RunTask and StreamTask through both transports.

The protocol (events in order, deltas that add up to the final text, tool calls and results, recording, cancellation)
runs on a model double inside the runtime, so every event is asserted exactly. Against real llama.cpp (the tiny
model): the engine's cached and evaluated prompt tokens reaching the client, and a standalone runtime pointed at a
llama-server by URL.
"""

from __future__ import annotations

import json
import signal
import struct
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.app import RuntimeModel
from pyruntime.client import RuntimeClient
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service.turn_runner import ProtoTurnRunner
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.testing import Answer, ChatRequest, RecordingModel, Reply, ScriptedCall, scripted_answer
from pyruntime.turns import AiOrchestrator, ToolCallMode
from tests.rpc.conftest import TOKEN, TRANSPORTS, Runtime, spawn_runtime, start_runtime
from tests.support.fixtures import start_llama_server

SCOPE = AgentMemoryScope(user_id="player-1")
FACT = "Likes swords"
STORY = tuple(f"word{i} " for i in range(1500))  # a reply long enough to be cut: 1500 pieces, 10 ms apart


def _npc(request: ChatRequest) -> Reply:
    """The double's replies: a memory call when forced, a long story when asked, else a short answer."""
    if request.facts.after_tools:
        return "Noted."
    if request.tool_choice is not None and request.tool_names == ("memory",) and request.facts.hint == "remember":
        return ScriptedCall("memory", {"action": "append", "content": FACT})
    if "story" in request.facts.hint:
        return Answer(STORY, delay_ms=10)
    return scripted_answer(f"You said: {request.facts.hint}.", pieces=["You said: ", request.facts.hint, "."])


class ObservedRunner(ProtoTurnRunner):
    """The real proto runner, also noting streams that were closed before their final event."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.closed_early = 0
        self.finished = 0

    async def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        final = False
        try:
            async for event in super().stream_task(request):
                final = event.HasField("final")
                yield event
        finally:
            if final:
                self.finished += 1
            else:
                self.closed_early += 1


@dataclass
class TurnRuntime:
    """A runtime whose turns run against a real llama.cpp server."""

    runtime: Runtime
    runner: ObservedRunner


def turn_runtime(model: RuntimeModel, data_dir: Path, **settings: Any) -> TurnRuntime:
    """A runtime over `model` whose turn runner notes the streams closed early; `settings`: `RuntimeSettings` fields."""
    settings.setdefault("tool_mode", ToolCallMode.NATIVE)
    runners: list[ObservedRunner] = []

    def observed(orchestrator: AiOrchestrator) -> ObservedRunner:
        runners.append(ObservedRunner(orchestrator))
        return runners[-1]

    runtime = start_runtime(data_dir, model=model, turn_runner=observed, **settings)
    return TurnRuntime(runtime, runners[0])


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TurnRuntime]:
    """A runtime whose turns the double answers (`_npc`)."""
    model = RuntimeModel(None, "npc-double", client=RecordingModel(_npc))
    rt = turn_runtime(model, tmp_path_factory.mktemp("turns") / "data")
    yield rt
    rt.runtime.handle.stop(1.0)


@pytest.fixture(scope="module")
def engine_turns(tiny_llama_server: LlamaServerProcess, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[TurnRuntime]:
    """A runtime whose turns go to the session's tiny llama-server."""
    model = RuntimeModel(tiny_llama_server.base_url, tiny_llama_server.config.alias, tiny_llama_server)
    rt = turn_runtime(model, tmp_path_factory.mktemp("engine") / "data")
    yield rt
    rt.runtime.handle.stop(1.0)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_run_task_and_health(turns: TurnRuntime, transport: str) -> None:
    with turns.runtime.client(transport) as client:
        health = client.health()
        assert health.ready and health.model_ready and health.model == "npc-double"
        role = f"Plain{transport}"
        client.configure_role(RoleMemoryConfig(role, use_memory_tool=False, max_output_tokens=12, temperature=0.0))
        result = client.run_task("hello there", role_id=role, scope=SCOPE, trace_id="t-1")
        assert (result.status, result.text, result.trace_id) == (pb.TURN_STATUS_OK, "You said: hello there.", "t-1")
        assert result.usage.model_calls == 1
        history = client.get_chat_history(role, scope=SCOPE)
        assert [(m.role, m.content) for m in history] == [("user", "hello there"), ("assistant", result.text)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_turn_usage_carries_the_cached_and_evaluated_prompt_tokens(engine_turns: TurnRuntime, transport: str) -> None:
    # llama.cpp's counts reach the client: a repeated turn reuses its prompt from the model's cache.
    role = f"Echo{transport}"
    with engine_turns.runtime.client(transport) as client:
        client.configure_role(RoleMemoryConfig(role, use_memory_tool=False, with_chat_history=False,
                                               max_output_tokens=6, temperature=0.0))
        first, second = (client.run_task("the same line", role_id=role, scope=SCOPE) for _ in range(2))
        first_events = list(client.stream_task("the same line", role_id=role, scope=SCOPE))
    streamed = first_events[-1].final
    for result in (first, second, streamed):
        usage = result.usage
        assert result.status == pb.TURN_STATUS_OK and usage.model_calls == 1 and usage.prompt_tokens > 0
        assert usage.evaluated_prompt_tokens == usage.prompt_tokens - usage.cached_prompt_tokens
        assert 0 <= usage.cached_prompt_tokens < usage.prompt_tokens  # the last token is always evaluated
    assert second.usage.prompt_tokens == first.usage.prompt_tokens  # no history: the identical request
    assert second.usage.cached_prompt_tokens > 0
    assert second.usage.evaluated_prompt_tokens < first.usage.evaluated_prompt_tokens
    assert streamed.usage.evaluated_prompt_tokens == second.usage.evaluated_prompt_tokens


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_task_delivers_deltas_tool_calls_and_cut_report(turns: TurnRuntime, transport: str) -> None:
    role = f"Keeper{transport}"
    with turns.runtime.client(transport) as client:
        client.configure_role(RoleMemoryConfig(role, max_output_tokens=200, temperature=0.0,
                                               max_tool_call_roundtrips=1))
        events = list(client.stream_task("remember", role_id=role, scope=SCOPE, forced_tool_mode="memory"))
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds == ["cut_report", "tool_call", "tool_result", "text_delta", "final"]
        final = events[-1].final
        call, result = events[1].tool_call, events[2].tool_result
        assert (call.name, json.loads(call.arguments_json)) == ("memory", {"action": "append", "content": FACT})
        assert result.call_id == call.call_id and result.success
        reported = json.loads(result.content)
        assert set(reported) == {"Success", "Message", "Error", "Version", "MemoryLength", "Memory"}
        assert (reported["Success"], reported["Version"], reported["Memory"]) == (True, 1, FACT)
        assert (events[3].text_delta.text, final.text, final.status) == ("Noted.", "Noted.", pb.TURN_STATUS_OK)
        assert [c.call_id for c in final.tool_calls] == [call.call_id]
        # What the tool reported is what the store holds, seen through the MemoryStore service.
        assert [v.version for v in client.list_versions(role, scope=SCOPE)] == [1]
        assert client.apply_memory_tool(role, {"action": "read"}, scope=SCOPE).memory == FACT


def test_raw_connect_stream_as_unity_reads_it(turns: TurnRuntime) -> None:
    runtime = turns.runtime
    request = json.dumps({"target": {"roleId": "RawStream", "scope": {"userId": "p"}}, "hint": "hi",
                          "maxOutputTokens": 8, "forcedToolMode": "none"}).encode()
    with httpx.stream("POST", f"{runtime.handle.connect_url}/coreai.v1.Orchestrator/StreamTask",
                      content=struct.pack(">BI", 0, len(request)) + request, timeout=60,
                      headers={"Content-Type": "application/connect+json",
                               "Authorization": f"Bearer {runtime.token}"}) as response:
        assert response.status_code == 200
        data = response.read()
    frames = []
    while data:
        flags, length = struct.unpack(">BI", data[:5])
        frames.append((flags, json.loads(data[5:5 + length])))
        data = data[5 + length:]
    assert [f for f, _ in frames[:-1]] == [0] * (len(frames) - 1) and frames[-1] == (0x02, {})  # clean end
    messages = [m for _, m in frames[:-1]]
    assert [next(iter(m)) for m in messages] == ["cutReport", "textDelta", "textDelta", "textDelta", "final"]
    assert [m["textDelta"]["text"] for m in messages[1:-1]] == ["You said: ", "hi", "."]
    assert (messages[-1]["final"]["status"], messages[-1]["final"]["text"]) == ("TURN_STATUS_OK", "You said: hi.")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_client_disconnect_cancels_the_turn_and_the_hint_is_recorded_once(turns: TurnRuntime, transport: str) -> None:
    role = f"Talker{transport}"
    before = turns.runner.closed_early
    with turns.runtime.client(transport) as client:
        client.configure_role(RoleMemoryConfig(role, use_memory_tool=False, max_output_tokens=1500))
        stream = client.stream_task("a long story please", role_id=role, scope=SCOPE)
        seen = []
        for event in stream:
            seen.append(event.WhichOneof("event"))
            if seen.count("text_delta") == 3:
                break
        stream.close()  # the client goes away mid-turn
        deadline = time.monotonic() + 20
        while turns.runner.closed_early == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert turns.runner.closed_early == before + 1  # the turn was cut, not run to its end (15 s more)
        assert seen == ["cut_report", "text_delta", "text_delta", "text_delta"]
        history = client.get_chat_history(role, scope=SCOPE)
        assert [(m.role, m.content) for m in history] == [("user", "a long story please")]  # once, and no reply
        # The runtime keeps serving the same role.
        assert client.apply_memory_tool(role, {"action": "read"}, scope=SCOPE).success


def test_standalone_runtime_runs_turns_against_an_llm_url(tiny_endless_model_path: Path, tmp_path: Path) -> None:
    # The endless variant: the plain tiny model may pick <|im_end|> first, and an empty reply is not a turn run.
    llama = start_llama_server(tiny_endless_model_path)
    runtime = spawn_runtime(tmp_path, model=("--llm-url", llama.base_url))
    try:
        with RuntimeClient(f"grpc://127.0.0.1:{runtime.grpc_port}", token=TOKEN, timeout=120) as client:
            assert client.health().model_ready
            result = client.run_task("hi", role_id="PlainChat", max_output_tokens=8, forced_tool_mode="none")
            assert result.status == pb.TURN_STATUS_OK and result.text
    finally:
        try:
            assert runtime.terminate(signal.SIGTERM) == 0
        finally:
            llama.stop()
    # PlainChat persists its history: the turn is in the files after the runtime stopped.
    history = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path).scoped().get_chat_history("PlainChat")
    assert [m.content for m in history][:1] == ["hi"]
