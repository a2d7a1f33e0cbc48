"""Tool-call modes, pure: `native` (OpenAI `tools`/`tool_calls`) and `structured` (one grammar-constrained JSON reply).

Structured mode asks for `{"tool_calls":[{"name":…,"arguments":{…}}],"reply":"…"}` with
`response_format={"type":"json_object","schema":…}` (llama-cpp-python turns the schema into a
grammar), so even a model without function calling emits well-formed calls. `ReplyExtractor`
streams the `reply` string while it decodes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.errors import SettingChoice
from pyruntime.history.messages import clip_marked
from pyruntime.jsonlimits import MAX_JSON_DEPTH, nesting_depth
from pyruntime.memory.tool import MEMORY_TOOL_NAME
from pyruntime.model.client.types import ToolCall

MAX_CALLS_PER_ROUND = 4
MAX_DESCRIPTION_CHARS = 500  # a tool's description in the contract (depends only on the text: cache-stable)
# With the memory tool, the format is shown as complete, concrete replies: SmolLM2-135M copies a
# placeholder such as "<your answer>" verbatim and, without a filled-in call, leaves `content` out
# (measured with bench/bench_tool_modes.py). It also pastes the filled-in example after a plain "hi";
# the example's made-up name lets the runtime tell such a copy from a fact the player stated.
FORMAT_EXAMPLE_NAME = "Shadowfax"
FORMAT_EXAMPLE_REFUSAL = (
    f"nothing was stored: {FORMAT_EXAMPLE_NAME} is from the format example in your instructions, not from the "
    "player. Store only facts the player states in their own message. Now answer the player, with an empty "
    "tool_calls list."
)
_STRUCTURED_FORMAT_WITH_MEMORY = (
    "\n\nAlways reply with one JSON object, for example:\n"
    f'{{"tool_calls": [{{"name": "{MEMORY_TOOL_NAME}", "arguments": {{"action": "append", '
    f'"content": "The player\'s horse is called {FORMAT_EXAMPLE_NAME}."}}}}], '
    f'"reply": "I will remember that your horse is {FORMAT_EXAMPLE_NAME}."}}\n'
    "or, when no tool is needed:\n"
    '{"tool_calls": [], "reply": "Hello! How can I help you?"}\n'
    "Tool results come back in the next message; then answer again in the same format, with an empty "
    "tool_calls list unless you need another tool."
)


class ToolCallMode(SettingChoice, setting="tool-call mode"):
    """How tool calls travel between the model and the runtime."""

    NATIVE = "native"
    STRUCTURED = "structured"


def _name(definition: Mapping[str, Any]) -> str:
    return str(definition["function"]["name"])


def _description(definition: Mapping[str, Any]) -> str:
    text = " ".join(str(definition["function"].get("description") or "").split())
    return clip_marked(text, MAX_DESCRIPTION_CHARS)[0]


def _call_shape(definition: Mapping[str, Any]) -> str:
    """`name(required, optional?)`: the argument names, without the schema (the grammar or the server has it)."""
    parameters = definition["function"].get("parameters") or {}
    required = set(parameters.get("required") or ())
    names = [n if n in required else f"{n}?" for n in (parameters.get("properties") or {})]
    return f"{_name(definition)}({', '.join(names)})"


def tool_contract(definitions: Sequence[Mapping[str, Any]], mode: ToolCallMode) -> str:
    """The tool contract of the system prompt: the role's tools and how to call them ("" without tools)."""
    if not definitions:
        return ""
    lines = "\n".join(f"- {_call_shape(d)}: {_description(d)}" for d in definitions)
    text = "## Tools\nYou can call these tools when they help:\n" + lines
    if mode is ToolCallMode.STRUCTURED and MEMORY_TOOL_NAME in (_name(d) for d in definitions):
        text += _STRUCTURED_FORMAT_WITH_MEMORY
    elif mode is ToolCallMode.STRUCTURED:
        text += (
            "\n\nAlways answer with one JSON object: "
            '{"tool_calls": [{"name": "<tool>", "arguments": {...}}], "reply": "<your answer>"}. '
            "Use an empty tool_calls list when no tool is needed. Tool results come back in the next message; "
            "then answer again in the same format."
        )
    return text


def copies_format_example(arguments: str, player_text: str) -> bool:
    """True when memory-call arguments carry the format example's name and the player's message does not."""
    name = FORMAT_EXAMPLE_NAME.casefold()
    return name in arguments.casefold() and name not in player_text.casefold()


def structured_schema(
    definitions: Sequence[Mapping[str, Any]], *, require_call: bool = False, only: str | None = None,
    max_calls: int = MAX_CALLS_PER_ROUND,
) -> dict[str, Any]:
    """The JSON schema of a structured reply: one branch per tool (const name + its parameters)."""
    branches = [
        {
            "type": "object",
            "properties": {
                "name": {"const": _name(d)},
                "arguments": d["function"].get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for d in definitions
        if only is None or _name(d) == only
    ]
    if not branches:
        return {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
    calls: dict[str, Any] = {"type": "array", "items": branches[0] if len(branches) == 1 else {"anyOf": branches}}
    calls["maxItems"] = max_calls
    if require_call:
        calls["minItems"] = 1
    return {
        "type": "object",
        "properties": {"tool_calls": calls, "reply": {"type": "string"}},
        "required": ["tool_calls", "reply"],
    }


def native_tool_choice(offered: Sequence[str], forced: str | None) -> str | dict[str, Any] | None:
    """The `tool_choice` of a native request: a named tool, `required`, or None (the server's default)."""
    if forced is None or not offered:
        return None
    if forced == "required" and len(offered) > 1:
        return "required"
    name = offered[0] if forced == "required" else forced
    # Forcing by name is what llama.cpp with the model's own template honours (toolchain notes).
    return {"type": "function", "function": {"name": name}}


@dataclass(frozen=True)
class StructuredReply:
    """A parsed structured reply; `error` is set when the JSON was not a valid reply object."""

    reply: str
    tool_calls: tuple[ToolCall, ...]
    error: str | None = None


def parse_tool_calls(raw_calls: Any, *, call_id_prefix: str = "call") -> tuple[tuple[ToolCall, ...], str | None]:
    """The calls of a decoded `tool_calls` value; (calls so far, error) when an item is malformed."""
    if not isinstance(raw_calls, list):
        return (), "tool_calls is not a list"
    calls: list[ToolCall] = []
    for index, raw in enumerate(raw_calls):
        if not isinstance(raw, dict):
            return tuple(calls), f"tool_calls[{index}] is not an object"
        arguments = raw.get("arguments")
        text_args = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
        calls.append(ToolCall.from_raw(f"{call_id_prefix}_{index}", str(raw.get("name") or ""), text_args))
    return tuple(calls), None


def parse_structured_reply(
    text: str, *, call_id_prefix: str = "call", tool_calls_json: str | None = None
) -> StructuredReply:
    """Parse `{"tool_calls": [...], "reply": "..."}` (lenient about control characters).

    `tool_calls_json` (the complete `tool_calls` value of a reply cut later, from `ReplyExtractor`)
    still yields the calls when the whole reply is not valid JSON.
    """
    if nesting_depth(text) > MAX_JSON_DEPTH:
        # json.loads would raise RecursionError (near depth 1000) and fail the whole turn.
        return StructuredReply("", (), f"the reply nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        error = f"the reply is not complete JSON ({exc.msg} at char {exc.pos} of {len(text)})"
        if tool_calls_json is not None:
            try:
                calls, _ = parse_tool_calls(json.loads(tool_calls_json, strict=False), call_id_prefix=call_id_prefix)
            except (json.JSONDecodeError, RecursionError):
                calls = ()
            return StructuredReply("", calls, error)
        return StructuredReply("", (), error)
    if not isinstance(data, dict):
        return StructuredReply("", (), "the reply is not a JSON object")
    reply = data.get("reply")
    reply = reply if isinstance(reply, str) else ""
    calls, problem = parse_tool_calls(data.get("tool_calls") or [], call_id_prefix=call_id_prefix)
    return StructuredReply(reply, calls, problem)


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class ReplyExtractor:
    """Streams the decoded value of the top-level `reply` string out of partial JSON text."""

    def __init__(self, key: str = "reply") -> None:
        """Track the top-level string value of `key`."""
        self._key = key
        self._depth = 0
        self._in_string = False
        self._string_is_key = False
        self._emitting = False
        self._escape: str | None = None  # pending escape sequence after the backslash
        self._high_surrogate: int | None = None
        self._key_chars: list[str] = []
        self._last_key = ""
        self._expect_key = False
        self._after_colon = False
        self._done = False
        self._raw: list[str] = []
        self._calls_start: int | None = None
        self.text = ""
        self.tool_calls_json: str | None = None  # the complete top-level `tool_calls` value, once closed

    @property
    def has_tool_calls(self) -> bool:
        """True once a non-empty `tool_calls` array has closed."""
        return self.tool_calls_json is not None and self.tool_calls_json.strip("[] \t\r\n") != ""

    def feed(self, chunk: str) -> str:
        """Consume more output; returns the newly decoded reply text (may be "")."""
        out: list[str] = []
        for char in chunk:
            self._raw.append(char)
            if self._in_string:
                self._string_char(char, out)
            else:
                self._structural(char)
        new = "".join(out)
        self.text += new
        return new

    def _structural(self, char: str) -> None:
        if char == '"':
            self._in_string = True
            top = self._depth == 1
            self._string_is_key = top and self._expect_key
            self._emitting = top and self._after_colon and self._last_key == self._key and not self._done
            self._key_chars = []
            self._after_colon = False
        elif char in "{[":
            if self._depth == 1 and self._after_colon and self._last_key == "tool_calls":
                self._calls_start = len(self._raw) - 1
            self._depth += 1
            self._expect_key = char == "{" and self._depth == 1
            self._after_colon = False
        elif char in "}]":
            self._depth -= 1
            if self._depth == 1 and self._calls_start is not None and self.tool_calls_json is None:
                self.tool_calls_json = "".join(self._raw[self._calls_start:])
        elif char == "," and self._depth == 1:
            self._expect_key = True
        elif char == ":" and self._depth == 1:
            self._after_colon = True
            self._expect_key = False

    def _string_char(self, char: str, out: list[str]) -> None:
        if self._escape is not None:
            self._escape += char
            decoded = self._decode_escape()
            if decoded is not None:
                self._add(decoded, out)
            return
        if char == "\\":
            self._escape = ""
            return
        if char == '"':
            self._in_string = False
            if self._string_is_key:
                self._last_key = "".join(self._key_chars)
            if self._emitting:
                self._emitting = False
                self._done = True
            return
        self._add(char, out)

    def _decode_escape(self) -> str | None:
        assert self._escape is not None
        seq = self._escape
        if seq[0] != "u":
            self._escape = None
            return _ESCAPES.get(seq[0], seq[0])
        if len(seq) < 5:
            return None
        self._escape = None
        try:
            code = int(seq[1:5], 16)
        except ValueError:
            return ""
        if 0xD800 <= code < 0xDC00:
            self._high_surrogate = code
            return ""
        if 0xDC00 <= code < 0xE000 and self._high_surrogate is not None:
            code = 0x10000 + ((self._high_surrogate - 0xD800) << 10) + (code - 0xDC00)
        self._high_surrogate = None
        return chr(code) if not 0xD800 <= code < 0xE000 else ""

    def _add(self, text: str, out: list[str]) -> None:
        if self._string_is_key:
            self._key_chars.append(text)
        elif self._emitting:
            out.append(text)
