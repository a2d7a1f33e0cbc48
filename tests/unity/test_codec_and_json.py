"""The pure parts of the C# transport, through pythonnet: envelopes, error mapping, proto3 JSON.

The JSON checks compare against protobuf's own proto3 JSON (json_format), so the C# DTOs cannot
silently drift from what the runtime parses and prints.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from google.protobuf import json_format

from coreai.v1 import common_pb2, orchestrator_pb2
from tests.support.internals import internal
from tests.unity.conftest import wait

CODES = {
    "canceled": "CanceledException",
    "invalid_argument": "InvalidArgumentException",
    "deadline_exceeded": "DeadlineExceededException",
    "not_found": "NotFoundException",
    "permission_denied": "PermissionDeniedException",
    "resource_exhausted": "ResourceExhaustedException",
    "failed_precondition": "FailedPreconditionException",
    "unimplemented": "UnimplementedException",
    "internal": "InternalException",
    "unavailable": "UnavailableException",
    "unauthenticated": "UnauthenticatedException",
}


def _stream(data: bytes) -> Any:
    from System import Array, Byte
    from System.IO import MemoryStream

    return MemoryStream(Array[Byte](list(data)))


def _read_all(data: bytes) -> list[Any]:
    ConnectEnvelope = internal("CoreAI.Runtime.ConnectEnvelope")
    from System.Threading import CancellationToken

    stream = _stream(data)
    out: list[Any] = []
    while True:
        env = wait(ConnectEnvelope.ReadAsync(stream, CancellationToken(False)))
        if env is None:
            return out
        out.append(env)


def test_envelope_encoding_is_flags_then_big_endian_length(assemblies: Any) -> None:
    ConnectEnvelope = internal("CoreAI.Runtime.ConnectEnvelope")

    payload = '{"hint":"héllo"}'
    encoded = bytes(ConnectEnvelope.Encode(2, payload))
    body = payload.encode("utf-8")
    assert encoded == struct.pack(">BI", 2, len(body)) + body


def test_envelopes_read_back_in_order_until_a_clean_end(assemblies: Any) -> None:
    data = b"".join(struct.pack(">BI", flags, len(p)) + p for flags, p in
                    [(0, b'{"textDelta":{"text":"a"}}'), (0, b""), (2, b"{}")])
    envs = _read_all(data)
    assert [(e.Flags, e.Text, e.IsEndStream) for e in envs] == [
        (0, '{"textDelta":{"text":"a"}}', False), (0, "", False), (2, "{}", True)]


@pytest.mark.parametrize("data", [b"\x00\x00\x00", b"\x00\x00\x00\x00\x05abc", b"\x00\xff\xff\xff\xff"])
def test_truncated_or_impossible_envelopes_are_internal_errors(assemblies: Any, data: bytes) -> None:
    from CoreAI.Runtime import InternalException

    with pytest.raises(InternalException):
        _read_all(data)


@pytest.mark.parametrize("code,exception", sorted(CODES.items()))
def test_every_connect_code_maps_to_its_exception(assemblies: Any, code: str, exception: str) -> None:
    import CoreAI.Runtime as rt
    ConnectErrors = internal("CoreAI.Runtime.ConnectErrors")

    error = ConnectErrors.FromUnaryResponse(400, json.dumps({"code": code, "message": "why it failed"}))
    assert type(error).__name__ == exception
    assert isinstance(error, getattr(rt, exception)) and isinstance(error, rt.CoreAIRuntimeException)
    assert error.CodeName == code and error.Message == "why it failed"
    end = ConnectErrors.FromEndOfStream(json.dumps({"error": {"code": code, "message": "in stream"}}))
    assert type(end).__name__ == exception and end.Message == "in stream"


def test_statuses_without_a_connect_body_map_like_connect(assemblies: Any) -> None:
    from CoreAI.Runtime import ConnectCode

    ConnectErrors = internal("CoreAI.Runtime.ConnectErrors")

    assert ConnectErrors.FromUnaryResponse(503, "<html>busy</html>").Code == ConnectCode.Unavailable
    assert ConnectErrors.FromUnaryResponse(401, "").Code == ConnectCode.Unauthenticated
    assert ConnectErrors.FromUnaryResponse(404, "").Code == ConnectCode.Unimplemented
    assert ConnectErrors.FromUnaryResponse(500, "{}").Code == ConnectCode.Unknown
    assert ConnectErrors.FromUnaryResponse(400, '{"code":"brand_new","message":"m"}').Code == ConnectCode.Unknown
    assert ConnectErrors.FromEndOfStream('{"metadata":{}}') is None
    assert ConnectErrors.FromEndOfStream("") is None
    assert ConnectErrors.FromEndOfStream("not json").Code == ConnectCode.Internal


def test_csharp_json_is_strict_proto3_json(assemblies: Any) -> None:
    from CoreAI.V1 import RoleMemoryConfigProto as RoleMemoryConfig
    from CoreAI.V1 import ToolResultMemoryProto as ToolResultMemory

    ProtoJson = internal("CoreAI.Runtime.ProtoJson")

    config = RoleMemoryConfig()
    config.RoleId = "Smith"
    config.UseMemoryTool = False
    config.MaxOutputTokens = 64
    config.Temperature = 0.25
    config.ToolResultMemory = ToolResultMemory.ErrorsOnly
    text = ProtoJson.Serialize(config)
    parsed = json_format.Parse(text, common_pb2.RoleMemoryConfig())  # strict: an unknown field raises
    assert parsed.role_id == "Smith" and parsed.use_memory_tool is False and parsed.HasField("use_memory_tool")
    assert parsed.max_output_tokens == 64 and parsed.temperature == 0.25
    assert parsed.tool_result_memory == common_pb2.TOOL_RESULT_MEMORY_ERRORS_ONLY
    # Presence: unset optionals stay unset (a patch must not switch other settings off).
    for name in ("with_chat_history", "persist_chat_history", "context_tokens", "max_memory_chars", "system_prompt"):
        assert not parsed.HasField(name), name
    assert '"toolResultMemory":"TOOL_RESULT_MEMORY_ERRORS_ONLY"' in text


def test_int64_travels_as_a_string_both_ways(assemblies: Any) -> None:
    from CoreAI.V1 import ChatMessageProto as ChatMessage

    ProtoJson = internal("CoreAI.Runtime.ProtoJson")

    big = 2**53 + 1  # not representable as a double: a number would lose it
    message = ChatMessage()
    message.Timestamp = big
    text = ProtoJson.Serialize(message)
    assert f'"timestamp":"{big}"' in text
    assert json_format.Parse(text, common_pb2.ChatMessage()).timestamp == big
    python_json = json_format.MessageToJson(common_pb2.ChatMessage(role="user", timestamp=big, order=7))
    back = ProtoJson.Deserialize[ChatMessage](python_json)
    assert (back.Role, back.Timestamp, back.Order, back.Content) == ("user", big, 7, "")


def test_python_proto3_json_reads_into_csharp_types(assemblies: Any) -> None:
    from CoreAI.V1 import TurnEvent, TurnStatus

    ProtoJson = internal("CoreAI.Runtime.ProtoJson")

    final = orchestrator_pb2.RunTaskResponse(
        status=orchestrator_pb2.TURN_STATUS_TOOL_LOOP_ENDED, text="hi", trace_id="t-1",
        tool_calls=[orchestrator_pb2.ToolCallEvent(call_id="c1", name="memory", arguments_json='{"action":"read"}')],
        cut_report=orchestrator_pb2.CutReport(stored_messages=4, folded_ids=["a", "b"],
                                              compaction=orchestrator_pb2.COMPACTION_KIND_LLM))
    event = ProtoJson.Deserialize[TurnEvent](json_format.MessageToJson(orchestrator_pb2.TurnEvent(final=final)))
    assert event.TextDelta is None and event.Final is not None
    assert event.Final.Status == TurnStatus.ToolLoopEnded and event.Final.Text == "hi"
    calls = [(c.CallId, c.Name, c.ArgumentsJson) for c in event.Final.ToolCalls]
    assert calls == [("c1", "memory", '{"action":"read"}')]
    assert list(event.Final.CutReport.FoldedIds) == ["a", "b"] and event.Final.CutReport.StoredMessages == 4
    assert str(event.Final.CutReport.Compaction) == "Llm"


def test_unknown_enum_names_and_fields_from_a_newer_runtime_are_tolerated(assemblies: Any) -> None:
    from CoreAI.V1 import LoadStateResponse, LoadStatus

    ProtoJson = internal("CoreAI.Runtime.ProtoJson")

    newer = '{"status":"LOAD_STATUS_FROM_THE_FUTURE","newField":1,"reason":"r"}'
    back = ProtoJson.Deserialize[LoadStateResponse](newer)
    assert back.Status == LoadStatus.Unspecified and back.Reason == "r"
    assert ProtoJson.Deserialize[LoadStateResponse]('{"status":3}').Status == LoadStatus.Failed


def test_familiar_policy_maps_to_a_full_configure_role_patch(assemblies: Any) -> None:
    from CoreAI.Ai import AgentBuilder, AgentMemoryPolicy, MemoryToolAction

    ProtoJson, ProtoMapping = internal("CoreAI.Runtime.ProtoJson"), internal("CoreAI.Ai.ProtoMapping")

    policy = AgentMemoryPolicy()
    config = AgentBuilder("BlacksmithNPC", policy).WithMemory(MemoryToolAction.StrReplace) \
        .WithChatHistory(4096, True).WithSystemPrompt("You forge.").Build()
    parsed = json_format.Parse(ProtoJson.Serialize(ProtoMapping.ToProto(config.Memory)), common_pb2.RoleMemoryConfig())
    assert parsed.role_id == "BlacksmithNPC" and parsed.default_action == common_pb2.MEMORY_TOOL_ACTION_STR_REPLACE
    assert parsed.context_tokens == 4096 and parsed.persist_chat_history and parsed.with_chat_history
    assert parsed.system_prompt == "You forge." and parsed.HasField("use_llm_context_compaction")
    assert not parsed.HasField("max_output_tokens") and not parsed.HasField("temperature")
