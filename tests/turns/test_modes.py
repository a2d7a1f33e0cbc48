"""Pure parts of the tool-call modes: the structured schema, reply parsing, incremental reply extraction."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import memory_tool_definition
from pyruntime.turns.rounds.modes import (
    ReplyExtractor,
    ToolCallMode,
    native_tool_choice,
    parse_structured_reply,
    structured_schema,
    tool_contract,
)

ROLL: dict[str, Any] = {"type": "function", "function": {
    "name": "roll", "description": "Roll a die.",
    "parameters": {"type": "object", "properties": {"sides": {"type": "integer"}}, "required": ["sides"]}}}


def _extract(text: str, cuts: list[int]) -> tuple[str, list[str]]:
    extractor = ReplyExtractor()
    pieces, start = [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        pieces.append(extractor.feed(text[start:cut]))
        start = cut
    return extractor.text, pieces


@given(
    reply=st.text(),
    args=st.dictionaries(st.sampled_from(["reply", "a", "b"]), st.text(max_size=8), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    ascii_only=st.booleans(),
)
def test_extractor_streams_exactly_the_parsed_reply(reply: str, args: dict, cuts: list[int], ascii_only: bool) -> None:
    # A "reply" key inside tool arguments must not leak into the streamed text.
    doc = json.dumps({"tool_calls": [{"name": "x", "arguments": args}], "reply": reply}, ensure_ascii=ascii_only)
    text, pieces = _extract(doc, [c for c in cuts if c <= len(doc)])
    assert text == json.loads(doc)["reply"]
    assert "".join(pieces) == text


def test_extractor_handles_whitespace_and_reply_first() -> None:
    doc = '{ "reply" : "a\\"b\\n\\u00e9\\ud83d\\ude00" ,\n "tool_calls" : [ ] }'
    text, pieces = _extract(doc, list(range(len(doc))))
    assert text == json.loads(doc)["reply"]
    assert len([p for p in pieces if p]) > 1  # streamed piece by piece


def test_parse_structured_reply() -> None:
    parsed = parse_structured_reply('{"tool_calls":[{"name":"roll","arguments":{"sides":6}}],"reply":"ok"}')
    assert parsed.error is None and parsed.reply == "ok"
    assert [(c.id, c.name, c.parsed_arguments) for c in parsed.tool_calls] == [("call_0", "roll", {"sides": 6})]
    cut = parse_structured_reply('{"tool_calls":[],"reply":"unfinish')
    assert cut.error is not None and "not complete JSON" in cut.error and cut.tool_calls == ()
    assert parse_structured_reply("[1]").error == "the reply is not a JSON object"


def test_structured_schema_has_one_branch_per_tool() -> None:
    memory = memory_tool_definition()
    schema = structured_schema([memory, ROLL], require_call=True)
    calls = schema["properties"]["tool_calls"]
    assert calls["minItems"] == 1 and calls["maxItems"] >= 1
    branches = calls["items"]["anyOf"]
    assert [b["properties"]["name"] for b in branches] == [{"const": "memory"}, {"const": "roll"}]
    assert branches[1]["properties"]["arguments"] == ROLL["function"]["parameters"]
    only = structured_schema([memory, ROLL], require_call=True, only="roll")["properties"]["tool_calls"]["items"]
    assert only["properties"]["name"] == {"const": "roll"}
    assert "minItems" not in structured_schema([ROLL])["properties"]["tool_calls"]


def test_contract_and_tool_choice() -> None:
    assert tool_contract([], ToolCallMode.STRUCTURED) == ""
    contract = tool_contract([memory_tool_definition(), ROLL], ToolCallMode.STRUCTURED)
    assert "- roll(sides): Roll a die." in contract and '"tool_calls"' in contract
    assert "- memory(action, content?," in contract
    assert '"tool_calls"' not in tool_contract([ROLL], ToolCallMode.NATIVE)
    assert native_tool_choice(["roll"], None) is None
    assert native_tool_choice(["roll"], "required") == {"type": "function", "function": {"name": "roll"}}
    assert native_tool_choice(["memory", "roll"], "required") == "required"
    assert native_tool_choice(["memory", "roll"], "roll") == {"type": "function", "function": {"name": "roll"}}
    assert ToolCallMode.parse(" Native ") is ToolCallMode.NATIVE
    with pytest.raises(InvalidArgumentError):
        ToolCallMode.parse("xml")


def test_calls_survive_a_reply_cut_by_max_tokens() -> None:
    text = '{ "tool_calls" : [ {"name": "roll", "arguments": {"sides": 6, "note": "]}"}} ], "reply": "I am rol'
    extractor = ReplyExtractor()
    for char in text:
        extractor.feed(char)
    assert extractor.text == "I am rol"
    assert extractor.tool_calls_json is not None
    assert json.loads(extractor.tool_calls_json) == [{"name": "roll", "arguments": {"sides": 6, "note": "]}"}}]
    parsed = parse_structured_reply(text, tool_calls_json=extractor.tool_calls_json)
    assert parsed.error is not None and [c.parsed_arguments for c in parsed.tool_calls] == [{"sides": 6, "note": "]}"}]
    assert ReplyExtractor().tool_calls_json is None
