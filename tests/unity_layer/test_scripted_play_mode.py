"""Play-mode style: the game's launcher starts `serve --scripted-model`, the game's C# API plays deterministic NPC
turns.

What a game's play-mode CI does without a GGUF: the real launcher, runtime, stores, history and
tool loop; only the model's words come from a script.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unity.conftest import wait

SCRIPT = {
    "rules": [
        {"when": {"system": "BlacksmithNPC", "hint": "(?i)sword"},
         "reply": "Thirty gold for the sword.",
         "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
         "after_tools": "I will remember that."},
        {"when": {"system": "BlacksmithNPC", "hint": "(?i)price"}, "reply": ["Thirty gold.", "Still thirty."]},
    ],
    "default": {"reply": "Hm?"},
}


def test_deterministic_npc_turns_through_the_launcher_and_a_scripted_model(
    make_options, launchers, tmp_path: Path
) -> None:
    from CoreAI.Ai import AgentBuilder, AiTaskRequest, MemoryToolAction
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.Runtime import CoreAIRuntimeClient
    from System import String
    from System.Collections.Generic import List

    script = tmp_path / "npc-script.json"
    script.write_text(json.dumps(SCRIPT))
    extra = List[String]()
    for arg in ("--scripted-model", str(script)):
        extra.Add(arg)
    options = make_options(ModelPath=None, ExtraServeArguments=extra)
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    endpoint = launcher.Start()

    client = CoreAIRuntimeClient(endpoint.ConnectBaseUrl, endpoint.Token)
    try:
        AgentBuilder("BlacksmithNPC", client.Policy).WithMemory(MemoryToolAction.Append) \
            .WithChatHistory(4096, persistBetweenSessions=True).Build()
        orchestrator = client.CreateOrchestrator()

        def turn(hint: str):
            request = AiTaskRequest()
            request.RoleId, request.Hint = "BlacksmithNPC", hint
            result = wait(orchestrator.RunTaskWithResultAsync(request), 60.0)
            assert result.Succeeded, result.Error
            return result.Text

        first = turn("I need a sword")
        assert first.startswith("Thirty gold for the sword.")
        assert [turn("What is the price?"), turn("And the price now?")] == ["Thirty gold.", "Still thirty."]
        store = client.CreateMemoryStore()
        ok, state = store.TryLoad("BlacksmithNPC", None)
        assert ok and state.Memory == "Wants a sword"  # the scripted memory call really ran
        history = [(m.Role, m.Content) for m in store.GetChatHistory("BlacksmithNPC", 0)]
        assert history[0] == ("user", "I need a sword") and history[-2:] == [
            ("user", "And the price now?"), ("assistant", "Still thirty.")]
    finally:
        client.Dispose()
