"""Typed results of chat requests: completions, tool calls, and the deltas of a stream."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pyruntime.jsonlimits import MAX_JSON_DEPTH, nesting_depth


@dataclass(frozen=True)
class Usage:
    """Token counts the server reported for one request."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens reused from the server's prompt cache (not evaluated again)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of the model: `arguments` is the raw string, `parsed_arguments` its JSON object."""

    id: str
    name: str
    arguments: str
    parsed_arguments: dict[str, Any] | None
    arguments_error: str | None  # why `arguments` is not a JSON object; None when it parsed

    @classmethod
    def from_raw(cls, id: str, name: str, arguments: str) -> ToolCall:
        """Build a tool call, parsing `arguments` leniently."""
        parsed, error = parse_tool_arguments(arguments)
        return cls(id=id, name=name, arguments=arguments, parsed_arguments=parsed, arguments_error=error)


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments as a JSON object; returns (object, None) or (None, reason).

    Lenient: raw control characters inside strings are accepted (grammar-constrained output
    can contain them), and an empty string means no arguments.
    """
    if not raw.strip():
        return {}, None
    if nesting_depth(raw) > MAX_JSON_DEPTH:
        # json.loads raises RecursionError near depth 1000; the model gets this as its tool error instead.
        return None, f"arguments nest deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(raw, strict=False)
    except json.JSONDecodeError as exc:
        # Position and reason only: the text itself may be personal data.
        return None, f"arguments are not valid JSON ({exc.msg} at char {exc.pos} of {len(raw)})"
    if not isinstance(value, dict):
        return None, f"arguments are JSON {type(value).__name__}, not an object"
    return value, None


@dataclass(frozen=True)
class ChatCompletion:
    """The result of one chat request."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of assistant text."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of tool call `index`: id and name arrive once, `arguments` is a fragment to append."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class FinishDelta:
    """The reply is complete; `finish_reason` says why (stop, length, tool_calls, ...)."""

    finish_reason: str


@dataclass(frozen=True)
class UsageDelta:
    """Token counts, when the server sends them in the stream."""

    usage: Usage


StreamDelta: TypeAlias = TextDelta | ToolCallDelta | FinishDelta | UsageDelta


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatCompletionAccumulator:
    """Folds stream deltas into the `ChatCompletion` a non-streaming request would have given."""

    def __init__(self) -> None:
        """Start empty."""
        self._text: list[str] = []
        self._tools: dict[int, _PartialToolCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.pieces = 0  # text and tool-call deltas so far: llama.cpp streams one per generated token

    def add(self, delta: StreamDelta) -> None:
        """Fold in one delta (a later usage replaces an earlier one: the hosted server sends the prompt's first)."""
        if isinstance(delta, TextDelta):
            self._text.append(delta.text)
            self.pieces += 1
        elif isinstance(delta, ToolCallDelta):
            self.pieces += 1
            partial = self._tools.setdefault(delta.index, _PartialToolCall())
            partial.id = delta.id or partial.id
            partial.name = delta.name or partial.name
            partial.arguments.append(delta.arguments)
        elif isinstance(delta, FinishDelta):
            self.finish_reason = delta.finish_reason
        else:
            self.usage = delta.usage

    @property
    def has_tool_calls(self) -> bool:
        """True once a tool call has begun to stream."""
        return bool(self._tools)

    def result(self, model: str | None = None) -> ChatCompletion:
        """The completion so far."""
        calls = tuple(
            ToolCall.from_raw(p.id, p.name, "".join(p.arguments)) for _, p in sorted(self._tools.items())
        )
        return ChatCompletion(
            text="".join(self._text),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=model,
        )
