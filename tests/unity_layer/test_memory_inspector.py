"""The memory inspector's model against the real runtime: roles, memory, versions, diff, revert, history."""

from __future__ import annotations

from pathlib import Path


def _wait(task, seconds: float = 30.0):
    from System import TimeSpan

    assert task.Wait(TimeSpan.FromSeconds(seconds)), "the call did not finish"
    return task.GetAwaiter().GetResult()


def test_inspector_shows_memory_versions_history_and_reverts(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Ai import MemoryToolCall
    from CoreAI.EditorTools import MemoryInspectorModel
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.Runtime import CoreAIRuntimeClient

    data_dir = tmp_path / "persistent"
    launcher = RuntimeLauncher(make_options(data_dir))
    launchers.append(launcher)
    endpoint = launcher.Start()
    client = CoreAIRuntimeClient(endpoint.ConnectBaseUrl, endpoint.Token)
    store = client.CreateMemoryStore()
    _wait(store.ExecuteMemoryToolAsync("BlacksmithNPC", MemoryToolCall.Append("Player: Alex")))
    _wait(store.ExecuteMemoryToolAsync("BlacksmithNPC", MemoryToolCall.Append("Owes 3 gold")))
    _wait(store.AppendChatMessageAsync("BlacksmithNPC", "user", "hello smith", True))

    model = MemoryInspectorModel(client, str(data_dir))
    roles = list(_wait(model.ListRolesAsync()))
    assert "BlacksmithNPC" in roles and "Creator" in roles and roles == sorted(roles)

    view = _wait(model.LoadAsync("BlacksmithNPC"))
    assert view.HasMemory and view.Memory == "Player: Alex\nOwes 3 gold"
    assert [v.Version for v in view.Versions] == [1, 2]
    assert [(m.Role, m.Content) for m in view.ChatHistory] == [("user", "hello smith")]

    diff = _wait(model.DiffAsync("BlacksmithNPC", 1, 2))
    assert diff.startswith("--- version 1\n+++ version 2\n") and "+Owes 3 gold" in diff

    result = _wait(model.RevertAsync("BlacksmithNPC", 1))
    assert result.Success
    after = _wait(model.LoadAsync("BlacksmithNPC"))
    assert after.Memory == "Player: Alex"
    assert [v.Action for v in after.Versions][-1] == "revert"

    empty = _wait(model.LoadAsync("NeverUsedRole"))
    assert not empty.HasMemory and empty.Memory == "" and empty.Versions.Count == 0


def test_saved_role_ids_skip_hashed_and_escaped_keys(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import MemoryInspectorModel

    folder = tmp_path / "CoreAI" / "AgentMemory"
    folder.mkdir(parents=True)
    for name in ("Teacher.json", "Teacher.history.jsonl", "Chatty.history.jsonl", "A_B_1a2b3c4d.json",
                 "scope-v1-" + "0" * 64 + ".json", "notes.txt"):
        (folder / name).write_text("{}")
    assert list(MemoryInspectorModel.SavedRoleIds(str(tmp_path))) == ["Chatty", "Teacher"]
    assert list(MemoryInspectorModel.SavedRoleIds(str(tmp_path / "missing"))) == []
