"""The `memory` tool over a real in-memory store: results, versions, limits, and bad input that changes nothing."""

from __future__ import annotations

import json

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import (
    MEMORY_TOOL_NAME,
    AgentMemoryState,
    MemoryTool,
    MemoryToolAction,
    MemoryToolResult,
    list_versions,
    memory_tool_definition,
)
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from tests.support.loads import loaded

from .conftest import KEY, NOW, StepClock


def state_of(store: InMemoryAgentMemoryStore, key: str = KEY) -> AgentMemoryState:
    return loaded(store.try_load(key))


# -- result format -----------------------------------------------------------------------------


def test_result_json_is_compact_in_spec_order() -> None:
    ok = MemoryToolResult.succeeded("read memory.", "Ünï \"q\"\nline", 3)
    assert ok.to_json() == (
        '{"Success":true,"Message":"DONE: read memory.","Error":null,"Version":3,'
        '"MemoryLength":12,"Memory":"Ünï \\"q\\"\\nline"}'
    )
    failed = MemoryToolResult.failed("old_text was not found in memory", version=2, memory_length=7)
    assert failed.to_json() == (
        '{"Success":false,"Message":null,"Error":"old_text was not found in memory","Version":2,'
        '"MemoryLength":7,"Memory":null}'
    )


def test_a_failure_can_never_spell_done() -> None:
    assert MemoryToolResult.failed("model said DONE twice: DONE").error == "model said Done twice: Done"
    with pytest.raises(ValueError):
        MemoryToolResult(False, None, "DONE", 0, 0, None)
    with pytest.raises(ValueError):
        MemoryToolResult(True, "ok", None, 0, 0, "")


# -- definition --------------------------------------------------------------------------------


def test_definition_is_an_openai_function_tool_with_the_spec_schema() -> None:
    definition = memory_tool_definition()
    assert definition["type"] == "function"
    function = definition["function"]
    assert function["name"] == MEMORY_TOOL_NAME == "memory"
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["action"]
    assert parameters["additionalProperties"] is False
    properties = parameters["properties"]
    assert list(properties) == ["action", "content", "old_text", "new_text", "anchor", "line", "replace_all"]
    assert properties["action"]["enum"] == ["read", "write", "append", "clear", "str_replace", "insert", "delete",
                                            "rename"]
    assert {name: spec["type"] for name, spec in properties.items()} == {
        "action": "string", "content": "string", "old_text": "string", "new_text": "string", "anchor": "string",
        "line": "integer", "replace_all": "boolean"}
    assert "title" not in json.dumps(parameters)
    assert function["description"].endswith("Preferred action for this role: append.")


def test_definition_is_byte_stable_and_names_the_default_action() -> None:
    first = json.dumps(memory_tool_definition())
    memory_tool_definition()["function"]["parameters"]["properties"].clear()  # callers may not spoil the cache
    assert json.dumps(memory_tool_definition()) == first
    assert json.dumps(memory_tool_definition(MemoryToolAction.Append)) == first
    write = memory_tool_definition(MemoryToolAction.StrReplace)
    assert write["function"]["description"].endswith("Preferred action for this role: str_replace.")
    assert write["function"]["parameters"] == json.loads(first)["function"]["parameters"]


def test_action_enum_has_the_spec_members_and_wire_names() -> None:
    assert [(a.name, a.wire_name) for a in MemoryToolAction] == [
        ("Write", "write"), ("Append", "append"), ("Clear", "clear"), ("StrReplace", "str_replace"),
        ("Insert", "insert"), ("Delete", "delete"), ("Rename", "rename")]
    assert MemoryToolAction.parse(" strreplace ") is MemoryToolAction.StrReplace
    assert MemoryToolAction.parse("str_replace") is MemoryToolAction.StrReplace
    with pytest.raises(ValueError, match="Unknown default memory action: 'read'"):
        MemoryToolAction.parse("read")


# -- actions through the tool ------------------------------------------------------------------


def test_read_of_a_missing_document_is_empty_version_zero(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    result = tool.execute({"action": "read"})
    assert result.to_json() == ('{"Success":true,"Message":"DONE: memory is empty (version 0).","Error":null,'
                                '"Version":0,"MemoryLength":0,"Memory":""}')
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_write_records_version_one(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    result = tool.execute('{"action":"write","content":"hello world"}')
    assert result.to_json() == (
        '{"Success":true,"Message":"DONE: write: memory written. Memory is 11 chars, version 1.","Error":null,'
        '"Version":1,"MemoryLength":11,"Memory":"hello world"}')
    [version] = list_versions(store, KEY)
    assert (version.version, version.timestamp, version.action, version.content_after, version.note) == (
        1, int(NOW), "write", "hello world", "chars 0->11 (+11)")


def test_read_returns_the_document_and_newest_version(tool: MemoryTool) -> None:
    tool.execute({"action": "write", "content": "a"})
    tool.execute({"action": "append", "content": "b"})
    result = tool.execute({"action": " READ "})
    assert (result.success, result.memory, result.version, result.memory_length) == (True, "a\nb", 2, 3)
    assert result.message == "DONE: read memory (3 chars, version 2)."


def test_every_action_through_the_tool(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    steps = [
        ({"action": "write", "content": "Crafts:\nCraft#1: Iron Blade damage:45"},
         "Crafts:\nCraft#1: Iron Blade damage:45"),
        ({"action": "append", "content": "Craft#2: Steel Longsword damage:72"},
         "Crafts:\nCraft#1: Iron Blade damage:45\nCraft#2: Steel Longsword damage:72"),
        ({"action": "str_replace", "old_text": "damage:45", "new_text": "damage:50"},
         "Crafts:\nCraft#1: Iron Blade damage:50\nCraft#2: Steel Longsword damage:72"),
        ({"action": "insert", "anchor": "Crafts:", "content": "Craft#3: Frost Axe damage:61"},
         "Crafts:\nCraft#3: Frost Axe damage:61\nCraft#1: Iron Blade damage:50\nCraft#2: Steel Longsword damage:72"),
        ({"action": "insert", "line": "1", "content": "# Notes"},
         "# Notes\nCrafts:\nCraft#3: Frost Axe damage:61\nCraft#1: Iron Blade damage:50\n"
         "Craft#2: Steel Longsword damage:72"),
        ({"action": "delete", "old_text": "\nCraft#3: Frost Axe damage:61"},
         "# Notes\nCrafts:\nCraft#1: Iron Blade damage:50\nCraft#2: Steel Longsword damage:72"),
        ({"action": "rename", "old_text": "Crafts", "new_text": "Craft History"},
         "# Notes\nCraft History:\nCraft#1: Iron Blade damage:50\nCraft#2: Steel Longsword damage:72"),
        ({"action": "str_replace", "old_text": "Craft#", "new_text": "#", "replace_all": "true"},
         "# Notes\nCraft History:\n#1: Iron Blade damage:50\n#2: Steel Longsword damage:72"),
        ({"action": "clear"}, ""),
    ]
    for number, (arguments, expected) in enumerate(steps, start=1):
        result = tool.execute(arguments)
        assert result.success, (arguments, result.error)
        assert result.message is not None and result.message.startswith(f"DONE: {arguments['action']}: ")
        assert (result.memory, result.version, result.memory_length) == (expected, number, len(expected))
        assert state_of(store).memory == expected
    assert [v.action for v in list_versions(store, KEY)] == [
        "write", "append", "str_replace", "insert", "insert", "delete", "rename", "str_replace", "clear"]


def test_append_of_existing_content_records_no_version(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    tool.execute({"action": "append", "content": "likes apples"})
    before = state_of(store)
    result = tool.execute({"action": "append", "content": "  likes apples  "})
    assert result.success is True
    assert result.message == ("DONE: content already exists in memory; nothing was added. "
                              "Memory is 12 chars, version 1.")
    assert state_of(store) == before


def test_an_unchanged_mutation_records_no_version(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    tool.execute({"action": "write", "content": "same"})
    result = tool.execute({"action": "write", "content": "same"})
    assert result.success and result.version == 1
    assert result.message is not None and "no version was recorded" in result.message
    assert len(list_versions(store, KEY)) == 1
    # clear of an empty, never-written document creates nothing.
    other = MemoryTool(store, "Other")
    assert other.execute({"action": "clear"}).success
    assert store.try_load("Other").status is LoadStatus.NOT_FOUND


def test_clear_leaves_chat_history_alone(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    tool.execute({"action": "write", "content": "fact"})
    store.append_chat_message(KEY, "user", "hi")
    result = tool.execute({"action": "clear"})
    assert (result.success, result.memory, result.version) == (True, "", 2)
    assert [m.content for m in store.get_chat_history(KEY)] == ["hi"]
    assert list_versions(store, KEY)[-1].note == "chars 4->0 (-4)"


# -- bad input changes nothing -----------------------------------------------------------------

BAD_CALLS = [
    ({"action": "x"}, "Unknown action: 'x'. Valid actions: read, write, append, clear, str_replace, insert, delete, "
                      "rename"),
    ({"action": "str_replace", "new_text": "y"}, "old_text is required for str_replace action"),
    ({"action": "str_replace", "old_text": "missing", "new_text": "y"}, "old_text was not found in memory"),
    ({"action": "delete", "old_text": "Fact one"}, "old_text was not found in memory"),
    ({"action": "insert", "content": "x", "line": 0}, "line must be a 1-based positive line number"),
    ({"action": "insert", "content": "x", "line": "-2"}, "line must be a 1-based positive line number"),
    ({"action": "insert", "content": "x", "anchor": "nowhere"}, "anchor was not found in memory"),
    ({"action": "write", "content": ""}, "content is required for write action"),
    ({"action": "append"}, "content is required for append action"),
    ({"action": "rename", "old_text": "fact"}, "new_text is required for rename action"),
    ({"action": "append", "content": "x", "colour": "red"}, "Unknown argument(s): 'colour'."),
    ({"action": "insert", "content": "x", "line": "two"}, "line must be an integer"),
    ({"action": "delete", "old_text": "x", "replace_all": "sometimes"}, "replace_all must be true or false"),
    ({"action": "append", "content": 5}, "content must be a string"),
    ("{not json", "arguments are not valid JSON"),
    ("[]", "arguments must be a JSON object, got an array"),
    ("", "arguments are empty"),
    ('{"action": "DONE"}', "Unknown action: 'done'."),
]


@pytest.mark.parametrize(("arguments", "error"), BAD_CALLS)
def test_bad_calls_fail_specifically_and_change_nothing(tool: MemoryTool, store: InMemoryAgentMemoryStore,
                                                        arguments: object, error: str) -> None:
    tool.execute({"action": "write", "content": "fact one\nfact two"})
    store.append_chat_message(KEY, "user", "hello")
    before = (state_of(store), store.get_chat_history(KEY), store.get_transcript(KEY))
    result = tool.execute(arguments)  # type: ignore[arg-type]  # a model's bad call: not always the declared types
    assert result.success is False
    assert result.error is not None and result.error.startswith(error)
    assert result.message is None and result.memory is None
    assert "DONE" not in result.to_json()
    assert (state_of(store), store.get_chat_history(KEY), store.get_transcript(KEY)) == before


def test_a_failure_reports_the_unchanged_document_when_it_was_read(tool: MemoryTool) -> None:
    tool.execute({"action": "write", "content": "fact one"})
    result = tool.execute({"action": "delete", "old_text": "fact 1"})
    assert (result.version, result.memory_length) == (1, 8)
    assert result.error is not None
    assert result.error.startswith('old_text was not found in memory. Closest existing lines: ["fact one"]')
    # Arguments that never reached the store report nothing about it.
    assert (tool.execute("oops").version, tool.execute("oops").memory_length) == (0, 0)


def test_a_bad_call_on_a_missing_document_creates_nothing(tool: MemoryTool, store: InMemoryAgentMemoryStore) -> None:
    assert tool.execute({"action": "str_replace", "old_text": "a", "new_text": "b"}).success is False
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_the_tool_refuses_a_blank_key_or_negative_limit(store: InMemoryAgentMemoryStore) -> None:
    with pytest.raises(InvalidArgumentError, match="key is required"):
        MemoryTool(store, "  ")
    with pytest.raises(InvalidArgumentError, match="max_memory_chars"):
        MemoryTool(store, KEY, max_memory_chars=-1)


# -- MaxMemoryChars ----------------------------------------------------------------------------


def test_max_memory_chars_refuses_growth_past_the_limit(store: InMemoryAgentMemoryStore, clock: StepClock) -> None:
    tool = MemoryTool(store, KEY, max_memory_chars=20, clock=clock)
    assert tool.execute({"action": "write", "content": "x" * 20}).success  # exactly the limit is fine
    before = state_of(store)
    result = tool.execute({"action": "append", "content": "y"})
    assert result.success is False
    assert result.error is not None
    assert result.error.startswith("memory would be 22 chars, over the limit of 20 chars (MaxMemoryChars)")
    assert (result.version, result.memory_length) == (1, 20)
    assert state_of(store) == before


def test_max_memory_chars_default_is_16000(store: InMemoryAgentMemoryStore) -> None:
    tool = MemoryTool(store, KEY)
    assert tool.max_memory_chars == 16000
    assert tool.execute({"action": "write", "content": "x" * 16000}).success
    refused = tool.execute({"action": "append", "content": "y"})
    assert refused.error is not None and "limit of 16000 chars" in refused.error


def test_max_memory_chars_zero_is_unlimited(store: InMemoryAgentMemoryStore) -> None:
    tool = MemoryTool(store, KEY, max_memory_chars=0)
    assert tool.execute({"action": "write", "content": "x" * 100_000}).memory_length == 100_000


def test_an_oversized_document_can_still_shrink(store: InMemoryAgentMemoryStore) -> None:
    store.save(KEY, AgentMemoryState(memory="a" * 30 + "b" * 10))
    tool = MemoryTool(store, KEY, max_memory_chars=20)
    result = tool.execute({"action": "delete", "old_text": "b" * 10})
    assert (result.success, result.memory_length) == (True, 30)
    assert tool.execute({"action": "str_replace", "old_text": "a", "new_text": "aa"}).success is False


def test_the_tool_runs_through_the_scoped_decorator_with_isolated_players(store: InMemoryAgentMemoryStore) -> None:
    summaries = InMemoryConversationSummaryStore()
    alice = ScopedAgentMemoryStore(store, summaries, AgentMemoryScope(user_id="alice"))
    bob = ScopedAgentMemoryStore(store, summaries, AgentMemoryScope(user_id="bob"))
    assert MemoryTool(alice, "AINpc").execute({"action": "append", "content": "alice likes swords"}).success
    assert MemoryTool(bob, "AINpc").execute({"action": "read"}).memory == ""
    assert MemoryTool(alice, "AINpc").execute({"action": "read"}).memory == "alice likes swords"
    assert state_of(store, alice.key("AINpc")).memory == "alice likes swords"
