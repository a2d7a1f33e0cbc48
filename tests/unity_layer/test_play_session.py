"""Turns belong to the play session that started them, through the compiled C# under the
stub engine: Unity's main thread is this test thread (its context runs work only when a frame runs), Play Mode is
entered and left with StubPlayMode, and the runtime is a real one on the tiny llama.cpp model.

- Dispose, and the end of Play Mode, cancel a client's calls in flight; a game tool whose call was already queued for
  the main thread does not run once the game stopped; a tool is refused while the game is not playing.
- A main-thread tool runs on Unity's main thread even when the turn was started from the thread pool (after a
  ConfigureAwait(false)), because the Unity layer captured the main thread; without one it is refused, never run on
  the pool.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unity.conftest import TOKEN, Runtime, start_runtime
from tests.unity_layer.frames import pump_until
from tests.unity_layer.processes import wait_for


def outcome(task: Any) -> str:
    """How a finished .NET task ended: 'ok', 'cancelled' (OperationCanceledException) or the exception's type."""
    if task.IsCanceled:
        return "cancelled"
    if task.IsFaulted:
        inner = task.Exception.GetBaseException()
        return "cancelled" if "OperationCanceled" in inner.GetType().Name else inner.GetType().Name
    return "ok"


@pytest.fixture
def runtime(scenarios: Path, tiny_llama_server: Any, tmp_path: Path) -> Iterator[Runtime]:
    """A real runtime (RPC in this process, the tiny model in a llama.cpp child) on free ports."""
    rt = start_runtime(tmp_path / "data", tiny_llama_server)
    yield rt
    rt.stop()


@pytest.fixture
def edit_mode(scenarios: Path, tmp_path: Path) -> Iterator[None]:
    """A fresh editor in Edit Mode: a domain reload first drops what earlier tests left in static state."""
    from UnityEditor import StubDomain, StubEditorState
    from UnityEngine import StubEngine, StubState

    StubState.IsEditor, StubState.IsPlaying, StubEditorState.IsPlaying = True, False, False
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.DataPath = str(tmp_path / "Project" / "Assets")
    StubEngine.DestroyEverything()  # a new, empty scene
    StubDomain.Reload()
    yield
    from UnityEditor import StubPlayMode

    if StubState.IsPlaying:
        StubPlayMode.Exit()
    StubState.IsEditor = False


def _remote_bootstrap(runtime: Runtime) -> Any:
    """A bootstrap in the scene, in remote mode against `runtime` (http on loopback is allowed)."""
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap, CoreAIRuntimeSettings
    from UnityEngine import GameObject, ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RemoteUrl, settings.RemoteToken = runtime.url, TOKEN
    bootstrap = GameObject("CoreAI").AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = settings
    return bootstrap


def _play(bootstrap: Any) -> None:
    """Press Play (no domain reload) and run frames until the bootstrap's runtime is ready."""
    from UnityEditor import StubPlayMode

    StubPlayMode.Enter(False)
    pump_until(lambda: bootstrap.IsReady, 60, "the bootstrap to connect")


def test_a_main_thread_tool_runs_on_the_main_thread_when_the_turn_starts_on_the_pool(edit_mode,
                                                                                     runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests.UnityLayer import ToolProbe

    bootstrap = _remote_bootstrap(runtime)
    _play(bootstrap)
    policy = AgentMemoryPolicy()
    probe = ToolProbe()
    request = probe.Register(policy, "Smith", True)
    client = bootstrap.CreateClient(policy)
    try:
        # no context: after ConfigureAwait(false)
        turn = ToolProbe.StartFromThreadPool(client.CreateOrchestrator(), request)
        pump_until(lambda: turn.IsCompleted, 120, "the turn")
        assert outcome(turn) == "ok"
        assert turn.Result.ToolResults[0].Success and turn.Result.ToolResults[0].Content == "30 gold"
        assert (probe.Calls, probe.OnMain, probe.OffMain, probe.PlayingWhenRun) == (1, 1, 0, 1)
    finally:
        client.Dispose()


def test_after_a_script_edit_in_play_mode_clients_still_have_the_main_thread(edit_mode, runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests.UnityLayer import ToolProbe
    from CoreAI.UnityIntegration import CoreAIPlaySession
    from UnityEditor import StubDomain

    bootstrap = _remote_bootstrap(runtime)
    _play(bootstrap)
    StubDomain.Reload()  # the play session's static state is gone; OnEnable runs again, Awake does not
    pump_until(lambda: bootstrap.IsReady, 60, "the bootstrap to reconnect")
    assert CoreAIPlaySession.IsActive and CoreAIPlaySession.MainThread is not None
    policy = AgentMemoryPolicy()
    probe = ToolProbe()
    request = probe.Register(policy, "Smith6", True)
    client = bootstrap.CreateClient(policy)
    try:
        turn = ToolProbe.StartFromThreadPool(client.CreateOrchestrator(), request)
        pump_until(lambda: turn.IsCompleted, 120, "the turn")
        assert outcome(turn) == "ok" and (probe.OnMain, probe.OffMain) == (1, 0)
    finally:
        client.Dispose()


def test_without_a_main_thread_a_main_thread_tool_is_refused_not_run_on_the_pool(scenarios: Path,
                                                                                  runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests.UnityLayer import ToolProbe

    policy = AgentMemoryPolicy()
    probe = ToolProbe()
    request = probe.Register(policy, "Smith2", True)
    client = runtime.client(policy=policy)  # plain client: no GameHost
    try:
        turn = ToolProbe.StartFromThreadPool(client.CreateOrchestrator(), request)
        wait_for(lambda: turn.IsCompleted, 120, "the turn")
        result = turn.Result
        assert probe.Calls == 0, "never run on the thread pool"
        assert not result.ToolResults[0].Success
        assert "runs on the main thread" in result.ToolResults[0].Content
    finally:
        client.Dispose()


def test_stop_cancels_the_turn_and_its_queued_main_thread_tool_never_runs(edit_mode, runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests.UnityLayer import ToolProbe
    from UnityEditor import StubPlayMode

    bootstrap = _remote_bootstrap(runtime)
    _play(bootstrap)
    policy = AgentMemoryPolicy()
    probe = ToolProbe()
    request = probe.Register(policy, "Smith3", True)
    client = bootstrap.CreateClient(policy)
    turn = ToolProbe.StartHere(client.CreateOrchestrator(), request)  # on the main thread, as Update would
    # No frame runs meanwhile: the tool call reaches the client and waits for the main thread.
    wait_for(lambda: runtime.orchestrator.client_calls.waiting == 1, 120, "the turn to wait for the game tool")
    time.sleep(0.5)  # let the reading thread queue the call for the main thread
    StubPlayMode.Exit()  # Stop: ExitingPlayMode, OnApplicationQuit, quitting, OnDisable, OnDestroy
    pump_until(lambda: turn.IsCompleted, 60, "the turn to end after Stop")
    for _ in range(10):
        from UnityEngine import StubEngine

        StubEngine.RunFrame()  # Edit Mode frames: whatever was queued for the stopped game has its chance to run
    assert outcome(turn) == "cancelled"
    assert probe.Calls == 0, "a stopped game's tool ran in Edit Mode"
    client.Dispose()


def test_in_edit_mode_a_game_tool_is_refused(edit_mode, runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Runtime import ConnectClientOptions, CoreAIRuntimeClient
    from CoreAI.Tests.UnityLayer import ToolProbe
    from CoreAI.UnityIntegration import CoreAIPlaySession

    policy = AgentMemoryPolicy()
    probe = ToolProbe()
    request = probe.Register(policy, "Smith4", True)
    # What CoreAIRuntimeBootstrap hands out, made by editor code while the game is not playing.
    options = ConnectClientOptions()
    options.BaseUrl, options.Token, options.GameHost = runtime.url, TOKEN, CoreAIPlaySession.Host()
    client = CoreAIRuntimeClient(options, policy)
    try:
        turn = ToolProbe.StartHere(client.CreateOrchestrator(), request)
        pump_until(lambda: turn.IsCompleted, 120, "the turn")
        assert outcome(turn) == "ok" and probe.Calls == 0
        assert "the game is not playing" in turn.Result.ToolResults[0].Content
    finally:
        client.Dispose()


def test_dispose_cancels_a_turn_in_flight_and_its_tool_handler(scenarios: Path, runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests.UnityLayer import BlockingTool, ToolProbe
    from System import TimeSpan

    policy = AgentMemoryPolicy()
    tool = BlockingTool()
    request = tool.Register(policy, "Smith5")
    client = runtime.client(policy=policy)
    turn = ToolProbe.StartFromThreadPool(client.CreateOrchestrator(), request)
    assert tool.Started.Wait(TimeSpan.FromSeconds(120)), "the handler never ran"
    client.Dispose()  # a MonoBehaviour's OnDisable: nothing of its turns may outlive it
    wait_for(lambda: turn.IsCompleted, 30, "the turn to end with Dispose")
    assert outcome(turn) == "cancelled"
    assert tool.Cancelled.Wait(TimeSpan.FromSeconds(30)), "the handler's token was not cancelled"


@pytest.mark.parametrize("reload_domain", [False, True])
def test_every_play_starts_with_a_fresh_default_policy(edit_mode, reload_domain: bool) -> None:
    # Enter Play Mode Options with the domain reload off keep statics across plays: the Unity layer resets the default
    # policy at SubsystemRegistration, so a role one play configured is not in the next (as with the reload on).
    from CoreAI.Ai import AgentBuilder, AgentMemoryPolicy
    from System import Object
    from UnityEditor import StubPlayMode

    StubPlayMode.Enter(reload_domain)
    AgentBuilder("Forgemaster").WithoutMemory().WithChatHistory(2048, True).Build()  # into the Default policy
    AgentMemoryPolicy.Default.ConfigureRole("Merchant", useMemoryTool=False)
    first = AgentMemoryPolicy.Default
    assert not first.GetConfig("Forgemaster").UseMemoryTool and not first.GetConfig("Merchant").UseMemoryTool
    StubPlayMode.Exit()

    StubPlayMode.Enter(reload_domain)
    fresh = AgentMemoryPolicy.Default
    assert not Object.ReferenceEquals(fresh, first)
    assert fresh.GetConfig("Forgemaster").UseMemoryTool and not fresh.GetConfig("Forgemaster").PersistChatHistory
    assert fresh.GetConfig("Merchant").UseMemoryTool  # the built-in role's own default again
    assert fresh.Revision == AgentMemoryPolicy().Revision  # nothing configured yet in this play
    StubPlayMode.Exit()
