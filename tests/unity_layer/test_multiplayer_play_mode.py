"""Unity 6 Multiplayer Play Mode and what a game's lifecycle asks of the bootstrap: a virtual player (a second editor
running the project's clone from Library/VP/<id>/) is the same project with its own memory scope and shares the main
editor's runtime; the bootstrap runs before the game's scripts; quitting holds the main thread only briefly, even when
the
runtime hangs; a player's first-launch download can be cancelled (nothing kept) and survives quitting (paused)."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.file_server import FileServer, Served
from tests.support.tiny_model import write_tiny_model
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import is_alive, wait_for
from tests.unity_layer.test_bootstrap import _bootstrap, _call, _settings, _until_ready


def _project(tmp_path: Path) -> tuple[Path, str]:
    main = tmp_path / "My Game"
    (main / "Assets").mkdir(parents=True)
    clone = main / "Library" / "VP" / "mppm2a5b" / "Assets"
    clone.mkdir(parents=True)
    return main, str(clone)


def test_a_virtual_player_is_its_main_project(scenarios, tmp_path: Path) -> None:
    from CoreAI.UnityIntegration import ProjectIdentity, ProjectPaths
    from UnityEngine import StubState

    main, clone = _project(tmp_path)
    StubState.ProductName = "My Game"
    try:
        StubState.DataPath = str(main / "Assets")
        main_id, main_root, main_player = ProjectIdentity.Current(), ProjectPaths.Root(), ProjectPaths.VirtualPlayerId()
        StubState.DataPath = clone
        assert ProjectIdentity.Current() == main_id, "one project: one identity, one runtime"
        assert ProjectPaths.Root() == main_root == str(main)
        assert main_player is None and ProjectPaths.VirtualPlayerId() == "mppm2a5b"
        StubState.DataPath = "C:/Users/Jo/My Game/Library/VP/p2/Assets"  # Unity's forward slashes on Windows
        assert ProjectPaths.VirtualPlayerId() == "p2"
        other = tmp_path / "Other" / "Assets"
        StubState.DataPath = str(other)
        assert ProjectIdentity.Current() != main_id and ProjectPaths.VirtualPlayerId() is None
    finally:
        StubState.DataPath, StubState.ProductName = "", "StubProduct"


def test_a_virtual_player_starts_the_same_runtime_with_its_own_memory_scope(scenarios, tiny_model: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    from UnityEngine import StubState

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    main, clone = _project(tmp_path)
    (main / "CoreAIModels").mkdir()
    (main / "CoreAIModels" / "npc.gguf").write_bytes(tiny_model.read_bytes())
    settings = _settings(tiny_model)
    settings.ModelPath = "CoreAIModels/npc.gguf"  # relative: the main project's file, also from the clone
    StubState.PersistentDataPath = str(tmp_path / "persistent")  # one company and product: one persistentDataPath
    StubState.IsPlaying, StubState.IsEditor = True, True
    try:
        StubState.DataPath = str(main / "Assets")
        main_editor = _bootstrap(settings)
        ready: list = []
        main_editor.RuntimeReady += lambda endpoint: ready.append(endpoint.ProcessId)
        main_editor.StartRuntime()
        _until_ready(main_editor, ready)
        client = main_editor.CreateClient()
        assert client.GameHost.DefaultScope is None, "the main editor keeps the game's own (empty) scope"
        client.Dispose()
        _call(main_editor, "OnApplicationQuit")  # Stop in the main editor: the runtime stays for the next Play

        StubState.DataPath = clone  # the virtual player's editor
        player = _bootstrap(settings)
        seen: list = []
        player.RuntimeReady += lambda endpoint: seen.append(endpoint.ProcessId)
        player.StartRuntime()
        _until_ready(player, seen)
        assert seen == ready and player.Launcher.Reused, "the virtual player shares the main editor's runtime"
        client = player.CreateClient()
        scope = client.GameHost.DefaultScope
        assert scope.UserId == "virtual-player-mppm2a5b"
        assert client.CreateOrchestrator() is not None
        client.Dispose()
        from CoreAI.Ai import AgentMemoryPersistenceMode

        settings.PersistenceMode = AgentMemoryPersistenceMode.SessionOnly
        _call(player, "OnApplicationQuit")  # a virtual player never stops the shared runtime, Session Only or not
        assert is_alive(ready[0])
    finally:
        from CoreAI.Launcher import RuntimeLauncher
        from System import TimeSpan

        RuntimeLauncher.StopRecorded(str(tmp_path / "persistent"), TimeSpan.FromSeconds(10))
        StubState.IsPlaying, StubState.IsEditor, StubState.DataPath, StubState.PersistentDataPath = False, False, "", ""


def test_the_bootstrap_runs_before_the_games_scripts(scenarios, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import BootstrapReader
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEngine import GameObject, StubEngine, StubState

    StubEngine.DestroyEverything()
    StubState.IsPlaying = True
    try:
        scene = GameObject("Scene")
        reader = scene.AddComponent[BootstrapReader]()  # added first: without the execution order it would run first
        bootstrap = scene.AddComponent[CoreAIRuntimeBootstrap]()
        StubEngine.StartScene()
        assert reader.SeenInAwake is not None and reader.SeenInAwake == bootstrap
    finally:
        StubEngine.DestroyEverything()
        StubState.IsPlaying = False


def test_quitting_a_player_holds_the_main_thread_briefly_even_when_the_runtime_hangs(scenarios, tiny_model: Path,
                                                                                     tmp_path: Path,
                                                                                     monkeypatch) -> None:
    from UnityEngine import StubState

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    StubState.PersistentDataPath, StubState.DataPath = str(tmp_path / "persistent"), str(tmp_path / "Game_Data")
    StubState.IsPlaying, StubState.IsEditor = True, False
    settings = _settings(tiny_model)
    bootstrap = _bootstrap(settings)
    ready: list = []
    bootstrap.RuntimeReady += lambda endpoint: ready.append(endpoint.ProcessId)
    try:
        bootstrap.StartRuntime()
        _until_ready(bootstrap, ready)
        pid = ready[0]
        os.kill(pid, signal.SIGSTOP)  # hung: it answers neither the Shutdown call nor SIGTERM
        started = time.monotonic()
        _call(bootstrap, "OnApplicationQuit")
        held = time.monotonic() - started
        assert held < 8, f"the last frame waited {held:.1f} s (the graceful stop alone may take 10)"
        wait_for(lambda: not is_alive(pid), 10, "the hung runtime to be killed")
    finally:
        StubState.IsPlaying, StubState.DataPath, StubState.PersistentDataPath = False, "", ""


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()


@pytest.mark.parametrize("how", ["cancelled", "quit"])
def test_a_first_launch_download_can_be_cancelled_and_survives_quitting(scenarios, gguf: bytes, tmp_path: Path,
                                                                        how: str) -> None:
    from CoreAI.Downloads import DownloadException, DownloadFailure
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEngine import ScriptableObject, StubState

    server = FileServer({"/cdn/npc.gguf": Served(gguf, chunk=4 * 1024, delay_s=0.05)})
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.ModelName = "first-launch-npc"
    settings.DownloadModelOnFirstLaunch = True
    settings.ModelDownloadUrl = server.url("/cdn/npc.gguf")
    settings.ModelDownloadSha256 = hashlib.sha256(gguf).hexdigest()
    persistent = tmp_path / "persistent"
    StubState.PersistentDataPath, StubState.DataPath = str(persistent), str(tmp_path / "Game_Data")
    StubState.IsPlaying, StubState.IsEditor = True, False
    bootstrap = _bootstrap(settings)
    failed: list = []
    bootstrap.RuntimeFailed += lambda error: failed.append(error)
    partial = persistent / "CoreAI" / "models" / ".partial" / "first-launch-npc.gguf.partial"
    try:
        start = bootstrap.StartRuntime()
        wait_for(lambda: partial.exists() and partial.stat().st_size > 0, 30, "the download to begin")
        if how == "cancelled":
            bootstrap.CancelModelDownload()
        else:
            _call(bootstrap, "OnApplicationQuit")

        def ended() -> bool:
            _call(bootstrap, "Update")
            return start.IsCompleted

        wait_for(ended, 30, "the start to end")
        error = start.Exception.GetBaseException()
        assert isinstance(error, DownloadException)
        models = persistent / "CoreAI" / "models"
        left = sorted(p.name for p in models.rglob("*") if p.is_file())
        if how == "cancelled":
            assert error.Kind == DownloadFailure.Cancelled and left == [], "a cancelled download keeps nothing"
            _call(bootstrap, "Update")
            assert failed and failed[0].Kind == DownloadFailure.Cancelled
        else:
            assert error.Kind == DownloadFailure.Paused and error.Resumable, "resumed next launch"
            assert left == ["first-launch-npc.gguf.partial", "first-launch-npc.gguf.partial.json"], (
                "the bytes and their record")
            assert not failed, "quitting is not a failure to report"
    finally:
        server.close()
        StubState.IsPlaying, StubState.DataPath, StubState.PersistentDataPath = False, "", ""
