"""CoreAI → Delete All Persistent Saves...: deletes exactly <persistentDataPath>/CoreAI, never in Play Mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _saves(data_dir: Path) -> None:
    for rel in ("CoreAI/AgentMemory/Teacher.json", "CoreAI/AgentMemory/Teacher.history.jsonl",
                "CoreAI/ConversationSummaries/Teacher.json", "CoreAI/LuaScriptVersions/a.lua",
                "CoreAI/runtime/launcher.json"):
        (data_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (data_dir / rel).write_text("{}")
    # Neighbours that are not CoreAI's and must survive.
    (data_dir / "Unity" / "prefs.json").parent.mkdir(parents=True)
    (data_dir / "Unity" / "prefs.json").write_text("keep")
    (data_dir / "CoreAI.txt").write_text("keep")
    (data_dir / "CoreAIBackup").mkdir()
    (data_dir / "CoreAIBackup" / "x.json").write_text("keep")


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_deletes_exactly_the_coreai_folder(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves

    _saves(tmp_path)
    result = PersistentSaves.DeleteAll(str(tmp_path), False)
    assert result.Deleted and result.FileCount == 5 and not result.StoppedRuntime
    assert _tree(tmp_path) == {"Unity", "Unity/prefs.json", "CoreAI.txt", "CoreAIBackup", "CoreAIBackup/x.json"}


def test_refused_in_play_mode_and_nothing_changes(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves
    from System import InvalidOperationException

    _saves(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(InvalidOperationException) as info:
        PersistentSaves.DeleteAll(str(tmp_path), True)
    assert "Play Mode" in info.value.Message
    assert _tree(tmp_path) == before


def test_no_saves_is_not_an_error(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves

    result = PersistentSaves.DeleteAll(str(tmp_path), False)
    assert not result.Deleted and result.FileCount == 0


@pytest.mark.parametrize("bad", ["", "   ", "relative/path"])
def test_blank_or_relative_path_is_refused(assemblies, bad: str) -> None:
    from CoreAI.EditorTools import PersistentSaves
    from System import ArgumentException

    with pytest.raises(ArgumentException):
        PersistentSaves.DeleteAll(bad, False)


def test_a_linked_coreai_folder_loses_the_link_not_its_target(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    data_dir = tmp_path / "persistent"
    data_dir.mkdir()
    os.symlink(elsewhere, data_dir / "CoreAI")
    assert PersistentSaves.DeleteAll(str(data_dir), False).Deleted
    assert not (data_dir / "CoreAI").exists() and (elsewhere / "precious.txt").read_text() == "keep"


def test_menu_asks_first_and_is_disabled_in_play_mode(assemblies, tmp_path: Path) -> None:
    from CoreAI.EditorTools import DeleteSavesMenu
    from UnityEditor import EditorApplication, StubDialogs
    from UnityEngine import StubState

    _saves(tmp_path)
    StubState.PersistentDataPath = str(tmp_path)
    try:
        EditorApplication.isPlaying = True
        assert DeleteSavesMenu.CanDeleteAllPersistentSaves() is False
        StubDialogs.Answer = True
        assert DeleteSavesMenu.DeleteAllPersistentSaves() is False
        assert (tmp_path / "CoreAI").is_dir()

        EditorApplication.isPlaying = False
        assert DeleteSavesMenu.CanDeleteAllPersistentSaves() is True
        StubDialogs.Answer = False  # Cancel
        assert DeleteSavesMenu.DeleteAllPersistentSaves() is False
        assert (tmp_path / "CoreAI").is_dir()
        for name in ("AgentMemory", "ConversationSummaries", "LuaScriptVersions", "DataOverlayVersions"):
            assert name in StubDialogs.LastMessage

        StubDialogs.Answer = True
        assert DeleteSavesMenu.DeleteAllPersistentSaves() is True
        assert not (tmp_path / "CoreAI").exists() and (tmp_path / "Unity" / "prefs.json").exists()
    finally:
        EditorApplication.isPlaying = False
        StubDialogs.Answer = False
        StubState.PersistentDataPath = ""


def test_a_running_runtime_is_stopped_before_its_files_go(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves
    from CoreAI.Launcher import RuntimeLauncher

    from tests.unity_layer.processes import is_alive, wait_for

    data_dir = tmp_path / "persistent"
    launcher = RuntimeLauncher(make_options(data_dir))
    launchers.append(launcher)
    pid = launcher.Start().ProcessId
    launcher.Detach()  # edit mode after play: the runtime is only recorded
    result = PersistentSaves.DeleteAll(str(data_dir), False)
    assert result.Deleted and result.StoppedRuntime
    wait_for(lambda: not is_alive(pid), 15, "the runtime to exit")
    assert not (data_dir / "CoreAI").exists()
