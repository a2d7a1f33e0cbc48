"""The Unity layer under the stub UnityEngine: the bootstrap passes persistentDataPath, reports on the
main thread, survives a domain reload by reusing the runtime, and stops it in OnApplicationQuit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unity_layer.conftest import PYTHON, free_ports
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import cmdline, is_alive, tree, wait_for


def _call(component, name: str) -> None:
    from System.Reflection import BindingFlags

    method = component.GetType().GetMethod(name, BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public)
    method.Invoke(component, None)


@pytest.fixture
def unity_state(assemblies, tmp_path: Path):
    """Play Mode with persistentDataPath under tmp; restored afterwards."""
    from UnityEngine import StubLog, StubState

    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.DataPath = str(tmp_path / "Project" / "Assets")
    StubState.IsPlaying = True
    StubLog.Clear()
    yield tmp_path / "persistent"
    StubState.IsPlaying = False
    StubState.PersistentDataPath = ""


def _settings(tiny_model: Path):
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RuntimeProgram = RuntimeProgram.PythonEnvironment
    settings.RuntimePath = str(PYTHON)
    settings.ModelPath = str(tiny_model)
    settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
    settings.StartTimeoutSeconds = 60
    return settings


def _bootstrap(settings):
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEngine import GameObject

    bootstrap = GameObject("CoreAI").AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = settings
    return bootstrap


def _until_ready(bootstrap, ready: list) -> None:
    def tick() -> bool:
        _call(bootstrap, "Update")  # the main thread's frame: drains the queued callbacks
        return bool(ready)

    wait_for(tick, 60, "RuntimeReady on the main thread")


def _play(settings) -> tuple[Any, list[int]]:
    """A bootstrap component through Awake and OnEnable until its runtime is ready: (it, the runtime pids it saw)."""
    bootstrap = _bootstrap(settings)
    ready: list[int] = []
    bootstrap.RuntimeReady += lambda endpoint: ready.append(endpoint.ProcessId)
    _call(bootstrap, "Awake")
    _call(bootstrap, "OnEnable")
    _until_ready(bootstrap, ready)
    return bootstrap, ready


def test_bootstrap_runs_the_runtime_for_play_mode(unity_state: Path, tiny_model: Path, tmp_path: Path,
                                                  monkeypatch) -> None:
    import threading

    from UnityEngine import StubLog

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the runtime imports this checkout's pyruntime
    settings = _settings(tiny_model)
    first = _bootstrap(settings)
    ready: list = []
    main = threading.get_ident()
    first.RuntimeReady += lambda endpoint: ready.append((endpoint.ProcessId, threading.get_ident()))
    _call(first, "Awake")
    _call(first, "OnEnable")
    _until_ready(first, ready)
    pid, thread = ready[0]
    assert thread == main, "callbacks run on the thread that runs Update"
    argv = cmdline(pid)
    assert argv[argv.index("--data-dir") + 1] == str(unity_state)
    assert first.IsReady and first.Endpoint.ConnectPort == settings.ConnectPort
    client = first.CreateClient(None)
    client.Dispose()

    # A domain reload in Play Mode: OnDisable, then the reloaded component's OnEnable.
    _call(first, "OnDisable")
    _call(first, "OnDestroy")
    second, again = _play(settings)
    assert again == [pid] and second.Launcher.Reused

    family = tree(pid)
    _call(second, "OnApplicationQuit")
    wait_for(lambda: not any(is_alive(p) for p in family), 15, "the runtime to exit on quit")
    assert second.Endpoint is None
    _call(second, "OnDestroy")

    lines = StubLog.Lines
    assert any("[CoreAI] runtime started on port" in line for line in lines)
    assert any("[CoreAI] reusing the runtime on port" in line for line in lines)
    assert not any(str(unity_state) in line for line in lines), "no persistentDataPath (user name) in the Console"


def test_missing_runtime_is_reported_on_the_main_thread(unity_state: Path, tiny_model: Path, tmp_path: Path) -> None:
    from UnityEngine import StubLog

    settings = _settings(tiny_model)
    settings.RuntimePath = str(tmp_path / "nowhere" / "python")
    bootstrap = _bootstrap(settings)
    failures: list = []
    bootstrap.RuntimeFailed += lambda error: failures.append(error.Message)
    _call(bootstrap, "Awake")
    _call(bootstrap, "OnEnable")

    def tick() -> bool:
        _call(bootstrap, "Update")
        return bool(failures)

    wait_for(tick, 30, "RuntimeFailed")
    assert str(tmp_path / "nowhere" / "python") in failures[0]
    assert any(line.startswith("Error: [CoreAI] the runtime could not be started") for line in StubLog.Lines)
    _call(bootstrap, "OnDestroy")


def test_bootstrap_without_settings_says_so(unity_state: Path) -> None:
    from System import AggregateException
    from UnityEngine import StubLog

    bootstrap = _bootstrap(None)
    task = bootstrap.StartRuntime()
    assert task.IsFaulted
    with pytest.raises(AggregateException):
        task.Wait()
    assert any("no CoreAIRuntimeSettings assigned" in line for line in StubLog.Lines)


def test_main_thread_queue_runs_in_order_and_survives_a_failing_action(assemblies) -> None:
    from CoreAI.UnityIntegration import MainThreadQueue
    from System import Action
    from System import Exception as DotNetException

    queue = MainThreadQueue()
    ran: list = []
    errors: list = []
    queue.Post(Action(lambda: ran.append(1)))
    queue.Post(Action(lambda: 1 / 0))
    queue.Post(Action(lambda: ran.append(3)))
    assert queue.Count == 3
    assert queue.Drain(2, Action[DotNetException](lambda e: errors.append(e))) == 2
    assert ran == [1] and len(errors) == 1 and queue.Count == 1
    assert queue.Drain() == 1 and ran == [1, 3]


def test_settings_map_to_serve_flags(assemblies, tmp_path: Path) -> None:
    from CoreAI.Ai import AgentMemoryPersistenceMode
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    assert list(settings.ServeArguments()) == []
    settings.RuntimeProgram = RuntimeProgram.BundledExecutable
    settings.RuntimePath = "Runtime/coreai-runtime"
    settings.ModelPath = "Models/npc.gguf"
    settings.PersistenceMode = AgentMemoryPersistenceMode.SessionOnly
    options = settings.ToLaunchOptions(str(tmp_path / "persistent"), str(tmp_path / "Project"), "p1")
    assert options.RuntimePath == str(tmp_path / "Project" / "Runtime" / "coreai-runtime")
    assert options.ModelPath == str(tmp_path / "Project" / "Models" / "npc.gguf")
    assert options.DataDir == str(tmp_path / "persistent") and options.ProjectId == "p1"
    args = list(options.BuildArguments())
    assert args[0] == "serve" and "--session-only" in args
    settings.RuntimePath = "coreai-runtime"  # a bare name stays a name: looked up on PATH
    assert settings.ToLaunchOptions(str(tmp_path), str(tmp_path), "p1").RuntimePath == "coreai-runtime"


def test_editor_play_stop_keeps_one_runtime_shared_with_the_inspector(unity_state: Path, tiny_model: Path,
                                                                     monkeypatch) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.UnityIntegration import ProjectIdentity
    from UnityEngine import StubState

    from tests.unity.conftest import wait

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    StubState.IsEditor = True
    inspector = None
    try:
        settings = _settings(tiny_model)
        play, ready = _play(settings)
        pid = ready[0]
        # The Memory Inspector connects with the project's settings: it shares the Play Mode runtime.
        project_root = str(Path(StubState.DataPath).parent)
        inspector = RuntimeLauncher(
            settings.ToLaunchOptions(str(unity_state), project_root, ProjectIdentity.Current()).UseEditorInstance())
        assert inspector.Start().ProcessId == pid and inspector.Reused
        inspector_client = inspector.CreateClient(None)

        # Stop: Unity calls OnApplicationQuit, OnDisable, OnDestroy. The runtime (and its model) stays.
        for name in ("OnApplicationQuit", "OnDisable", "OnDestroy"):
            _call(play, name)
        assert is_alive(pid)
        assert wait(inspector_client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"

        # Play again: the same runtime is reused (same settings digest), not restarted.
        again, second = _play(settings)
        assert second == [pid] and again.Launcher.Reused
        for name in ("OnApplicationQuit", "OnDisable", "OnDestroy"):
            _call(again, name)
        assert is_alive(pid) and wait(inspector_client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        inspector_client.Dispose()
    finally:
        StubState.IsEditor = False
        if inspector is not None:
            inspector.Detach()  # the inspector closed: its watchdog ends and restarts nothing after the stop below
        family = tree(ready[0]) if ready else []
        stopped = RuntimeLauncher.StopRecorded(str(unity_state), __import__("System").TimeSpan.FromSeconds(10))
        assert stopped or not ready
        wait_for(lambda: not any(is_alive(p) for p in family), 15, "the runtime to stop")
