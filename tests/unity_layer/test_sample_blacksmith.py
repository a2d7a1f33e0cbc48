"""The sample blacksmith acts: its compiled game tools quote from the game's price table and hand items over, and the
purchase is remembered with the memory tool, in one round (a `serve --scripted-model` child forces the calls)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rpc.conftest import TOKEN, RuntimeProcess, spawn_runtime
from tests.unity_layer.frames import pump_until, wait_on_main

SCRIPT = {
    "rules": [
        {"when": {"system": "Brom", "hint": "(?i)story"}, "reply": "Long ago...", "first_delay_ms": 60000},
        {"when": {"system": "Brom", "hint": "(?i)buy"}, "reply": "A fine blade.",
         "tool_calls": [
             {"name": "quote_price", "arguments": {"item": "Sword"}},
             {"name": "give_item", "arguments": {"item": "sword"}},  # another case: repaired by the runtime
             {"name": "memory", "arguments": {"action": "append", "content": "Alex bought a sword for 30 gold"}}],
         "after_tools": "Thirty gold, and the sword is yours."},
    ],
    "default": {"reply": "Hm?"},
}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimeProcess]:
    """A runtime child answering with the script."""
    root = tmp_path_factory.mktemp("blacksmith")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    runtime = spawn_runtime(root / "data", model=("--scripted-model", str(script), "--port", "0"))
    yield runtime
    runtime.terminate()


def test_the_blacksmith_quotes_hands_over_and_remembers(sample: Any, scripted: RuntimeProcess) -> None:
    from CoreAI.Ai import AgentMemoryPolicy, AiTaskRequest
    from CoreAI.Runtime import CoreAIRuntimeClient
    from CoreAI.Samples.BlacksmithNpc import BlacksmithNpc, BlacksmithShop

    policy = AgentMemoryPolicy()
    shop = BlacksmithShop()
    BlacksmithNpc.BuildAgent(policy, shop)
    client = CoreAIRuntimeClient(f"http://127.0.0.1:{scripted.connect_port}", TOKEN, policy)
    try:
        request = AiTaskRequest()
        request.RoleId, request.Hint = BlacksmithNpc.RoleId, "I'm Alex, I'd like to buy a sword"
        # The tools run on Unity's main thread (the default): this thread, which runs frames while it waits.
        result = wait_on_main(client.CreateOrchestrator().RunTaskWithResultAsync(request))
        assert str(result.Status) == "Ok", result.Error
        assert result.Text.endswith("Thirty gold, and the sword is yours.")
        assert [(r.Name, r.Success) for r in result.ToolResults] == [
            ("quote_price", True), ("give_item", True), ("memory", True)]
        assert json.loads(result.ToolResults[0].Content) == {"item": "Sword", "gold": 30}  # the game's table
        assert [str(item) for item in shop.Bag] == ["Sword"]
        ok, state = client.CreateMemoryStore().TryLoad(BlacksmithNpc.RoleId, None)
        assert ok and state.Memory == "Alex bought a sword for 30 gold"
    finally:
        client.Dispose()


@pytest.fixture
def playing(sample: Any, scripted: RuntimeProcess, tmp_path: Path) -> Iterator[Any]:
    """Play Mode: a bootstrap in remote mode against the scripted runtime, the blacksmith beside it, connected."""
    from CoreAI.Samples.BlacksmithNpc import BlacksmithNpc
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap, CoreAIRuntimeSettings
    from UnityEditor import StubDomain, StubEditorState, StubPlayMode
    from UnityEngine import GameObject, ScriptableObject, StubEngine, StubState

    StubState.IsEditor, StubState.IsPlaying, StubEditorState.IsPlaying = True, False, False
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubEngine.DestroyEverything()
    StubDomain.Reload()
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RemoteUrl, settings.RemoteToken = f"http://127.0.0.1:{scripted.connect_port}", TOKEN
    host = GameObject("CoreAI")
    bootstrap = host.AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = settings
    npc = host.AddComponent[BlacksmithNpc]()
    StubPlayMode.Enter(False)
    try:
        pump_until(lambda: bootstrap.IsReady and npc.Reply == "(Brom looks up from the anvil)", 60, "the blacksmith")
        yield npc
    finally:
        if StubState.IsPlaying:
            StubPlayMode.Exit()
        StubEngine.RunFrame()  # what the stopped game still posted to the main thread
        StubDomain.Reload()  # the NPC's Awake registered its main-thread tools into the default policy: drop them
        StubState.IsEditor = False


@pytest.mark.parametrize("how", ["disabled", "destroyed"])
def test_a_turn_ends_when_the_blacksmith_is_disabled_or_destroyed(playing: Any, how: str) -> None:
    from UnityEngine import Object, StubEngine

    npc = playing
    turn = npc.Ask("Tell me a story")  # the scripted model takes 60 s to start answering this one
    for _ in range(5):  # a few frames: the request is on its way
        StubEngine.RunFrame()
    assert not turn.IsCompleted and npc.CurrentTurn is not None
    if how == "disabled":
        npc.enabled = False
    else:
        Object.DestroyImmediate(npc)
    # Cancelled with the NPC: it ends now, not when the model answers, and leaves the NPC's reply alone.
    pump_until(lambda: turn.IsCompleted, 30, "the cancelled turn to end")
    assert turn.Status.ToString() == "RanToCompletion"  # the sample's handler took the cancellation
    assert npc.Reply == "(Brom looks up from the anvil)"
