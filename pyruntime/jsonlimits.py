"""Limits on JSON from outside (a client, a model, a file), checked before or instead of trusting a parser.

- `nesting_depth(text)`: how deep arrays/objects nest, counted without parsing (Python's json raises
  RecursionError near depth 1000, which escapes `except JSONDecodeError`).
- `check_json_shape(value, descriptor)`: a proto3-JSON value matches its message's shape where
  protobuf's parser is lax (it reads a JSON array as an empty message: `"state": []` blanked a save).
- `refuse_repeated_keys`: a `json.loads` hook that refuses an object naming a key twice (json keeps the
  last one silently; protobuf's own parser refuses them, so parsing to a dict first must too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pyruntime.errors import InvalidArgumentError

MAX_JSON_DEPTH = 64
"""Deepest nesting accepted in tool arguments and request bodies; real ones nest 2-4 levels."""


def nesting_depth(text: str | bytes | bytearray, stop_at: int = MAX_JSON_DEPTH) -> int:
    """The deepest array/object nesting of JSON text (strings skipped), counted up to stop_at + 1."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_at:
                    return deepest
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def check_json_depth(text: str | bytes | bytearray, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """InvalidArgumentError when text nests deeper than limit."""
    if nesting_depth(text, limit) > limit:
        raise InvalidArgumentError(f"{what}: nesting deeper than {limit} levels")


def value_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of parsed JSON (dicts and lists), counted up to limit + 1 without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _is_plain_message(field: FieldDescriptor) -> bool:
    # Well-known types (Struct, Value, Timestamp, wrappers) have their own JSON forms.
    return (field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None
            and not field.message_type.full_name.startswith("google.protobuf."))


def _message_of(field: FieldDescriptor) -> Descriptor:
    """The message type of a message field (protobuf sets it on every one)."""
    if field.message_type is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return field.message_type


def _field_named(descriptor: Descriptor, name: str) -> FieldDescriptor | None:
    field = descriptor.fields_by_name.get(name)
    if field is not None:
        return field
    for candidate in descriptor.fields:
        if candidate.json_name == name:
            return candidate
    return None


def _is_map(field: FieldDescriptor) -> bool:
    message = field.message_type
    return message is not None and message.GetOptions().map_entry


def check_json_shape(value: Any, descriptor: Descriptor, where: str = "request") -> None:
    """InvalidArgumentError naming the first place where a message is not a JSON object (or null)."""
    stack: list[tuple[Any, Descriptor, str]] = [(value, descriptor, where)]
    while stack:
        item, message, path = stack.pop()
        if not isinstance(item, dict):
            kind = "an array" if isinstance(item, list) else type(item).__name__
            raise InvalidArgumentError(f"{path} must be a JSON object ({message.name}), got {kind}")
        for name, child in item.items():
            field = _field_named(message, name) if isinstance(name, str) else None
            if field is None or child is None or not _is_plain_message(field):
                continue  # unknown names and scalar types are the parser's to judge
            child_path = f"{path}.{name}"
            if _is_map(field):
                value_field = _message_of(field).fields_by_name["value"]
                if isinstance(child, dict) and _is_plain_message(value_field):
                    stack.extend((v, _message_of(value_field), f"{child_path}[{k!r}]")
                                 for k, v in child.items() if v is not None)
            elif field.is_repeated:
                if isinstance(child, list):
                    stack.extend((v, _message_of(field), f"{child_path}[{i}]") for i, v in enumerate(child))
            else:
                stack.append((child, _message_of(field), child_path))


_FIELD_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads(..., object_pairs_hook=refuse_repeated_keys)`: the object, or ValueError naming the repeated key.

    Only a key that looks like a field name is named (a map's keys could be anything a player typed).
    """
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            shown = f" {key!r}" if _FIELD_LIKE.fullmatch(key) else ""
            raise ValueError(f"an object repeats the key{shown}; refused, since which value is meant is unclear")
        data[key] = value
    return data
