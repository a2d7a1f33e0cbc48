"""A scripted model (pure): replies, tool calls, stream pieces, delays and failures from a script.

Deterministic NPC behaviour for tests and a game's play-mode CI, served by `serve --scripted-model
FILE` as an OpenAI-compatible endpoint (`pyruntime/testing/scripted_server.py`). A script is JSON:

    {"rules": [
       {"when": {"system": "Blacksmith", "hint": "(?i)sword"},
        "reply": "Thirty gold for the sword.",
        "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
        "after_tools": "Noted. Thirty gold.",
        "pieces": ["Thirty gold ", "for the sword."], "delay_ms": 0, "first_delay_ms": 0, "times": 0},
       {"when": {"hint": "crash"}, "error": {"status": 500, "message": "scripted failure"}},
       {"when": {"compaction": true}, "reply": "The player asked about swords."}],
     "default": {"reply": "Hm?"}}

The first rule whose `when` matches answers (`system`: regex searched in the system prompt, which
names the role; `hint`: regex searched in the player's message; `compaction`: the rolling-summary
call). `reply` may be a list: answered in turn, the last one repeating. `tool_calls` are made in the
first round; once the request carries their results, `after_tools` (default: `reply`) answers
without calls. `times` > 0 retires a rule after that many answers. `error` answers with that HTTP
status instead (400 with a message naming the context is a context overflow to the runtime).
Structured-mode requests (`response_format`) get the JSON object that mode expects; a JSON format with a
schema of other fields (the memory writer's decision) gets the reply text as written.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyruntime.errors import InvalidArgumentError

TOOL_RESULTS_PREFIX = "Tool results:"
CONTEXT_UPDATE_PREFIX = "System context update:"
COMPACTION_PAYLOAD_PREFIX = "Prior summary:"
_RULE_KEYS = {"when", "reply", "tool_calls", "after_tools", "pieces", "delay_ms", "first_delay_ms", "times", "error"}
_WHEN_KEYS = {"system", "hint", "compaction"}


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call a rule makes."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ScriptedError:
    """An HTTP failure a rule answers with."""

    status: int
    message: str


@dataclass
class Rule:
    """One `rules` entry, validated."""

    system: re.Pattern[str] | None = None
    hint: re.Pattern[str] | None = None
    compaction: bool | None = None
    replies: tuple[str, ...] = ("",)
    tool_calls: tuple[ScriptedCall, ...] = ()
    after_tools: str | None = None
    pieces: tuple[str, ...] | None = None
    delay_ms: int = 0
    first_delay_ms: int = 0
    times: int = 0
    error: ScriptedError | None = None
    used: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Answer:
    """What to send for one request: text pieces and tool calls (or an error), with their delays."""

    pieces: tuple[str, ...]
    tool_calls: tuple[ScriptedCall, ...] = ()
    delay_ms: int = 0
    first_delay_ms: int = 0
    error: ScriptedError | None = None
    structured: bool = False

    @property
    def text(self) -> str:
        """The whole content."""
        return "".join(self.pieces)


def _fail(where: str, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"scripted model: {where}: {what}")


def _regex(where: str, value: Any) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _fail(where, "must be a regular expression string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise _fail(where, f"is not a valid regular expression ({exc.msg})") from None


def _int(where: str, value: Any, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(where, "must be a non-negative integer")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(where, "must be a string")
    return value


def _rule(where: str, raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        raise _fail(where, "must be an object")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise _fail(where, f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}")
    when = raw.get("when") or {}
    if not isinstance(when, Mapping) or set(when) - _WHEN_KEYS:
        raise _fail(f"{where}.when", f"must be an object with keys among {sorted(_WHEN_KEYS)}")
    compaction = when.get("compaction")
    if compaction is not None and not isinstance(compaction, bool):
        raise _fail(f"{where}.when.compaction", "must be true or false")
    reply = raw.get("reply", "")
    replies = tuple(_text(f"{where}.reply[{i}]", r) for i, r in enumerate(reply)) if isinstance(reply, list) else (
        _text(f"{where}.reply", reply),)
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or []):
        at = f"{where}.tool_calls[{i}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or not call["name"].strip():
            raise _fail(at, "must be an object with a non-empty string `name`")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise _fail(f"{at}.arguments", "must be an object")
        calls.append(ScriptedCall(call["name"], dict(arguments)))
    pieces = raw.get("pieces")
    if pieces is not None and (not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces)):
        raise _fail(f"{where}.pieces", "must be a list of strings")
    error = raw.get("error")
    scripted_error = None
    if error is not None:
        if not isinstance(error, Mapping):
            raise _fail(f"{where}.error", "must be an object {status, message}")
        status = _int(f"{where}.error.status", error.get("status"), 500)
        if not 400 <= status <= 599:
            raise _fail(f"{where}.error.status", "must be an HTTP error status (400-599)")
        message = _text(f"{where}.error.message", error.get("message", "scripted failure"))
        scripted_error = ScriptedError(status, message)
    after = raw.get("after_tools")
    return Rule(
        system=_regex(f"{where}.when.system", when.get("system")),
        hint=_regex(f"{where}.when.hint", when.get("hint")),
        compaction=compaction,
        replies=replies or ("",),
        tool_calls=tuple(calls),
        after_tools=None if after is None else _text(f"{where}.after_tools", after),
        pieces=tuple(pieces) if pieces is not None else None,
        delay_ms=_int(f"{where}.delay_ms", raw.get("delay_ms")),
        first_delay_ms=_int(f"{where}.first_delay_ms", raw.get("first_delay_ms")),
        times=_int(f"{where}.times", raw.get("times")),
        error=scripted_error,
    )


def _split(text: str) -> tuple[str, ...]:
    """Stream pieces of a text: one per word, spaces kept with the word before them."""
    return tuple(re.findall(r"\S+\s*|\s+", text)) or ("",)


@dataclass(frozen=True)
class RequestFacts:
    """What a rule's `when` looks at in one request (and what decides the shape of its answer)."""

    system: str  # the system prompt (it names the role)
    hint: str  # the player's message: the last user message that is not tool results or a context update
    after_tools: bool  # the request carries the results of the previous round's tool calls
    compaction: bool  # the rolling-summary call
    structured: bool  # structured tool mode (a JSON format whose schema, if any, has `tool_calls`): that JSON object


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def request_facts(body: Mapping[str, Any]) -> RequestFacts:
    """The facts of a chat-completion request body (InvalidArgumentError for a body without messages)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
        raise InvalidArgumentError("messages must be a non-empty list of objects")
    system = _content(messages[0]) if messages[0].get("role") == "system" else ""
    last = messages[-1]
    after = last.get("role") == "tool" or (
        last.get("role") == "user" and _content(last).startswith(TOOL_RESULTS_PREFIX))
    hint = ""
    for message in reversed(messages):
        text = _content(message)
        if message.get("role") == "user" and not text.startswith((TOOL_RESULTS_PREFIX, CONTEXT_UPDATE_PREFIX)):
            hint = text
            break
    compaction = len(messages) == 2 and hint.startswith(COMPACTION_PAYLOAD_PREFIX)
    format_ = body.get("response_format")
    structured = isinstance(format_, Mapping) and format_.get("type") in ("json_object", "json_schema")
    if structured and isinstance(format_, Mapping):
        # A schema of other fields (the memory writer's decision) is not the tool mode's: its reply goes as written.
        schema = format_.get("schema") or (format_.get("json_schema") or {}).get("schema")
        fields = schema.get("properties") if isinstance(schema, Mapping) else None
        structured = not isinstance(fields, Mapping) or "tool_calls" in fields
    return RequestFacts(system, hint, after, compaction, structured)


class Script:
    """A loaded script: `answer(body)` picks the rule for one chat-completion request body."""

    def __init__(self, rules: Sequence[Rule], default: Rule) -> None:
        self.rules = list(rules)
        self.default = default
        self._lock = threading.Lock()  # rule counters: requests may arrive concurrently

    @classmethod
    def from_dict(cls, data: Any) -> Script:
        """Validate a script object; an InvalidArgumentError names the first bad field."""
        if not isinstance(data, Mapping):
            raise _fail("script", "must be a JSON object with `rules` and optionally `default`")
        unknown = set(data) - {"rules", "default"}
        if unknown:
            raise _fail("script", f"unknown key(s) {sorted(unknown)}; allowed: ['default', 'rules']")
        rules = data.get("rules", [])
        if not isinstance(rules, list):
            raise _fail("rules", "must be a list")
        return cls([_rule(f"rules[{i}]", r) for i, r in enumerate(rules)], _rule("default", data.get("default", {})))

    @classmethod
    def load(cls, path: Path) -> Script:
        """Read and validate a script file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"scripted model: the script file cannot be read ({exc.strerror})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail("script", f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return cls.from_dict(data)

    def _pick(self, request: RequestFacts) -> Rule:
        for rule in self.rules:
            if rule.times and rule.used >= rule.times:
                continue
            if rule.compaction is not None and rule.compaction != request.compaction:
                continue
            if rule.system is not None and not rule.system.search(request.system):
                continue
            if rule.hint is not None and not rule.hint.search(request.hint):
                continue
            return rule
        return self.default

    def answer(self, body: Mapping[str, Any]) -> Answer:
        """The answer to one request body (raises InvalidArgumentError for a body without messages)."""
        request = request_facts(body)
        with self._lock:
            rule = self._pick(request)
            index = min(rule.used, len(rule.replies) - 1)
            rule.used += 1
        if rule.error is not None:
            return Answer((), error=rule.error)
        calls = () if request.after_tools else rule.tool_calls
        text = rule.replies[index] if not request.after_tools or rule.after_tools is None else rule.after_tools
        pieces = rule.pieces if not request.after_tools else None
        return scripted_answer(text, calls, structured=request.structured, pieces=pieces, delay_ms=rule.delay_ms,
                               first_delay_ms=rule.first_delay_ms)


def scripted_answer(text: str, calls: Sequence[ScriptedCall] = (), *, structured: bool = False,
                    pieces: Sequence[str] | None = None, delay_ms: int = 0, first_delay_ms: int = 0) -> Answer:
    """The answer that sends `text` and `calls`: in structured mode as the JSON object that mode expects.

    `pieces` (plain mode only): how the text streams; default one piece per word.
    """
    if structured:
        text = json.dumps({"tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                           "reply": text}, ensure_ascii=False)
        return Answer(tuple(text[i : i + 16] for i in range(0, len(text), 16)), (), delay_ms, first_delay_ms,
                      structured=True)
    return Answer(tuple(pieces) if pieces is not None else _split(text), tuple(calls), delay_ms, first_delay_ms)


def scripted_usage(messages: Sequence[Mapping[str, Any]], answer: Answer) -> tuple[int, int]:
    """(prompt, completion) token counts the scripted model reports: about four characters a token, at least 1."""
    prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
    return prompt, len(answer.text) // 4 + 1
