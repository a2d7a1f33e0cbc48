"""Game tools: tools a client declares with a turn and executes itself (docs/game-tools.md).

The model calls them like any other tool. The call's arguments are repaired where the intent is
unambiguous (double-encoded JSON, an argument name in another case or spelling, `"3"` for an
integer, `"true"` for a boolean, an enum value in another case, `null` for an optional argument)
and validated against the declared JSON Schema; arguments that still fail are answered to the
model as a tool error and never reach the client. A valid call is handed to the turn's stream as a
`ClientToolCallEvent` and waits for `ClientCallRegistry.submit` (the `SubmitToolResult` RPC), up to
the call's timeout: then the model is told the tool timed out and the turn goes on.

Transport-free: the registry is keyed by (turn id, call id) and resolves asyncio futures.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable as RefResolutionError
from referencing.jsonschema import DRAFT202012

from pyruntime.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, ToolCallEndedError
from pyruntime.history.messages import clip_marked
from pyruntime.jsonlimits import check_json_depth
from pyruntime.memory.tool import MEMORY_TOOL_NAME
from pyruntime.model.client.types import ToolCall, parse_tool_arguments
from pyruntime.turns.events import ClientToolCallEvent, TurnEvent
from pyruntime.turns.rounds.registry import ToolContext
from pyruntime.turns.rounds.rules import CallOutcome

DEFAULT_CLIENT_TOOL_TIMEOUT_S = 30.0
MAX_CLIENT_TOOLS = 32  # per request: each one's schema enters the prompt
MAX_SCHEMA_CHARS = 16_000
MAX_RESULT_CHARS = 8_000  # of a submitted result, kept for the model (clipped with a marker)
MAX_ERROR_ITEMS = 5  # schema violations named in one tool error
ENDED_CALLS_KEPT = 4096  # ended calls remembered, so a late result gets FAILED_PRECONDITION, not NOT_FOUND
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-compatible servers accept
_INTEGER_TEXT = re.compile(r"^\s*[+-]?\d+\s*$")
_NUMBER_TEXT = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
_VALIDATOR = jsonschema.Draft202012Validator
_SCHEMA_URI = "urn:coreai:client-tool"  # the base a schema's local references resolve against

log = logging.getLogger("pyruntime.turns")


Emit = Callable[[TurnEvent], Awaitable[None]]


@dataclass(frozen=True)
class ClientToolSpec:
    """One declared game tool: name, description, and the JSON Schema (an object schema) of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool dict."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}}


def client_tool_spec(name: str, description: str, parameters_json_schema: str) -> ClientToolSpec:
    """A checked spec; a bad name, a blank description or a schema that is not a valid object schema fails."""
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise InvalidArgumentError("client tool name must be 1-64 characters of letters, digits, '_' or '-'")
    if name.lower() == MEMORY_TOOL_NAME:
        raise InvalidArgumentError(f"client tool name '{name}' collides with the runtime's '{MEMORY_TOOL_NAME}' tool")
    if not isinstance(description, str) or not description.strip():
        raise InvalidArgumentError(f"client tool '{name}': description must not be blank")
    text = parameters_json_schema.strip() if isinstance(parameters_json_schema, str) else ""
    if not text:
        text = '{"type": "object", "properties": {}}'
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidArgumentError(f"client tool '{name}': schema longer than {MAX_SCHEMA_CHARS} chars")
    check_json_depth(text, f"client tool '{name}' schema")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"client tool '{name}': schema is not valid JSON ({exc.msg} at char {exc.pos})") \
            from None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise InvalidArgumentError(f"client tool '{name}': schema must be a JSON Schema with \"type\": \"object\"")
    try:
        _VALIDATOR.check_schema(schema)
    except SchemaError as exc:
        raise InvalidArgumentError(f"client tool '{name}': invalid JSON Schema ({clip_marked(exc.message, 200)[0]})") \
            from None
    refs = _refs(schema)
    if any(not isinstance(ref, str) or not ref.startswith("#") for ref in refs):
        # Nothing is fetched over the network: a reference must point into the schema itself.
        raise InvalidArgumentError(f"client tool '{name}': only local $ref values (\"#...\") are allowed")
    resolver = Registry().with_resource(_SCHEMA_URI, DRAFT202012.create_resource(schema)).resolver(_SCHEMA_URI)
    for ref in refs:
        try:
            resolver.lookup(ref)
        except RefResolutionError:
            raise InvalidArgumentError(f"client tool '{name}': the schema's $ref {clip_marked(ref, 80)[0]!r} "
                                       "does not resolve") from None
    return ClientToolSpec(name, description.strip(), schema)


def _refs(node: Any) -> list[Any]:
    """Every `$ref` value in a schema (iteratively: the nesting is bounded, but no recursion is needed)."""
    found = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "$ref" in item:
                found.append(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def check_client_tools(specs: Sequence[ClientToolSpec], runtime_tool_names: Sequence[str]) -> None:
    """InvalidArgumentError when names repeat or collide with a runtime-hosted tool of the role."""
    if len(specs) > MAX_CLIENT_TOOLS:
        raise InvalidArgumentError(f"at most {MAX_CLIENT_TOOLS} client tools per request")
    taken = {n.lower() for n in runtime_tool_names} | {MEMORY_TOOL_NAME}
    seen: set[str] = set()
    for spec in specs:
        key = spec.name.lower()
        if key in taken:
            raise InvalidArgumentError(
                f"client tool '{spec.name}' collides with a tool the runtime hosts for this role; rename it")
        if key in seen:
            raise InvalidArgumentError(f"client tool '{spec.name}' is declared twice")
        seen.add(key)


# -- argument repair and validation (pure) ---------------------------------------------------


def _canonical(name: str) -> str:
    return re.sub(r"[_\-\s]", "", name).lower()


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else set()


def _repair_value(value: Any, schema: Any) -> Any:
    """A scalar in the type the schema asks for, when its text says so unambiguously; else unchanged."""
    if not isinstance(schema, Mapping):
        return value
    kinds = _types(schema)
    if isinstance(value, str):
        if "integer" in kinds and "string" not in kinds and _INTEGER_TEXT.match(value):
            return int(value)
        if "number" in kinds and "string" not in kinds and _NUMBER_TEXT.match(value):
            number = float(value)
            return int(number) if number.is_integer() and "integer" in kinds else number
        if "boolean" in kinds and "string" not in kinds and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        enum_values = schema.get("enum")
        if isinstance(enum_values, list) and value not in enum_values:
            matches = [e for e in enum_values if isinstance(e, str) and e.lower() == value.strip().lower()]
            if len(matches) == 1:
                return matches[0]
    if isinstance(value, float) and "integer" in kinds and value.is_integer():
        return int(value)
    if isinstance(value, dict) and "object" in kinds:
        return _repair_object(value, schema)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_repair_value(item, schema["items"]) for item in value]
    return value


def _repair_object(data: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    declared = schema.get("properties")
    properties: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
    required = set(schema.get("required") or ())
    by_canonical: dict[str, list[str]] = {}
    for prop in properties:
        by_canonical.setdefault(_canonical(prop), []).append(prop)
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = key
        if key not in properties:
            candidates = by_canonical.get(_canonical(key), [])
            if len(candidates) == 1 and candidates[0] not in data:
                name = candidates[0]
        if value is None and name in properties and name not in required \
                and "null" not in _types(properties[name]):
            continue  # JSON null for an optional argument: not given
        out[name] = _repair_value(value, properties.get(name))
    return out


def _arguments_object(call: ToolCall) -> tuple[dict[str, Any] | None, str | None]:
    """The call's arguments as an object; a JSON string holding the object (double encoding) is decoded."""
    if call.parsed_arguments is not None:
        return call.parsed_arguments, None
    try:
        inner = json.loads(call.arguments, strict=False)
    except (json.JSONDecodeError, RecursionError):
        return None, call.arguments_error
    if isinstance(inner, str):
        parsed, error = parse_tool_arguments(inner)
        return parsed, (error if parsed is None else None)
    return None, call.arguments_error


def _violation(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {clip_marked(error.message, 160)[0]}"


def repair_and_validate(spec: ClientToolSpec, call: ToolCall) -> tuple[dict[str, Any] | None, str]:
    """(repaired arguments, "") when they satisfy the schema, else (None, what is wrong) for the model."""
    data, error = _arguments_object(call)
    if data is None:
        return None, f"invalid arguments for tool '{spec.name}': {error}"
    repaired = _repair_object(data, spec.parameters)
    try:
        errors = sorted(_VALIDATOR(spec.parameters).iter_errors(repaired), key=lambda e: list(e.absolute_path))
    except RefResolutionError:  # a reference only this value's branch reaches: the tool's schema is at fault
        return None, f"the schema of tool '{spec.name}' has a $ref that does not resolve; the call was not run"
    if errors:
        items = "; ".join(_violation(e) for e in errors[:MAX_ERROR_ITEMS])
        more = f" (+{len(errors) - MAX_ERROR_ITEMS} more)" if len(errors) > MAX_ERROR_ITEMS else ""
        return None, f"invalid arguments for tool '{spec.name}': {items}{more}"
    return repaired, ""


# -- waiting for results ----------------------------------------------------------------------


class CallEnd(enum.Enum):
    """How a call stopped waiting."""

    ANSWERED = "answered"
    TIMED_OUT = "timed out"
    CANCELLED = "the turn was cancelled or ended"


@dataclass(frozen=True)
class SubmittedResult:
    """What the client answered."""

    success: bool
    content: str


class ClientCallRegistry:
    """The calls waiting for a client's result, keyed by (turn id, call id); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], asyncio.Future[SubmittedResult]] = {}
        self._ended: OrderedDict[tuple[str, str], CallEnd] = OrderedDict()

    @staticmethod
    def new_turn_id() -> str:
        """A fresh, unguessable turn id."""
        return uuid.uuid4().hex

    def open(self, turn_id: str, call_id: str) -> asyncio.Future[SubmittedResult]:
        """Start waiting for a call's result (in the running loop)."""
        future: asyncio.Future[SubmittedResult] = asyncio.get_running_loop().create_future()
        with self._lock:
            if (turn_id, call_id) in self._pending:
                raise InvalidArgumentError("this call is already waiting for its result")
            self._pending[(turn_id, call_id)] = future
        return future

    def close(self, turn_id: str, call_id: str, end: CallEnd) -> None:
        """Stop waiting; a result that comes later is refused with FAILED_PRECONDITION or ALREADY_EXISTS."""
        with self._lock:
            self._pending.pop((turn_id, call_id), None)
            self._remember(turn_id, call_id, end)

    def _remember(self, turn_id: str, call_id: str, end: CallEnd) -> None:
        key = (turn_id, call_id)
        if key not in self._ended or end is CallEnd.ANSWERED:
            self._ended[key] = end
        self._ended.move_to_end(key)
        while len(self._ended) > ENDED_CALLS_KEPT:
            self._ended.popitem(last=False)

    @property
    def waiting(self) -> int:
        """Calls waiting for a result now."""
        with self._lock:
            return len(self._pending)

    def submit(self, turn_id: str, call_id: str, success: bool, content: str) -> None:
        """Hand a client's result to the waiting call.

        NotFoundError: no such call; ToolCallEndedError: it ended without a result (timed out, turn
        cancelled or ended); AlreadyExistsError: a result for it was already accepted.
        """
        if not turn_id or not call_id:
            raise InvalidArgumentError("turn_id and call_id are required")
        if not isinstance(content, str):
            raise InvalidArgumentError("content must be a string")
        with self._lock:
            key = (turn_id, call_id)
            future = self._pending.pop(key, None)
            if future is None:
                end = self._ended.get(key)
                if end is None:
                    raise NotFoundError("no tool call with this turn_id and call_id")
                if end is CallEnd.ANSWERED:
                    raise AlreadyExistsError("a result for this tool call was already accepted")
                raise ToolCallEndedError(f"this tool call already ended without a result ({end.value})")
            self._remember(turn_id, call_id, CallEnd.ANSWERED)
        result = SubmittedResult(bool(success), content)
        loop = future.get_loop()

        def deliver() -> None:
            if not future.done():
                future.set_result(result)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            deliver()
        else:
            loop.call_soon_threadsafe(deliver)


class ClientToolAdapter:
    """A game tool as an offered tool of one turn: validate, hand the call to the stream, wait for the result."""

    def __init__(self, spec: ClientToolSpec, registry: ClientCallRegistry, turn_id: str, timeout: float,
                 emit: Emit) -> None:
        """Bind the spec to one turn's id, stream and per-call timeout."""
        self.spec = spec
        self.name = spec.name
        self._registry = registry
        self._turn_id = turn_id
        self._timeout = timeout
        self._emit = emit

    def definition(self) -> dict[str, Any]:
        """The tool's function definition."""
        return self.spec.definition()

    async def run(self, call: ToolCall, context: ToolContext) -> CallOutcome:
        """One round trip to the client; a bad argument, a timeout or a failed result is the model's tool error."""
        arguments, problem = repair_and_validate(self.spec, call)
        if arguments is None:
            log.info("game tool call refused: its arguments do not satisfy the tool's schema")
            return CallOutcome(False, problem, problem)
        future = self._registry.open(self._turn_id, call.id)
        end = CallEnd.CANCELLED
        try:
            await self._emit(ClientToolCallEvent(self._turn_id, call.id, self.name,
                                                 json.dumps(arguments, ensure_ascii=False),
                                                 int(self._timeout * 1000)))
            try:
                async with asyncio.timeout(self._timeout):
                    result = await future
            except TimeoutError:
                end = CallEnd.TIMED_OUT
                log.warning("game tool call timed out after %g s: the client sent no result", self._timeout)
                text = f"tool '{self.name}' timed out: the game did not answer within {self._timeout:g} s"
                return CallOutcome(False, text, text)
            end = CallEnd.ANSWERED
        finally:
            if end is not CallEnd.ANSWERED:
                self._registry.close(self._turn_id, call.id, end)
        content = clip_marked(result.content, MAX_RESULT_CHARS)[0]
        if not result.success:
            content = content or f"tool '{self.name}' failed"
        return CallOutcome(result.success, content, content)
