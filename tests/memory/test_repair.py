"""Argument repair: what is safe is repaired, everything ambiguous or malformed is a specific error."""

from __future__ import annotations

import json

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MEMORY_ARGUMENT_NAMES, MemoryToolArgs, parse_memory_tool_arguments

VALID_ACTIONS = "Valid actions: read, write, append, clear, str_replace, insert, delete, rename"
VALID_ARGUMENTS = "Valid arguments: action, content, old_text, new_text, anchor, line, replace_all"


def parse(raw: object) -> MemoryToolArgs:
    """What a model sends, whatever its type: the hostile cases here are not the declared argument types."""
    return parse_memory_tool_arguments(raw)  # type: ignore[arg-type]


def error_of(raw: object) -> str:
    with pytest.raises(InvalidArgumentError) as err:
        parse(raw)
    return str(err.value)


# -- repaired ----------------------------------------------------------------------------------


def test_a_mapping_passes_through() -> None:
    args = parse({"action": "append", "content": "x"})
    assert (args.action, args.content, args.line, args.replace_all) == ("append", "x", None, None)


def test_arguments_as_a_json_string() -> None:
    assert parse('{"action": "write", "content": "x"}') == MemoryToolArgs(action="write", content="x")


def test_double_encoded_json_string() -> None:
    raw = json.dumps(json.dumps({"action": "insert", "content": "x", "line": 2}))
    assert parse(raw) == MemoryToolArgs(action="insert", content="x", line=2)


def test_bytes_are_decoded_as_utf8() -> None:
    assert parse('{"action":"append","content":"Ünïcode"}'.encode()).content == "Ünïcode"


def test_raw_control_characters_inside_strings() -> None:
    # Grammar-constrained output can hold a raw newline/tab inside a JSON string.
    args = parse('{"action": "append", "content": "line one\nline\ttwo"}')
    assert args.content == "line one\nline\ttwo"


@pytest.mark.parametrize("action", ["APPEND", " Append ", "\tappend\n", "Str_Replace"])
def test_action_is_trimmed_and_case_insensitive(action: str) -> None:
    assert parse({"action": action}).action == action.strip().lower()


@pytest.mark.parametrize(("value", "expected"), [("3", 3), (" 7 ", 7), ("-1", -1), (4.0, 4), (5, 5)])
def test_line_given_as_text_or_whole_float(value: object, expected: int) -> None:
    assert parse({"action": "insert", "content": "x", "line": value}).line == expected


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("False", False), (" TRUE ", True), (True, True)])
def test_replace_all_given_as_text(value: object, expected: bool) -> None:
    assert parse({"action": "delete", "old_text": "x", "replace_all": value}).replace_all is expected


def test_null_means_not_given() -> None:
    args = parse('{"action": "append", "content": "x", "old_text": null, "line": null, "replace_all": null}')
    assert (args.old_text, args.line, args.replace_all) == (None, None, None)


@pytest.mark.parametrize("key", ["Old_Text", "oldText", "OLD-TEXT", "oldtext"])
def test_argument_names_in_another_case_or_spelling(key: str) -> None:
    assert parse({"action": "delete", key: "x"}).old_text == "x"


@pytest.mark.parametrize("name", ["memory", "Memory", "MEMORY"])
def test_the_whole_call_sent_as_arguments_is_unwrapped(name: str) -> None:
    assert parse({"name": name, "arguments": {"action": "read"}}).action == "read"
    inner = json.dumps({"action": "append", "content": "x"})
    assert parse(json.dumps({"name": name, "arguments": inner})).content == "x"
    assert parse({"name": name, "parameters": {"action": "clear"}}).action == "clear"


def test_a_model_instance_passes_through_unchanged() -> None:
    args = MemoryToolArgs(action="read")
    assert parse(args) is args


def test_model_normalizes_action_when_built_directly() -> None:
    # deliberately not one of the declared actions as written: the model normalizes what a model sends
    assert MemoryToolArgs(action=" Rename ").action == "rename"  # type: ignore[arg-type]


# -- refused -----------------------------------------------------------------------------------


def test_unknown_action_has_the_spec_message() -> None:
    assert error_of({"action": "x"}) == f"Unknown action: 'x'. {VALID_ACTIONS}"
    assert error_of('{"action": " Remember "}') == f"Unknown action: 'remember'. {VALID_ACTIONS}"


def test_missing_action() -> None:
    assert error_of({"content": "x"}) == f"action is required. {VALID_ACTIONS}"
    assert error_of("{}") == f"action is required. {VALID_ACTIONS}"
    assert error_of({"action": None, "content": "x"}) == f"action is required. {VALID_ACTIONS}"


def test_action_of_the_wrong_type() -> None:
    assert error_of({"action": 3}) == f"action must be a string, got 3. {VALID_ACTIONS}"


def test_not_json() -> None:
    assert error_of("{action: append}").startswith("arguments are not valid JSON: Expecting property name")
    assert error_of('{"action": "append"').startswith("arguments are not valid JSON:")


@pytest.mark.parametrize(("raw", "kind"), [("[1, 2]", "an array"), ("3", "a number"), ("null", "null"),
                                           ("true", "a boolean"), ('"just text"', "a JSON string")])
def test_not_an_object(raw: str, kind: str) -> None:
    assert error_of(raw) == f"arguments must be a JSON object, got {kind}"


@pytest.mark.parametrize("raw", ["", "   ", '""'])
def test_empty_arguments(raw: str) -> None:
    assert error_of(raw) == "arguments are empty; a JSON object with at least action is required"


def test_unknown_argument_names_are_refused_and_the_valid_ones_named() -> None:
    assert error_of({"action": "append", "conent": "x"}) == f"Unknown argument(s): 'conent'. {VALID_ARGUMENTS}"
    message = error_of({"action": "append", "text": "x", "mode": "y"})
    assert message == f"Unknown argument(s): 'text', 'mode'. {VALID_ARGUMENTS}"
    assert tuple(MEMORY_ARGUMENT_NAMES) == (
        "action", "content", "old_text", "new_text", "anchor", "line", "replace_all")


def test_the_same_argument_in_two_spellings_is_ambiguous() -> None:
    assert error_of({"action": "delete", "old_text": "a", "oldText": "b"}) == (
        "argument old_text is given more than once (in different spellings)")


@pytest.mark.parametrize("value", ["three", "2.5", 2.5, True, [1], "", "1e3"])
def test_line_that_is_not_an_integer(value: object) -> None:
    message = error_of({"action": "insert", "content": "x", "line": value})
    assert message.startswith("line must be an integer (a 1-based line number), got ")


@pytest.mark.parametrize("value", ["yes", "1", 1, 0, "on", [True]])
def test_replace_all_that_is_not_a_boolean(value: object) -> None:
    assert error_of({"action": "delete", "old_text": "x", "replace_all": value}).startswith(
        "replace_all must be true or false, got ")


@pytest.mark.parametrize("field", ["content", "old_text", "new_text", "anchor"])
@pytest.mark.parametrize("value", [42, 1.5, True, ["a"], {"a": 1}])
def test_text_arguments_must_be_strings(field: str, value: object) -> None:
    assert error_of({"action": "append", field: value}).startswith(f"{field} must be a string, got ")


def test_an_envelope_with_a_bad_inner_value() -> None:
    assert error_of({"name": "memory", "arguments": [1]}) == "arguments.arguments must be a JSON object"


def test_an_envelope_for_another_tool_is_not_unwrapped() -> None:
    assert error_of({"name": "weather", "arguments": {"action": "read"}}).startswith(
        "Unknown argument(s): 'name', 'arguments'.")


def test_long_bad_values_are_shortened_in_messages() -> None:
    message = error_of({"action": "insert", "content": "x", "line": "n" * 500})
    assert len(message) < 120
    assert message.endswith("…")
