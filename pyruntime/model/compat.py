"""Pure translation between our calls and the OpenAI chat wire format, smoothing server gaps.

Known llama-cpp-python gaps handled here (see the toolchain notes): an assistant message with
`content: null` or no content is an HTTP 500 there, and `response_format` of type `json_schema`
is an HTTP 500 while `{"type": "json_object", "schema": ...}` works.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyruntime.model.errors import ContextOverflowError, ModelError, ModelUnavailableError
from pyruntime.model.types import (
    ChatCompletion,
    FinishDelta,
    StreamDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageDelta,
)

Message = Mapping[str, Any]

_OVERFLOW_TEXT = re.compile(r"context (length|window|size)|exceeds? (the )?context", re.IGNORECASE)
_OVERFLOW_NUMBERS = re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens", re.DOTALL)
_DETAIL_CHARS = 300


def normalize_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Copies of `messages` that every server accepts (assistant content never null or missing)."""
    out = []
    for message in messages:
        copy = dict(message)
        if copy.get("role") == "assistant" and copy.get("content") is None:
            copy["content"] = ""
        if copy.get("tool_calls"):
            copy["tool_calls"] = [_tool_call_with_string_arguments(c) for c in copy["tool_calls"]]
        out.append(copy)
    return out


def _tool_call_with_string_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    call = dict(call)
    function = dict(call.get("function") or {})
    if not isinstance(function.get("arguments", ""), str):
        function["arguments"] = json.dumps(function["arguments"])
    call["function"] = function
    return call


def normalize_response_format(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`json_schema` formats become llama-cpp-python's grammar-constrained `json_object` + schema."""
    if response_format is None:
        return None
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "schema": schema} if schema is not None else {"type": "json_object"}
    return dict(response_format)


def normalize_tool_choice(tool_choice: str | Mapping[str, Any] | None) -> str | dict[str, Any] | None:
    """"auto"/"none"/"required" pass through; any other string forces the tool of that name."""
    if tool_choice is None or isinstance(tool_choice, Mapping):
        return dict(tool_choice) if tool_choice is not None else None
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}


def build_chat_request(
    model: str | None,
    messages: Sequence[Message],
    *,
    stream: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    response_format: Mapping[str, Any] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    extra: Mapping[str, Any] | None = None,
    json_schema_as_json_object: bool = True,
) -> dict[str, Any]:
    """The JSON body of `POST /chat/completions`; `extra` keys are sent as given (e.g. `seed`)."""
    if not messages:
        raise ValueError("a chat request needs at least one message")
    body: dict[str, Any] = {"messages": normalize_messages(messages), "stream": stream}
    if model:
        body["model"] = model
    if tools:
        body["tools"] = [dict(t) for t in tools]
    choice = normalize_tool_choice(tool_choice)
    if choice is not None:
        body["tool_choice"] = choice
    if response_format is not None:
        body["response_format"] = (
            normalize_response_format(response_format) if json_schema_as_json_object else dict(response_format)
        )
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if extra:
        body.update(extra)
    return body


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else 0
    return Usage(int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0), int(cached or 0))


def parse_completion(data: Mapping[str, Any]) -> ChatCompletion:
    """A `ChatCompletion` from a non-streaming response body."""
    choices = data.get("choices") or []
    if not choices:
        raise ModelError("model server response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall.from_raw(
            str(c.get("id") or f"call_{i}"),
            str((c.get("function") or {}).get("name") or ""),
            _arguments_text((c.get("function") or {}).get("arguments")),
        )
        for i, c in enumerate(message.get("tool_calls") or [])
    )
    return ChatCompletion(
        text=message.get("content") or "",
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=_usage(data.get("usage")),
        model=data.get("model"),
    )


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def parse_chunk(data: Mapping[str, Any]) -> list[StreamDelta]:
    """The deltas carried by one streamed `chat.completion.chunk`."""
    if "error" in data:
        raise error_from_body(None, data)
    deltas: list[StreamDelta] = []
    for choice in (data.get("choices") or [])[:1]:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            deltas.append(TextDelta(delta["content"]))
        for i, call in enumerate(delta.get("tool_calls") or []):
            function = call.get("function") or {}
            deltas.append(
                ToolCallDelta(
                    index=int(call.get("index", i)),
                    id=call.get("id"),
                    name=function.get("name"),
                    arguments=_arguments_text(function.get("arguments")),
                )
            )
        if choice.get("finish_reason"):
            deltas.append(FinishDelta(choice["finish_reason"]))
    usage = _usage(data.get("usage"))
    if usage is not None:
        deltas.append(UsageDelta(usage))
    return deltas


def error_from_response(status: int, body: bytes) -> ModelError:
    """The error for an HTTP error response (`status` >= 400)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = {"error": {"message": body.decode("utf-8", errors="replace")}}
    return error_from_body(status, data if isinstance(data, Mapping) else {})


def error_from_body(status: int | None, data: Mapping[str, Any]) -> ModelError:
    """The error for a decoded error body (`{"error": {...}}` or FastAPI's `{"detail": ...}`).

    `status` is None for an error event inside a stream.
    """
    error = data.get("error", data.get("detail"))
    if isinstance(error, Mapping):
        code, kind, message = error.get("code"), error.get("type"), str(error.get("message") or "")
    else:
        code, kind, message = None, None, str(error or "")
    label = str(code or kind or "")
    if code == "context_length_exceeded" or (status in (400, None) and _OVERFLOW_TEXT.search(message)):
        numbers = _OVERFLOW_NUMBERS.search(message)
        text = "request exceeds the model's context window"
        if numbers:
            text += f" ({numbers.group(2)} tokens requested, {numbers.group(1)} available)"
        error_class: type[ModelError] = ContextOverflowError
    elif status in (502, 503, 504):
        text, error_class = f"model server unavailable (HTTP {status})", ModelUnavailableError
    elif status in (401, 403):
        text, error_class = f"model server refused the request (HTTP {status}; check the API key)", ModelError
    elif status is None:
        text = "model server reported an error mid-stream" + (f" ({label})" if label else "")
        error_class = ModelError
    else:
        text = f"model server returned HTTP {status}" + (f" ({label})" if label else "")
        error_class = ModelError
    # The server's own message may quote the request (player text): kept apart from str(error).
    return error_class(text, status=status, detail=message[:_DETAIL_CHARS] or None)
