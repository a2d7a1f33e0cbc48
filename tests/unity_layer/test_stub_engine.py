"""The stub engine enforces Unity's rules that the compiler cannot see, so the pythonnet tests catch the mistakes a
real editor would: main-thread-only members throw elsewhere, posts to Unity's context wait for a frame, a destroyed
object equals null, DontDestroyOnLoad ignores children, Play and Stop send their messages in Unity's order, and a
domain reload drops static state (and unserialized fields) while [InitializeOnLoad] code runs again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest


def _off_the_main_thread(work) -> Any:
    """Run `work` on another thread; its result or the exception it raised."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = work()
        except Exception as error:  # noqa: BLE001 - the .NET exception is the result
            box["value"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return box["value"]


@pytest.fixture
def fresh_editor(scenarios: Path, tmp_path: Path):
    from UnityEditor import StubDomain, StubEditorState, StubPlayMode
    from UnityEngine import StubEngine, StubState

    StubState.IsEditor, StubState.IsPlaying, StubEditorState.IsPlaying = True, False, False
    StubState.PersistentDataPath = str(tmp_path)
    StubEngine.DestroyEverything()  # a new, empty scene
    StubDomain.Reload()
    yield
    if StubState.IsPlaying:
        StubPlayMode.Exit()
    StubState.IsEditor = False


def test_main_thread_only_members_throw_elsewhere_as_in_unity(scenarios: Path, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import UnityChecks
    from UnityEngine import Application, StubState

    StubState.PersistentDataPath = str(tmp_path)
    assert Application.persistentDataPath == str(tmp_path)  # the main thread (this one)
    for member in ("persistentDataPath", "dataPath", "isPlaying", "productName", "streamingAssetsPath",
                   "new GameObject", "EditorApplication.isPlaying", "AssetDatabase.FindAssets"):
        outcome = UnityChecks.OffTheMainThread(member)
        assert outcome.startswith("UnityException: ") and "can only be called from the main thread" in outcome, outcome
    for member in ("platform", "isEditor"):  # thread-safe in Unity too
        assert UnityChecks.OffTheMainThread(member).startswith("value: ")


def test_posts_to_unitys_context_run_on_the_next_frame_on_the_main_thread(scenarios: Path) -> None:
    from System.Threading import SendOrPostCallback
    from UnityEngine import StubEngine

    ran: list = []
    context = StubEngine.MainThreadContext
    _off_the_main_thread(lambda: context.Post(SendOrPostCallback(lambda _: ran.append(threading.get_ident())), None))
    assert ran == [], "nothing runs until a frame"
    assert StubEngine.RunFrame() == 1 and ran == [threading.get_ident()]


def test_destroyed_objects_equal_null_and_dont_destroy_on_load_needs_a_root(fresh_editor) -> None:
    from CoreAI.Tests.UnityLayer import LifecycleProbe, UnityChecks
    from UnityEngine import GameObject, Object, StubEngine, StubLog

    parent = GameObject("Systems")
    child = GameObject("Child")
    child.transform.SetParent(parent.transform)
    probe = child.AddComponent[LifecycleProbe]()
    StubLog.Clear()
    Object.DontDestroyOnLoad(child)
    assert not StubEngine.IsKeptAcrossScenes(child) and not StubEngine.IsKeptAcrossScenes(parent)
    assert any("only works for root GameObjects" in line for line in StubLog.Lines)
    Object.DontDestroyOnLoad(parent)
    assert StubEngine.IsKeptAcrossScenes(parent)
    assert not UnityChecks.IsNull(probe)
    Object.Destroy(parent)
    assert UnityChecks.IsNull(probe) and UnityChecks.IsNull(child) and UnityChecks.IsNull(parent)


def test_play_and_stop_send_unitys_messages_in_unitys_order(fresh_editor) -> None:
    from CoreAI.Tests.UnityLayer import LifecycleProbe
    from System import Action
    from UnityEditor import EditorApplication, StubPlayMode
    from UnityEngine import Application, GameObject

    timeline: list = []
    probe = GameObject("Probe").AddComponent[LifecycleProbe]()
    probe.Report = Action[str](lambda message: timeline.append(message))
    on_change = lambda change: timeline.append(str(change))  # noqa: E731
    on_quit = lambda: timeline.append("quitting")  # noqa: E731
    EditorApplication.playModeStateChanged += on_change
    Application.quitting += on_quit
    try:
        StubPlayMode.Enter(False)
        assert Application.isPlaying
        StubPlayMode.Exit()
        assert not Application.isPlaying
    finally:
        EditorApplication.playModeStateChanged -= on_change
        Application.quitting -= on_quit
    assert timeline == ["ExitingEditMode", "Awake", "OnEnable", "EnteredPlayMode", "ExitingPlayMode",
                        "OnApplicationQuit", "quitting", "OnDisable", "OnDestroy", "EnteredEditMode"]


def test_a_domain_reload_drops_static_state_and_unserialized_fields_and_reruns_initialize_on_load(fresh_editor) -> None:
    from CoreAI.Tests.UnityLayer import LifecycleProbe
    from CoreAI.UnityIntegration import CoreAILog, CoreAILogLevel
    from System import Type
    from System.Reflection import BindingFlags
    from UnityEditor import StubDomain, StubPlayMode
    from UnityEngine import GameObject

    probe = GameObject("Probe").AddComponent[LifecycleProbe]()
    StubPlayMode.Enter(False)
    LifecycleProbe.StaticCounter = 5
    CoreAILog.Level = CoreAILogLevel.Error
    probe.Note = "changed"
    StubDomain.Reload()  # a script edited during Play
    assert LifecycleProbe.StaticCounter == 0 and CoreAILog.Level == CoreAILogLevel.Info  # statics: back to initial
    assert probe.Note == "fresh"  # not serialized: a new instance's value
    assert list(probe.Calls) == ["Awake", "OnEnable", "OnDisable", "OnEnable"]  # serialized, and re-enabled in Play
    # The editor's [InitializeOnLoad] hook subscribed again after the reload dropped every subscription.
    editor_application = Type.GetType("UnityEditor.EditorApplication, UnityEditor")
    field = editor_application.GetField("playModeStateChanged", BindingFlags.Static | BindingFlags.NonPublic)
    subscribers = field.GetValue(None).GetInvocationList()
    assert [d.Method.DeclaringType.Name for d in subscribers] == ["CoreAIPlayModeHook"]
