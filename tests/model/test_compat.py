"""Pure translation rules: request normalisation, SSE decoding, error mapping, lenient tool arguments."""

from __future__ import annotations

import pytest

from pyruntime.model.client.compat import build_chat_request, error_from_response, parse_chunk
from pyruntime.model.client.errors import ContextOverflowError, ModelError, ModelUnavailableError
from pyruntime.model.client.sse import SSEDecoder, SSELines
from pyruntime.model.client.types import FinishDelta, TextDelta, ToolCall, ToolCallDelta


def test_requests_are_normalised_for_llama_cpp_python():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = build_chat_request(
        "m",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": {"a": 1}}}],
            },
            {"role": "assistant"},
        ],
        stream=False,
        tool_choice="remember",
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    )
    assert [m["content"] for m in body["messages"]] == ["", ""]
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert body["tool_choice"] == {"type": "function", "function": {"name": "remember"}}
    assert body["response_format"] == {"type": "json_object", "schema": schema}
    auto = build_chat_request("m", [{"role": "user", "content": "x"}], stream=True, tool_choice="auto")
    assert auto["tool_choice"] == "auto"
    with pytest.raises(ValueError):
        build_chat_request("m", [], stream=False)


def test_sse_decoder_joins_data_lines_and_drops_comments():
    decoder = SSEDecoder()
    lines = [": ping - 2026", "data: {\"a\":", "data: 1}\r", "", "event: x", "data:[DONE]"]
    events = [e for e in (decoder.feed(line) for line in lines) if e is not None]
    assert events == ['{"a":\n1}']
    assert decoder.flush() == "[DONE]"
    assert decoder.flush() is None


def test_sse_lines_are_whole_however_the_bytes_arrive():
    stream = ": ping\r\ndata: {\"t\":\"é\"}\r\n\r\ndata: a\rdata: b\n\ndata: [DONE]".encode()
    expected = [": ping", 'data: {"t":"é"}', "", "data: a", "data: b", "", "data: [DONE]"]
    for size in (1, 2, 3, 7, len(stream)):  # cuts inside `\r\n` and inside the two bytes of "é"
        lines = SSELines()
        got = [line for i in range(0, len(stream), size) for line in lines.feed(stream[i:i + size])]
        assert got + lines.flush() == expected, size
        assert lines.flush() == []


@pytest.mark.parametrize(
    ("status", "body", "error_type", "text"),
    [
        (400, b'{"error": {"message": "m", "code": "context_length_exceeded"}}', ContextOverflowError, "context"),
        (400, b'{"error": {"message": "prompt exceeds the context size"}}', ContextOverflowError, "context"),
        (503, b"busy", ModelUnavailableError, "HTTP 503"),
        (401, b'{"detail": "Invalid API key"}', ModelError, "API key"),
        (500, b'{"error": {"message": "player secret", "type": "internal_server_error"}}', ModelError, "HTTP 500"),
    ],
)
def test_http_errors_map_to_model_errors(status, body, error_type, text):
    error = error_from_response(status, body)
    assert type(error) is error_type
    assert text in str(error) and error.status == status
    assert "secret" not in str(error)


def test_stream_chunks_become_deltas_and_error_events_raise():
    chunk = {
        "choices": [
            {
                "delta": {
                    "content": "hi",
                    "tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    assert parse_chunk(chunk) == [
        TextDelta("hi"),
        ToolCallDelta(index=0, id="c1", name="f", arguments="{"),
        FinishDelta("tool_calls"),
    ]
    with pytest.raises(ContextOverflowError):
        parse_chunk({"error": {"message": "x", "code": "context_length_exceeded"}})


def test_tool_arguments_parse_leniently_and_report_what_went_wrong():
    assert ToolCall.from_raw("1", "f", '{"text": "a\tb\nc"}').parsed_arguments == {"text": "a\tb\nc"}
    assert ToolCall.from_raw("1", "f", "").parsed_arguments == {}
    broken = ToolCall.from_raw("1", "f", '{"text": "player secr')
    assert broken.parsed_arguments is None and broken.arguments_error is not None
    assert "not valid JSON" in broken.arguments_error and "secr" not in broken.arguments_error
    listed = ToolCall.from_raw("1", "f", "[1]")
    assert listed.arguments_error is not None and "not an object" in listed.arguments_error
