"""Deeply nested JSON from a client or from the model is a tool error the model sees, never a failed turn."""

from __future__ import annotations

import asyncio
import json

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.jsonlimits import MAX_JSON_DEPTH, nesting_depth, value_depth
from pyruntime.memory import parse_memory_tool_arguments
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.memory.tool import MemoryTool
from pyruntime.model.client.types import ToolCall
from pyruntime.stores import InMemoryAgentMemoryStore
from pyruntime.turns.rounds.modes import parse_structured_reply
from pyruntime.turns.rounds.registry import ToolContext
from pyruntime.turns.rounds.rules import MemoryToolAdapter

DEEP = 1000


def deep_arguments(depth: int = DEEP) -> str:
    return '{"action": "append", "content": ' + "[" * depth + "]" * depth + "}"


def test_depth_is_counted_without_parsing_and_strings_do_not_count() -> None:
    assert nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert nesting_depth('"\\"[[["') == 0
    assert nesting_depth("[" * 100000) == MAX_JSON_DEPTH + 1  # stops counting early
    assert value_depth({"a": [[{"b": 1}]]}) == 4


@pytest.mark.parametrize("raw", [deep_arguments(), json.dumps(deep_arguments()), deep_arguments(MAX_JSON_DEPTH)])
def test_deep_arguments_are_refused_with_a_clear_error(raw: str) -> None:
    with pytest.raises(InvalidArgumentError, match="nesting deeper than"):
        parse_memory_tool_arguments(raw)


def test_deep_already_parsed_arguments_are_refused() -> None:
    value: object = []
    for _ in range(200):
        value = [value]
    with pytest.raises(InvalidArgumentError, match="nesting deeper than"):
        parse_memory_tool_arguments({"action": "append", "content": value})


def test_the_memory_tool_returns_a_failure_and_writes_nothing() -> None:
    store = InMemoryAgentMemoryStore()
    result = MemoryTool(store, "Teacher").execute(deep_arguments())
    assert not result.success and result.error is not None and "nesting deeper than" in result.error
    assert store.try_load("Teacher").state is None


def test_a_models_deep_tool_call_reaches_the_model_as_a_tool_error() -> None:
    call = ToolCall.from_raw("call_0", "memory", deep_arguments())  # used to raise RecursionError: the turn failed
    assert call.parsed_arguments is None and "nest deeper than" in (call.arguments_error or "")
    store = InMemoryAgentMemoryStore()
    adapter = MemoryToolAdapter(MemoryTool(store, "Teacher"), MemoryToolAction.Append)
    outcome = asyncio.run(adapter.run(call, ToolContext("Teacher")))
    assert outcome.success is False and "nesting deeper than" in json.loads(outcome.content)["Error"]
    assert store.try_load("Teacher").state is None


def test_a_deep_structured_reply_is_a_reply_error_not_an_exception() -> None:
    reply = '{"tool_calls": [{"name": "memory", "arguments": ' + "[" * DEEP + "]" * DEEP + '}], "reply": "hi"}'
    parsed = parse_structured_reply(reply)
    assert parsed.tool_calls == () and "deeper than" in (parsed.error or "")
    assert parse_structured_reply('{"reply": "ok", "tool_calls": []}').reply == "ok"  # normal replies unchanged
