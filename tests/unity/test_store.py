"""The runtime-backed IAgentMemoryStore from C#, against a real runtime over real files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unity.conftest import wait


def _store(client: Any, user: str | None = None, actor: str | None = None) -> Any:
    from CoreAI.Ai import AgentMemoryScope

    store = client.CreateMemoryStore()
    return store.ForScope(AgentMemoryScope.ForUser(user), actor) if user else store


def test_memory_tool_calls_mutate_and_read_back(client: Any, runtime: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    store = _store(client)
    first = store.ExecuteMemoryTool("Teacher", MemoryToolCall.Append("Craft#1: Iron Blade damage:45"))
    assert first.Success and first.Message.startswith("DONE") and first.Version == 1
    store.ExecuteMemoryTool("Teacher", MemoryToolCall.Append("Craft#2: Steel Longsword damage:72"))
    replaced = store.ExecuteMemoryTool("Teacher", MemoryToolCall.StrReplace("damage:45", "damage:50"))
    assert replaced.Success and replaced.Version == 3
    ok, state = store.TryLoad("Teacher", None)
    assert ok and state.Memory == "Craft#1: Iron Blade damage:50\nCraft#2: Steel Longsword damage:72"
    assert [v.Action for v in state.Versions] == ["append", "append", "str_replace"]
    read = store.ExecuteMemoryTool("Teacher", MemoryToolCall.Read())
    assert read.Memory == state.Memory and json.loads(read.ResultJson)["Version"] == 3
    # The file the runtime wrote is the same document.
    on_disk = json.loads((runtime.memory_dir / "Teacher.json").read_text(encoding="utf-8"))
    assert on_disk["memory"] == state.Memory


def test_a_refused_edit_is_a_result_and_changes_nothing(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    store = _store(client)
    store.ExecuteMemoryTool("Teacher", MemoryToolCall.Write("alpha"))
    refused = store.ExecuteMemoryTool("Teacher", MemoryToolCall.StrReplace("missing", "x"))
    assert not refused.Success and "old_text was not found" in refused.Error and "DONE" not in refused.ResultJson
    ok, state = store.TryLoad("Teacher", None)
    assert ok and state.Memory == "alpha" and len(state.Versions) == 1


def test_raw_model_json_is_repaired_like_the_models(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    store = _store(client)
    result = wait(store.ExecuteMemoryToolJsonAsync("Teacher", '{"action": "APPEND", "content": "likes swords"}'))
    assert result.Success
    assert store.ExecuteMemoryTool("Teacher", MemoryToolCall.Read()).Memory == "likes swords"


def test_list_versions_revert_and_diff(client: Any) -> None:
    from CoreAI.Ai import AgentMemoryStoreExtensions, MemoryToolCall

    store = _store(client)
    for text in ("one", "two", "three"):
        store.ExecuteMemoryTool("Teacher", MemoryToolCall.Write(text))
    versions = AgentMemoryStoreExtensions.ListVersions(store, "Teacher")  # the note's store.ListVersions(roleId)
    assert [(v.Version, v.ContentAfter, v.Note) for v in versions] == [
        (1, "one", "chars 0->3 (+3)"), (2, "two", "chars 3->3 (+0)"), (3, "three", "chars 3->5 (+2)")]
    assert all(v.Timestamp > 1_600_000_000 for v in versions)
    reverted = AgentMemoryStoreExtensions.RevertVersion(store, "Teacher", 1)
    assert reverted.Success and reverted.Version == 4
    after = list(store.ListVersions("Teacher"))
    assert (after[-1].Action, after[-1].ContentAfter, after[-1].Note) == ("revert", "one", "Reverted to version 1.")
    diff = wait(store.DiffVersionsAsync("Teacher", 1, 3))
    assert "-one" in diff and "+three" in diff


def test_chat_history_append_read_window_and_clear(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    store = _store(client)
    store.ExecuteMemoryTool("AINpc", MemoryToolCall.Write("remember me"))
    for i in range(4):
        store.AppendChatMessage("AINpc", "user" if i % 2 == 0 else "assistant", f"line {i}")
    assert [m.Content for m in store.GetChatHistory("AINpc")] == ["line 0", "line 1", "line 2", "line 3"]
    newest = store.GetChatHistory("AINpc", 2)
    assert [(m.Role, m.Content) for m in newest] == [("user", "line 2"), ("assistant", "line 3")]
    assert newest[0].Order < newest[1].Order
    store.ClearChatHistory("AINpc")
    assert len(store.GetChatHistory("AINpc")) == 0
    ok, state = store.TryLoad("AINpc", None)
    assert ok and state.Memory == "remember me"  # ClearChatHistory leaves memory alone


def test_store_clear_drops_memory_and_versions_but_keeps_chat(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    store = _store(client)
    store.ExecuteMemoryTool("AINpc", MemoryToolCall.Write("x"))
    store.AppendChatMessage("AINpc", "user", "hello")
    store.Clear("AINpc")
    ok, state = store.TryLoad("AINpc", None)
    assert not ok and state is None
    assert store.ListVersions("AINpc").Count == 0
    assert [m.Content for m in store.GetChatHistory("AINpc")] == ["hello"]


def test_save_replaces_the_whole_state(client: Any) -> None:
    from CoreAI.Ai import AgentMemoryState, AgentMemoryVersion

    store = _store(client)
    state = AgentMemoryState()
    state.Memory = "saved by the game"
    v = AgentMemoryVersion()
    v.Version, v.Timestamp, v.Action, v.ContentAfter, v.Note = 7, 1_700_000_000, "write", "saved by the game", "n"
    state.Versions.Add(v)
    store.Save("Creator", state)
    ok, loaded = store.TryLoad("Creator", None)
    assert ok and loaded.Memory == "saved by the game"
    assert [(x.Version, x.Timestamp) for x in loaded.Versions] == [(7, 1_700_000_000)]


def test_scopes_isolate_two_players(client: Any, runtime: Any) -> None:
    from CoreAI.Ai import MemoryToolCall

    alice, bob, unscoped = _store(client, "alice"), _store(client, "bob"), _store(client)
    alice.ExecuteMemoryTool("AINpc", MemoryToolCall.Write("alice's sword"))
    bob.ExecuteMemoryTool("AINpc", MemoryToolCall.Write("bob's shield"))
    alice.AppendChatMessage("AINpc", "user", "I am Alice")
    assert alice.TryLoad("AINpc", None)[1].Memory == "alice's sword"
    assert bob.TryLoad("AINpc", None)[1].Memory == "bob's shield"
    assert unscoped.TryLoad("AINpc", None)[0] is False
    assert [m.Content for m in alice.GetChatHistory("AINpc")] == ["I am Alice"]
    assert len(bob.GetChatHistory("AINpc")) == 0
    # No raw id reaches a file name: two hashed keys, no "alice"/"bob" anywhere.
    names = sorted(p.name for p in runtime.memory_dir.iterdir())
    assert len([n for n in names if n.startswith("scope-v1-") and n.endswith(".json")]) == 2
    assert not any("alice" in n or "bob" in n for n in names)


def test_a_scope_provider_and_named_actor_pick_the_key_per_call(client: Any) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.Tests import SwitchablePlayerScope

    provider = SwitchablePlayerScope()
    store = client.CreateMemoryStore(provider, None)
    provider.UserId = "p1"
    store.ExecuteMemoryTool("Merchant", MemoryToolCall.Write("p1 owes 5 gold"))
    provider.UserId = "p2"
    assert store.TryLoad("Merchant", None)[0] is False
    provider.UserId = "p1"
    assert store.TryLoad("Merchant", None)[1].Memory == "p1 owes 5 gold"
    npc = client.CreateMemoryStore(provider, "Gorm")
    assert npc.TryLoad("Merchant", None)[0] is False  # an actor has its own key
    local = client.CreateMemoryStore(provider, "local")
    assert local.TryLoad("Merchant", None)[1].Memory == "p1 owes 5 gold"  # "local" is no actor


def test_snapshot_export_import_for_save_slots(client: Any) -> None:
    from CoreAI.Ai import AgentMemoryScope, AgentMemorySnapshot, MemoryToolCall

    slot1 = AgentMemoryScope("game", "alice", "slot-1", "")
    slot2 = AgentMemoryScope("game", "alice", "slot-2", "")
    store = client.CreateMemoryStore()
    s1 = store.ForScope(slot1)
    s1.ExecuteMemoryTool("BlacksmithNPC", MemoryToolCall.Write("forged a blade"))
    s1.AppendChatMessage("BlacksmithNPC", "user", "hi smith")
    from System import Array, String

    snapshot = wait(store.ExportSnapshotAsync(slot1, Array[String](["BlacksmithNPC"]), None))
    assert snapshot.RoleCount == 1 and snapshot.Scope.SessionId == "slot-1"
    saved = snapshot.ToJson()
    assert "forged a blade" in saved
    restored = AgentMemorySnapshot.FromJson(saved)
    assert wait(store.ImportSnapshotAsync(restored, slot2)) == 1
    s2 = store.ForScope(slot2)
    assert s2.TryLoad("BlacksmithNPC", None)[1].Memory == "forged a blade"
    assert [m.Content for m in s2.GetChatHistory("BlacksmithNPC")] == ["hi smith"]
    with pytest.raises(Exception, match="not a snapshot|empty"):
        AgentMemorySnapshot.FromJson("")


def test_forget_player_erases_every_save_of_the_player_and_no_other(client: Any, runtime: Any) -> None:
    from CoreAI.Ai import AgentMemoryScope, MemoryToolCall

    store = client.CreateMemoryStore()
    for session in ("slot-1", "slot-2"):
        alice = store.ForScope(AgentMemoryScope("game", "alice", session, ""), "guard-7")
        alice.ExecuteMemoryTool("BlacksmithNPC", MemoryToolCall.Write("alice's blade"))
        alice.AppendChatMessage("BlacksmithNPC", "user", "I am Alice")
    bob = store.ForScope(AgentMemoryScope("game", "bob", "slot-1", ""))
    bob.ExecuteMemoryTool("BlacksmithNPC", MemoryToolCall.Write("bob's shield"))
    forgotten = wait(store.ForgetPlayerAsync(AgentMemoryScope("game", "alice", "", "")))
    assert forgotten.SavesErased == 2 and forgotten.UnattributedSaves == 0
    assert store.ForScope(AgentMemoryScope("game", "alice", "slot-1", ""), "guard-7").TryLoad("BlacksmithNPC",
                                                                                               None)[0] is False
    assert bob.TryLoad("BlacksmithNPC", None)[1].Memory == "bob's shield"
    written = b"".join(p.read_bytes() for p in runtime.data_dir.rglob("*") if p.is_file())
    assert b"alice" not in written and b"Alice" not in written and b"bob's shield" in written
    with pytest.raises(Exception, match="scope"):
        store.ForgetPlayerAsync(AgentMemoryScope.Empty)
