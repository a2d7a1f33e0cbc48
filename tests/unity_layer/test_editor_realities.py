"""The Unity layer and the editor tools where a real editor differs from a compiler, under the
stub engine that enforces Unity's rules:

- the Memory Inspector connects although Unity's API may only be read on the main thread;
- every editor tool picks the same settings asset;
- WebGL is refused up front (its transport does not exist there) instead of promised;
- Session Only data does not survive Stop/Play; a duplicate bootstrap removes only itself; Keep Across Scenes works
  for a bootstrap under another object;
- remote mode gets Android's INTERNET permission and iOS's local-network text.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.unity_layer.conftest import PYTHON, free_ports
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import is_alive, tree, wait_for


def _field(target: Any, name: str) -> Any:
    from System.Reflection import BindingFlags

    return target.GetType().GetField(name, BindingFlags.Instance | BindingFlags.NonPublic).GetValue(target)


@pytest.fixture
def editor(scenarios: Path, tmp_path: Path, monkeypatch):
    """A fresh editor in Edit Mode (a domain reload drops earlier tests' static state), assets cleared after."""
    from UnityEditor import StubAssets, StubDomain, StubEditorState, StubPlayMode
    from UnityEngine import StubEngine, StubLog, StubState

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # a launched runtime imports this checkout
    StubState.IsEditor, StubState.IsPlaying, StubEditorState.IsPlaying = True, False, False
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.DataPath = str(tmp_path / "Project" / "Assets")
    StubLog.Clear()
    StubEngine.DestroyEverything()  # a new, empty scene
    StubDomain.Reload()
    yield tmp_path / "persistent"
    if StubState.IsPlaying:
        StubPlayMode.Exit()
    for window in list(StubEditorState.Windows):
        window.Close()
    StubAssets.ByPath.Clear()
    StubState.IsEditor = False
    from CoreAI.Launcher import RuntimeLauncher
    from System import TimeSpan

    RuntimeLauncher.StopRecorded(str(tmp_path / "persistent"), TimeSpan.FromSeconds(10))


def _settings(tiny_model: Path, **values: Any) -> Any:
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RuntimeProgram = RuntimeProgram.PythonEnvironment
    settings.RuntimePath = str(PYTHON)
    settings.ModelPath = str(tiny_model)
    settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
    settings.StartTimeoutSeconds = 90
    for name, value in values.items():
        setattr(settings, name, value)
    return settings


def test_the_memory_inspector_connects_reading_unity_only_on_the_main_thread(editor: Path, tiny_model: Path) -> None:
    from CoreAI.EditorTools import MemoryInspectorWindow
    from UnityEditor import EditorWindow, StubAssets
    from UnityEngine import StubEngine, StubGUI

    StubAssets.ByPath["Assets/Settings/CoreAIRuntimeSettings.asset"] = _settings(tiny_model)
    exceptions = len(StubEngine.UnhandledExceptions)
    window = EditorWindow.GetWindow[MemoryInspectorWindow]("CoreAI Memory")
    StubGUI.Click("Connect")
    StubEngine.Send(window, "OnGUI")  # the button is clicked on the main thread; the work goes on elsewhere

    def connected() -> bool:
        StubEngine.Send(window, "OnInspectorUpdate")  # the editor's ~10 Hz tick drains the window's queue
        status = _field(window, "status")
        assert not status.startswith("Error"), status
        return status.startswith("Started a runtime") or status.startswith("Connected")

    wait_for(connected, 120, "the inspector to connect")
    roles = list(_field(window, "roles"))
    assert "Creator" in roles
    assert len(StubEngine.UnhandledExceptions) == exceptions


def test_every_editor_tool_takes_the_same_settings_asset(editor: Path, tiny_model: Path) -> None:
    from CoreAI.EditorTools import ProjectSettingsAsset, RuntimeBuildStep
    from UnityEditor import StubAssets
    from UnityEngine import StubLog

    later, first = _settings(tiny_model), _settings(tiny_model)
    StubAssets.ByPath["Assets/Z/CoreAIRuntimeSettings.asset"] = later
    StubAssets.ByPath["Assets/A/CoreAIRuntimeSettings.asset"] = first
    assert ProjectSettingsAsset.Find().Equals(first)
    assert RuntimeBuildStep.FindSettings().Equals(first)
    assert any("2 CoreAIRuntimeSettings assets" in line and "Assets/A/CoreAIRuntimeSettings.asset" in line
               for line in StubLog.Lines)


def test_webgl_is_refused_up_front_even_with_a_remote_url(editor: Path, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLaunchFailure
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap, CoreAIRuntimeSettings
    from UnityEngine import GameObject, RuntimePlatform, ScriptableObject, StubState

    StubState.Platform, StubState.IsPlaying, StubState.IsEditor = RuntimePlatform.WebGLPlayer, True, False
    StubState.PersistentDataPath = str(tmp_path)
    try:
        settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
        settings.RemoteUrl, settings.RemoteToken = "https://runtime.example:13335", "remote-token-0123456789"
        bootstrap = GameObject("CoreAI").AddComponent[CoreAIRuntimeBootstrap]()
        bootstrap.Settings = settings
        task = bootstrap.StartRuntime()
        assert task.IsFaulted, "no connection is even attempted: HttpWebRequest does not exist in a browser"
        error = task.Exception.GetBaseException()
        assert error.Failure == RuntimeLaunchFailure.PlatformUnsupported
        assert "WebGLPlayer is not supported" in error.Message
        assert bootstrap.Remote is None
    finally:
        StubState.Platform, StubState.IsPlaying = RuntimePlatform.LinuxEditor, False


def test_session_only_data_does_not_survive_stop_in_the_editor(editor: Path, tiny_model: Path) -> None:
    from CoreAI.Ai import AgentMemoryPersistenceMode
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEditor import StubPlayMode
    from UnityEngine import GameObject, StubEngine

    bootstrap = GameObject("CoreAI").AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = _settings(tiny_model, PersistenceMode=AgentMemoryPersistenceMode.SessionOnly)
    StubPlayMode.Enter(False)
    wait_for(lambda: StubEngine.RunFrame() >= 0 and bootstrap.IsReady, 120, "the runtime")
    family = tree(bootstrap.Endpoint.ProcessId)
    StubPlayMode.Exit()
    wait_for(lambda: not any(is_alive(p) for p in family), 30, "the session-only runtime to stop with Play Mode")


def test_a_duplicate_bootstrap_removes_only_itself_and_a_child_bootstrap_keeps_its_root(editor: Path) -> None:
    from CoreAI.Tests.UnityLayer import LifecycleProbe, UnityChecks
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEditor import StubPlayMode
    from UnityEngine import GameObject, StubEngine

    systems = GameObject("Systems")
    holder = GameObject("CoreAI")
    holder.transform.SetParent(systems.transform)
    first = holder.AddComponent[CoreAIRuntimeBootstrap]()  # no settings: it only reports that, starts nothing
    npc = GameObject("Blacksmith")
    game_script = npc.AddComponent[LifecycleProbe]()
    duplicate = npc.AddComponent[CoreAIRuntimeBootstrap]()
    StubPlayMode.Enter(False)
    assert CoreAIRuntimeBootstrap.Instance.Equals(first)
    assert UnityChecks.IsNull(duplicate), "the duplicate bootstrap is removed"
    assert not UnityChecks.IsNull(npc) and not UnityChecks.IsNull(game_script), "its GameObject belongs to the game"
    assert StubEngine.IsKeptAcrossScenes(systems), "Keep Across Scenes keeps the root the bootstrap sits under"
    StubEngine.LoadAnotherScene()
    assert not UnityChecks.IsNull(first) and UnityChecks.IsNull(game_script)


def test_remote_mode_gets_androids_internet_permission_and_ios_local_network_text(editor: Path, tmp_path: Path) -> None:
    from CoreAI.EditorTools import RemoteModeBuildStep
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEditor import PlayerSettings, StubEditorState
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    StubEditorState.AndroidForceInternetPermission = False
    assert not RemoteModeBuildStep.Prepare(settings, "Android"), "no remote URL: nothing to change"
    settings.RemoteUrl, settings.RemoteToken = "https://192.168.1.20:13335", "remote-token-0123456789"
    assert RemoteModeBuildStep.Prepare(settings, "Android") and PlayerSettings.Android.forceInternetPermission
    assert not RemoteModeBuildStep.Prepare(settings, "Android"), "already Require"

    xcode = tmp_path / "XcodeProject"
    xcode.mkdir()
    plist = xcode / "Info.plist"
    plist.write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                     '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
                     '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
                     '<plist version="1.0">\n<dict>\n<key>CFBundleName</key>\n<string>Game</string>\n'
                     '</dict>\n</plist>\n')
    assert RemoteModeBuildStep.Finish(settings, "iOS", str(xcode))
    text = plist.read_text()
    assert "<key>NSLocalNetworkUsageDescription</key>" in text and "<key>CFBundleName</key>" in text
    assert not RemoteModeBuildStep.Finish(settings, "iOS", str(xcode)), "the game's own text is kept"
    settings.RemoteUrl = "https://runtime.example.com:13335"  # a public server needs no local-network permission
    for host in ("10.0.0.5", "172.20.1.1", "192.168.0.9", "169.254.1.1", "fe80::1", "fd00::5", "smith.local"):
        assert RemoteModeBuildStep.IsLocalNetwork(host), host
    for host in ("8.8.8.8", "runtime.example.com", "127.0.0.1", "172.32.0.1"):
        assert not RemoteModeBuildStep.IsLocalNetwork(host), host


def _inspect(window) -> str:
    from UnityEngine import StubEngine, StubGUI

    StubGUI.Click("Connect")
    StubEngine.Send(window, "OnGUI")

    def connected() -> bool:
        StubEngine.Send(window, "OnInspectorUpdate")
        status = _field(window, "status")
        assert not status.startswith("Error"), status
        return status.startswith("Started a runtime") or status.startswith("Connected")

    wait_for(connected, 120, "the inspector to connect")
    return _field(window, "status")


def test_the_memory_inspector_never_replaces_nor_restarts_the_play_sessions_runtime(editor: Path,
                                                                                    tiny_model: Path) -> None:
    from CoreAI.EditorTools import MemoryInspectorWindow
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.UnityIntegration import ProjectIdentity, ProjectPaths
    from System import TimeSpan
    from UnityEditor import EditorWindow, StubAssets
    from UnityEngine import StubEngine

    settings = _settings(tiny_model)
    StubAssets.ByPath["Assets/Settings/CoreAIRuntimeSettings.asset"] = settings
    # The play session's runtime, started as the bootstrap starts it in the editor.
    options = settings.ToLaunchOptions(str(editor), ProjectPaths.Root(), ProjectIdentity.Current()).UseEditorInstance()
    game = RuntimeLauncher(options)
    pid = game.Start().ProcessId
    try:
        settings.ChatHistoryMessageCap = 77  # edited while Play runs: the asset no longer matches the running runtime
        window = EditorWindow.GetWindow[MemoryInspectorWindow]("CoreAI Memory")
        assert _inspect(window).startswith("Connected to the running runtime")
        assert is_alive(pid) and game.IsHealthy(), "the play session keeps its runtime"

        game.Stop()  # the game (or the user) stopped it
        time.sleep(3)  # several of the inspector launcher's watch intervals
        StubEngine.Send(window, "OnInspectorUpdate")
        assert not is_alive(pid)
        assert RuntimeLauncher.StopRecorded(str(editor), TimeSpan.FromSeconds(5)) is False, "nobody started it again"
        assert _field(window, "status") == "The runtime was stopped. Connect to start it again."
    finally:
        game.Stop()
