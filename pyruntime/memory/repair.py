"""Turn whatever a small model sent as `memory` arguments into `MemoryToolArgs` (contract §1).

Repaired, because the intent is unambiguous:
- arguments given as a JSON string, also double-encoded, also with raw control characters;
- the whole call sent as arguments (`{"name": "Memory", "arguments": {...}}`, any name case);
- argument names in another case or spelling (`Old_Text`, `oldText`, `old-text` -> `old_text`);
- `line` as `"3"` or `3.0`, `replace_all` as `"true"`/`"false"`, JSON null as "not given";
- `action` trimmed and case-insensitive.
Refused with an `InvalidArgumentError` that says what is wrong and what is valid: anything else,
including unknown argument names (strict: a misspelt `conent` must not silently do something else).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from pyruntime.errors import InvalidArgumentError
from pyruntime.jsonlimits import MAX_JSON_DEPTH, check_json_depth, value_depth
from pyruntime.memory.actions import (
    MEMORY_ACTIONS,
    MEMORY_ARGUMENT_NAMES,
    MemoryToolArgs,
    normalize_action,
    unknown_action_message,
)

_MAX_DECODE_DEPTH = 3
_ECHO_CHARS = 40
_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_STRING_FIELDS = ("content", "old_text", "new_text", "anchor")
_ENVELOPE_ARGUMENT_KEYS = ("arguments", "parameters")


def _canonical(name: str) -> str:
    """An argument name with case, `_` and `-` ignored: `oldText`, `OLD_TEXT`, `old-text` -> `oldtext`."""
    return name.replace("_", "").replace("-", "").lower()


_CANONICAL_NAMES = {_canonical(name): name for name in MEMORY_ARGUMENT_NAMES}
_VALID_NAMES = ", ".join(MEMORY_ARGUMENT_NAMES)


def _echo(value: Any) -> str:
    """A short rendering of a bad value for an error message."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _ECHO_CHARS else text[: _ECHO_CHARS - 1] + "…"


def _json_kind(value: Any) -> str:
    """What a non-object value is, in JSON words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def _decode(raw: str) -> Any:
    """JSON text to a value; a string that decodes to more JSON text is decoded again (double encoding)."""
    value: Any = raw
    for _ in range(_MAX_DECODE_DEPTH):
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text:
            raise InvalidArgumentError("arguments are empty; a JSON object with at least action is required")
        check_json_depth(text, "arguments")  # json.loads would raise RecursionError near depth 1000
        try:
            # strict=False: grammar-constrained output may hold raw control characters inside strings.
            value = json.loads(text, strict=False)
        except json.JSONDecodeError as exc:
            if value is raw:
                raise InvalidArgumentError(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
            # A plain string inside valid JSON that is not itself JSON: not an arguments object.
            raise InvalidArgumentError("arguments must be a JSON object, got a JSON string") from None
    if isinstance(value, str):
        raise InvalidArgumentError("arguments must be a JSON object, got a JSON string")
    return value


def _unwrap_envelope(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The inner arguments when the model sent the whole call (`{"name": "memory", "arguments": {...}}`)."""
    keys = set(data)
    name = data.get("name")
    if "action" in data or not isinstance(name, str) or name.strip().lower() != "memory":
        return data
    for inner_key in _ENVELOPE_ARGUMENT_KEYS:
        if keys == {"name", inner_key}:
            inner = data[inner_key]
            inner = _decode(inner) if isinstance(inner, str) else inner
            if not isinstance(inner, Mapping):
                raise InvalidArgumentError(f"arguments.{inner_key} must be a JSON object")
            return inner
    return data


def _rename_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """Map argument names to the schema's names; unknown or colliding names are errors."""
    result: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            unknown.append(str(key))
            continue
        name = _CANONICAL_NAMES.get(_canonical(key.strip()))
        if name is None:
            unknown.append(key)
            continue
        if name in result:
            raise InvalidArgumentError(f"argument {name} is given more than once (in different spellings)")
        result[name] = value
    if unknown:
        listed = ", ".join(_echo(key) for key in unknown)
        raise InvalidArgumentError(f"Unknown argument(s): {listed}. Valid arguments: {_VALID_NAMES}")
    return result


def _as_line(value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"line must be an integer (a 1-based line number), got {_echo(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    raise InvalidArgumentError(f"line must be an integer (a 1-based line number), got {_echo(value)}")


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidArgumentError(f"{name} must be true or false, got {_echo(value)}")


def _repair_values(data: dict[str, Any]) -> dict[str, Any]:
    """Drop nulls, convert the safe string forms of numbers and booleans, check every type."""
    result = {name: value for name, value in data.items() if value is not None}
    action = result.get("action")
    if action is None:
        raise InvalidArgumentError(f"action is required. Valid actions: {', '.join(MEMORY_ACTIONS)}")
    if not isinstance(action, str):
        raise InvalidArgumentError(f"action must be a string, got {_echo(action)}. "
                                   f"Valid actions: {', '.join(MEMORY_ACTIONS)}")
    action = normalize_action(action)
    if action not in MEMORY_ACTIONS:
        raise InvalidArgumentError(unknown_action_message(action[:_ECHO_CHARS]))
    result["action"] = action
    for name in _STRING_FIELDS:
        if name in result and not isinstance(result[name], str):
            raise InvalidArgumentError(f"{name} must be a string, got {_echo(result[name])}")
    if "line" in result:
        result["line"] = _as_line(result["line"])
    if "replace_all" in result:
        result["replace_all"] = _as_bool(result["replace_all"], "replace_all")
    return result


def parse_memory_tool_arguments(raw: str | Mapping[str, Any] | MemoryToolArgs) -> MemoryToolArgs:
    """Validated arguments of one `memory` call, repaired where safe; InvalidArgumentError otherwise."""
    if isinstance(raw, MemoryToolArgs):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError("arguments are not valid UTF-8 text") from None
    data = _decode(raw) if isinstance(raw, str) else raw
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"arguments must be a JSON object, got {_json_kind(data)}")
    if value_depth(dict(data)) > MAX_JSON_DEPTH:
        raise InvalidArgumentError(f"arguments: nesting deeper than {MAX_JSON_DEPTH} levels")
    values = _repair_values(_rename_keys(_unwrap_envelope(data)))
    try:
        return MemoryToolArgs.model_validate(values)
    except ValidationError as exc:  # pragma: no cover - _repair_values already checked every field
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        raise InvalidArgumentError(f"{where}: {first['msg']}") from None
