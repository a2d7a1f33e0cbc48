"""Pure translation between our calls and the OpenAI chat wire format, smoothing server gaps.

Gaps handled here (see the toolchain notes): some servers answer an assistant message with
`content: null` or no content with HTTP 500 (sent as `""`); llama.cpp takes a schema as
`{"type": "json_object", "schema": ...}`; llama-server reads `tool_choice` as a string only (a named
tool becomes `required` with that tool alone) and reports usage in per-token `timings`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from pyruntime.model.client.errors import ContextOverflowError, ModelError, ModelUnavailableError
from pyruntime.model.client.types import (
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


class ChatCallOptions(TypedDict, total=False):
    """The keywords of one chat call, beside its messages; every `ModelClient` takes them as `**options`.

    Declared once so that the seam, the HTTP client and the doubles cannot drift apart; a key left out (or None)
    leaves the server's default.
    """

    tools: Sequence[Mapping[str, Any]] | None  # native tool definitions (OpenAI `tools`)
    tool_choice: str | Mapping[str, Any] | None  # "auto", "none", "required", or a tool forced by name
    response_format: Mapping[str, Any] | None  # a JSON schema the reply is constrained to
    temperature: float | None
    max_tokens: int | None
    extra: Mapping[str, Any] | None  # keys sent as given (e.g. `seed`)
    conversation: str | None  # names the conversation: the hosted engine keeps its slot (not part of the body)

_OVERFLOW_TEXT = re.compile(r"context (length|window|size)|exceeds? (the )?(available )?context", re.IGNORECASE)
_OVERFLOW_NUMBERS = re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens", re.DOTALL)
# llama-server: "request (6021 tokens) exceeds the available context size (2048 tokens), try increasing it"
_OVERFLOW_NUMBERS_LLAMA = re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")
_OVERFLOW_TYPES = ("context_length_exceeded", "exceed_context_size_error")
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
    json_schema_as_json_object: bool = True,
    **options: Unpack[ChatCallOptions],
) -> dict[str, Any]:
    """The JSON body of `POST /chat/completions`; `extra` keys are sent as given (e.g. `seed`)."""
    tools, tool_choice = options.get("tools"), options.get("tool_choice")
    response_format, extra = options.get("response_format"), options.get("extra")
    temperature, max_tokens = options.get("temperature"), options.get("max_tokens")
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


def named_choice_as_required(body: dict[str, Any]) -> None:
    """llama-server reads `tool_choice` as a string only: a tool forced by name becomes `required` with that tool
    alone (in place)."""
    choice, tools = body.get("tool_choice"), body.get("tools")
    if isinstance(choice, Mapping) and tools:
        name = (choice.get("function") or {}).get("name")
        body["tools"] = [t for t in tools if (t.get("function") or {}).get("name") == name] or tools
        body["tool_choice"] = "required"


@dataclass(frozen=True)
class ForcedCall:
    """A forced tool call asked as a JSON schema: the reply is the call (see `force_tool_by_schema`)."""

    names: tuple[str, ...]  # one: the reply is that tool's arguments; several: {"name": ..., "arguments": {...}}
    call_id: str = "call_1"

    def split(self, text: str) -> tuple[str, str]:
        """(tool name, arguments JSON text) of a reply."""
        if len(self.names) == 1:
            return self.names[0], text
        try:
            data = json.loads(text, strict=False)
        except ValueError:
            return self.names[0], text  # cut or broken: reported by the call's arguments_error
        if isinstance(data, Mapping) and data.get("name") in self.names:
            return str(data["name"]), json.dumps(data.get("arguments", {}), ensure_ascii=False)
        return self.names[0], text


def force_tool_by_schema(body: dict[str, Any]) -> ForcedCall | None:
    """For a server whose chat template renders no tools (llama-server then ignores them, and `required`
    with them): a forced call becomes a JSON schema of its arguments, so the reply is the call anyway.
    Changes `body` in place; None (and `body` unchanged) when no call is forced."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not tools or choice is None or choice in ("auto", "none"):
        return None
    if isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name")
        chosen = [t for t in tools if (t.get("function") or {}).get("name") == name]
    elif choice == "required":
        chosen = list(tools)
    else:
        return None
    if not chosen:
        return None
    names = tuple(str((t.get("function") or {}).get("name") or "") for t in chosen)
    params = [(t.get("function") or {}).get("parameters") or {"type": "object"} for t in chosen]
    if len(chosen) == 1:
        schema = params[0]
    else:
        schema = {"anyOf": [{"type": "object", "properties": {"name": {"const": n}, "arguments": p},
                             "required": ["name", "arguments"]} for n, p in zip(names, params, strict=True)]}
    del body["tools"], body["tool_choice"]
    body["response_format"] = {"type": "json_object", "schema": schema}
    return ForcedCall(names)


def forced_completion(forced: ForcedCall, completion: ChatCompletion) -> ChatCompletion:
    """A completion of a schema-forced call as the tool call it is."""
    name, arguments = forced.split(completion.text)
    finish = "tool_calls" if completion.finish_reason in (None, "stop") else completion.finish_reason
    return ChatCompletion(text="", tool_calls=(ToolCall.from_raw(forced.call_id, name, arguments),),
                          finish_reason=finish, usage=completion.usage, model=completion.model)


class ForcedCallStream:
    """The deltas of a schema-forced call's stream as tool-call deltas (pure)."""

    def __init__(self, forced: ForcedCall) -> None:
        """Translate for `forced`."""
        self.forced = forced
        self._started = False
        self._buffer: list[str] = []

    def feed(self, delta: StreamDelta) -> list[StreamDelta]:
        """The deltas to pass on for one received delta."""
        if isinstance(delta, TextDelta):
            if len(self.forced.names) > 1:
                self._buffer.append(delta.text)  # the name is known only once the JSON is whole
                return []
            first, self._started = not self._started, True
            return [ToolCallDelta(0, self.forced.call_id if first else None, self.forced.names[0] if first else None,
                                  delta.text)]
        if isinstance(delta, FinishDelta):
            out: list[StreamDelta] = []
            if self._buffer:
                name, arguments = self.forced.split("".join(self._buffer))
                out.append(ToolCallDelta(0, self.forced.call_id, name, arguments))
            reason = "tool_calls" if delta.finish_reason == "stop" else delta.finish_reason
            return [*out, FinishDelta(reason)]
        return [delta]


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
    # The chunk's counts first: a consumer that stops at this chunk's text (the output cap) still has them.
    usage = _usage(data.get("usage")) or _timings_usage(data.get("timings"))
    if usage is not None:
        deltas.append(UsageDelta(usage))
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
    return deltas


def _timings_usage(timings: Any) -> Usage | None:
    """llama-server's `timings` as usage: `prompt_n` evaluated + `cache_n` reused; `predicted_n` generated."""
    if not isinstance(timings, Mapping) or "prompt_n" not in timings:
        return None
    evaluated, cached = int(timings.get("prompt_n") or 0), int(timings.get("cache_n") or 0)
    return Usage(evaluated + cached, int(timings.get("predicted_n") or 0), cached)


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
    if code in _OVERFLOW_TYPES or kind in _OVERFLOW_TYPES or (status in (400, None) and _OVERFLOW_TEXT.search(message)):
        text = "request exceeds the model's context window"
        numbers = _OVERFLOW_NUMBERS.search(message)
        llama = _OVERFLOW_NUMBERS_LLAMA.search(message)
        if numbers:
            text += f" ({numbers.group(2)} tokens requested, {numbers.group(1)} available)"
        elif llama:
            text += f" ({llama.group(1)} tokens requested, {llama.group(2)} available)"
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
