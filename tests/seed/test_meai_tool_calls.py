"""CoreAI's `MeaiToolCallsEditModeTests`, memory-tool region, ported: the `memory` tool the model calls.

CoreAI runs these against a dictionary-backed test store; here the tool runs against the in-memory store (the
session-only backend), and where a case names a file-level fact, against the file store. The `new_text` fallback
of `append` is also checked where a developer meets it: the CLI and the C# client.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pyruntime.memory import MemoryTool, list_versions, memory_tool_definition, revert_memory
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore
from tests.seed.conftest import ROLE, memory_path

ROLE_ID = "TestRole"


def seeded(memory: str) -> tuple[InMemoryAgentMemoryStore, MemoryTool]:
    store = InMemoryAgentMemoryStore()
    store.save(ROLE_ID, AgentMemoryState(memory=memory))
    return store, MemoryTool(store, ROLE_ID)


def memory_of(store: InMemoryAgentMemoryStore) -> str:
    result = store.try_load(ROLE_ID)
    assert result.state is not None
    return result.state.memory


def test_memory_tool_create_ai_function_returns_non_null():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_CreateAIFunction_ReturnsNonNull."""
    definition = memory_tool_definition()
    assert definition["type"] == "function" and definition["function"]["name"] == "memory"
    assert definition["function"]["parameters"]["properties"]["action"]["enum"]


def test_memory_tool_execute_async_write_saves_memory():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Write_SavesMemory."""
    store = InMemoryAgentMemoryStore()
    result = MemoryTool(store, ROLE_ID).execute({"action": "write", "content": "Test memory content"})
    assert result.success
    assert memory_of(store) == "Test memory content"


def test_memory_tool_execute_async_append_appends_to_existing():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Append_AppendsToExisting."""
    store, tool = seeded("Line 1")
    assert tool.execute({"action": "append", "content": "Line 2"}).success
    assert "Line 1" in memory_of(store) and "Line 2" in memory_of(store)


def test_memory_tool_execute_async_append_uses_new_text_fallback(cli, tmp_path, csharp_store):
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Append_UsesNewTextFallback.

    `append` takes `content`, or `new_text` when `content` is absent, as `write`, `str_replace` and `rename`
    already did: through the tool, the CLI and the C# client alike.
    """
    from CoreAI.Ai import MemoryToolCall

    store, tool = seeded("Line 1")
    result = tool.execute({"action": "append", "new_text": "Line 2"})
    assert result.success, result.error
    assert memory_of(store) == "Line 1\nLine 2"
    assert tool.execute({"action": "append", "content": "Line 3", "new_text": "ignored"}).success
    assert memory_of(store) == "Line 1\nLine 2\nLine 3"  # content wins when both are sent

    assert cli("memory", "write", "--data-dir", tmp_path, "--role", ROLE, "--content", "Line 1").rc == 0
    run = cli("memory", "append", "--data-dir", tmp_path, "--role", ROLE, "--new-text", "Line 2")
    assert run.rc == 0, run.err
    assert json.loads(memory_path(tmp_path / "CoreAI").read_text(encoding="utf-8"))["memory"] == "Line 1\nLine 2"

    csharp_store.ExecuteMemoryTool(ROLE, MemoryToolCall.Write("Line 1"))
    call = MemoryToolCall()
    call.Action, call.NewText = "append", "Line 2"
    appended = csharp_store.ExecuteMemoryTool(ROLE, call)
    assert appended.Success, appended.Error
    assert appended.Memory == "Line 1\nLine 2"


def test_memory_tool_execute_async_read_returns_current_memory_without_saving(root, new_store):
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Read_ReturnsCurrentMemoryWithoutSaving.

    "Without saving" is checked on the file store: the document file is not rewritten and no version is recorded.
    """
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="Known learner fact"))
    before = os.stat(memory_path(root))
    result = MemoryTool(store, ROLE).execute({"action": "read"})
    assert result.success
    assert (result.memory, result.memory_length) == ("Known learner fact", len("Known learner fact"))
    after = os.stat(memory_path(root))
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert list_versions(store, ROLE) == []


def test_memory_tool_execute_async_clear_removes_memory():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Clear_RemovesMemory.

    Departs: CoreAI's test store removes the role's row. Ours follows the design note's "two levels of clear"
    (contract §2): the model's clear empties the document as a versioned, revertible mutation, so the row stays
    with empty memory and a rollback version; removing the row is the store-level `Clear`.
    """
    store = InMemoryAgentMemoryStore()
    tool = MemoryTool(store, ROLE_ID)
    assert tool.execute({"action": "write", "content": "Old memory"}).success
    assert tool.execute({"action": "clear"}).success
    result = store.try_load(ROLE_ID)
    assert result.status is LoadStatus.LOADED and result.state is not None and result.state.memory == ""
    assert [v.action for v in result.state.versions] == ["write", "clear"]
    assert revert_memory(store, ROLE_ID, 1).success  # the model's clear can be rolled back
    assert memory_of(store) == "Old memory"
    store.clear(ROLE_ID)  # the store-level clear is the one that removes the row
    assert store.try_load(ROLE_ID).status is LoadStatus.NOT_FOUND


def test_memory_tool_execute_async_str_replace_replaces_first_exact_match():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_StrReplace_ReplacesFirstExactMatch."""
    store, tool = seeded("Quest: old\nQuest: old")
    assert tool.execute({"action": "str_replace", "old_text": "old", "new_text": "new"}).success
    assert memory_of(store) == "Quest: new\nQuest: old"


def test_memory_tool_execute_async_insert_adds_content_after_anchor_line():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Insert_AddsContentAfterAnchorLine."""
    store, tool = seeded("Profile:\nFacts:")
    assert tool.execute({"action": "insert", "content": "Mood: wary", "anchor": "Profile:"}).success
    assert memory_of(store) == "Profile:\nMood: wary\nFacts:"


def test_memory_tool_execute_async_delete_removes_first_exact_block():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Delete_RemovesFirstExactBlock."""
    store, tool = seeded("Keep\nDelete me\nKeep\nDelete me")
    assert tool.execute({"action": "delete", "old_text": "Delete me\n"}).success
    assert memory_of(store) == "Keep\nKeep\nDelete me"


def test_memory_tool_execute_async_rename_renames_first_leading_key_label():
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Rename_RenamesFirstLeadingKeyLabel."""
    store, tool = seeded("Profile: calm\nProfile: duplicate")
    assert tool.execute({"action": "rename", "old_text": "Profile", "new_text": "Identity"}).success
    assert memory_of(store) == "Identity: calm\nProfile: duplicate"


def test_memory_tool_execute_async_versioning_revert_restores_prior_snapshot(csharp_store):
    """Ports MeaiToolCallsEditModeTests.MemoryTool_ExecuteAsync_Versioning_RevertRestoresPriorSnapshot.

    Through the store API, and through the C# client's `ListVersions` / `RevertVersion` the design note names.
    """
    from CoreAI.Ai import AgentMemoryStoreExtensions, MemoryToolCall

    store = InMemoryAgentMemoryStore()
    tool = MemoryTool(store, ROLE_ID)
    tool.execute({"action": "write", "content": "Version one"})
    tool.execute({"action": "append", "content": "Version two"})
    versions = list_versions(store, ROLE_ID)
    assert [(v.version, v.content_after) for v in versions][:1] == [(1, "Version one")] and len(versions) == 2
    assert revert_memory(store, ROLE_ID, 1).success
    assert memory_of(store) == "Version one"
    after = list_versions(store, ROLE_ID)
    assert len(after) == 3 and after[2].action == "revert"

    csharp_store.ExecuteMemoryTool(ROLE, MemoryToolCall.Write("Version one"))
    csharp_store.ExecuteMemoryTool(ROLE, MemoryToolCall.Append("Version two"))
    cs_versions: Any = list(AgentMemoryStoreExtensions.ListVersions(csharp_store, ROLE))
    assert [(v.Version, v.ContentAfter) for v in cs_versions] == [(1, "Version one"), (2, "Version one\nVersion two")]
    assert AgentMemoryStoreExtensions.RevertVersion(csharp_store, ROLE, 1).Success
    found, state = csharp_store.TryLoad(ROLE, None)
    assert found and state.Memory == "Version one"
    cs_after = list(csharp_store.ListVersions(ROLE))
    assert len(cs_after) == 3 and cs_after[2].Action == "revert"
