"""Proto conversion and the proto-facing runner over a turn of a model double, built as for the hosted tiny model."""

from __future__ import annotations

import pytest

from coreai.v1 import common_pb2
from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.errors import InvalidArgumentError
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service.turn_runner import ProtoTurnRunner, request_from_proto
from pyruntime.testing import RecordingModel, scripted_answer
from pyruntime.turns import AiTaskRequest, TurnStatus, build_orchestrator
from tests.support.doubles import run


def test_request_from_proto_maps_every_field() -> None:
    message = pb.RunTaskRequest(
        target=common_pb2.AgentTarget(role_id=" Merchant ", scope=common_pb2.AgentMemoryScope(user_id="u1"),
                                      actor="npc-7"),
        hint="hi", source_tag="Chat", trace_id="t1", request_system_instructions="rsi",
        allowed_tool_names=pb.ToolNameList(names=["memory"]), forced_tool_mode="memory", max_output_tokens=5,
        world_state="ws", temperature=0.5, timeout_ms=2500,
    )
    request = request_from_proto(message)
    assert request == AiTaskRequest(
        hint="hi", role_id="Merchant", source_tag="Chat", trace_id="t1", scope=AgentMemoryScope(user_id="u1"),
        actor="npc-7", request_system_instructions="rsi", allowed_tool_names=("memory",), forced_tool_mode="memory",
        max_output_tokens=5, world_state="ws", temperature=0.5, timeout=2.5,
    )
    bare = request_from_proto(pb.RunTaskRequest(hint="x"))
    assert (bare.role_id, bare.allowed_tool_names, bare.max_output_tokens, bare.temperature, bare.timeout) == (
        "Creator", None, None, None, None)
    assert request_from_proto(pb.RunTaskRequest(allowed_tool_names=pb.ToolNameList())).allowed_tool_names == ()


def test_bad_requests_are_refused() -> None:
    for bad in (dict(timeout=0), dict(max_output_tokens=0), dict(temperature=-1), dict(allowed_tool_names="memory")):
        with pytest.raises(InvalidArgumentError):
            AiTaskRequest("x", **bad)
    assert AiTaskRequest("x", role_id="  ").role_id == "Creator"
    assert AiTaskRequest("x", source_tag=" CHAT ").is_chat_source


def test_proto_runner_streams_a_turn(prepared_server: LlamaServerProcess) -> None:
    model = RecordingModel([scripted_answer("Well met, traveller.", pieces=["Well met", ", traveller", "."])])
    orchestrator = build_orchestrator(server=prepared_server, tool_mode="native", client=model)
    assert orchestrator.settings.model_context_tokens == prepared_server.config.n_ctx
    assert orchestrator.settings.system_messages_after_first  # the GGUF's ChatML takes a later system message
    runner = ProtoTurnRunner(orchestrator)
    request = pb.RunTaskRequest(target=common_pb2.AgentTarget(role_id="AINpc"), hint="hello", trace_id="tr-1",
                                max_output_tokens=12, forced_tool_mode="none")

    async def go() -> tuple[list[pb.TurnEvent], pb.RunTaskResponse]:
        events = [e async for e in runner.stream_task(request)]
        response = await runner.run_task(request)
        return events, response

    events, response = run(go())
    assert [e.WhichOneof("event") for e in events] == ["cut_report", "text_delta", "text_delta", "text_delta", "final"]
    assert [e.text_delta.text for e in events[1:-1]] == ["Well met", ", traveller", "."]
    final = events[-1].final
    assert final.status == pb.TURN_STATUS_OK == int(TurnStatus.OK) and final.trace_id == "tr-1"
    assert final.text == "Well met, traveller."
    assert (response.status, response.text, response.usage.model_calls) == (pb.TURN_STATUS_OK, final.text, 1)
    assert response.cut_report.stored_messages == 2  # the first turn's hint and reply
    assert [r.max_tokens for r in model.requests] == [12, 12] and model.last.last_text == "hello"
