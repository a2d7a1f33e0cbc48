"""Turns from C# against a real runtime and a real llama.cpp (tiny model: protocol and structure, not meaning)."""

from __future__ import annotations

from typing import Any

from tests.unity.conftest import wait


def _request(role: str, hint: str, **fields: Any) -> Any:
    from CoreAI.Ai import AiTaskRequest

    request = AiTaskRequest()
    request.RoleId, request.Hint = role, hint
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def _NO_TOOLS() -> Any:
    from CoreAI.Ai import ForcedToolMode

    return getattr(ForcedToolMode, "None")  # `None` is a keyword in Python


def _history(client: Any, role: str, scope: Any = None) -> list[tuple[str, str]]:
    store = client.CreateMemoryStore()
    if scope is not None:
        store = store.ForScope(scope, None)
    return [(m.Role, m.Content) for m in store.GetChatHistory(role, 0)]


def test_builder_role_reaches_the_runtime_and_a_turn_runs(client: Any) -> None:
    from CoreAI.Ai import AgentBuilder, MemoryToolAction

    config = AgentBuilder("Smith", client.Policy).WithMemory(MemoryToolAction.Write) \
        .WithChatHistory(1024, persistBetweenSessions=True).WithSystemPrompt("You are a smith.") \
        .WithMaxOutputTokens(24).WithTemperature(0.0).Build()
    assert config.RoleId == "Smith" and config.Memory.ContextTokens == 1024
    before = wait(client.GetRoleConfigAsync("Smith"))
    assert before.PersistChatHistory is False  # not pushed yet: the runtime has the defaults
    request = _request("Smith", "Forge me a sword", TraceId="trace-42", ForcedToolMode=_NO_TOOLS())
    result = wait(client.CreateOrchestrator().RunTaskWithResultAsync(request))
    assert result.Succeeded, result.Error
    assert result.TraceId == "trace-42" and result.Usage.ModelCalls >= 1
    usage = result.Usage  # llama.cpp's counts, the cached part included
    assert usage.PromptTokens > 0 and usage.EvaluatedPromptTokens == usage.PromptTokens - usage.CachedPromptTokens
    pushed = wait(client.GetRoleConfigAsync("Smith"))
    assert (str(pushed.DefaultAction), pushed.ContextTokens, pushed.PersistChatHistory, pushed.MaxOutputTokens,
            pushed.SystemPrompt) == ("Write", 1024, True, 24, "You are a smith.")
    assert _history(client, "Smith") == [("user", "Forge me a sword"), ("assistant", result.Text)]


def test_streamed_turn_deltas_concatenate_to_the_final_text(client: Any) -> None:
    from CoreAI.Ai import AgentBuilder
    from CoreAI.Tests import StreamRecording
    from System.Threading import CancellationToken

    AgentBuilder("Bard", client.Policy).WithoutMemory().WithMaxOutputTokens(40).WithTemperature(0.0).Build()
    orchestrator = client.CreateOrchestrator()
    recording = wait(StreamRecording.RecordAsync(orchestrator, _request("Bard", "Sing"), CancellationToken(False)))
    result = recording.Result
    assert result.Succeeded, result.Error
    assert recording.Deltas.Count >= 2 and result.Text  # the tiny model always says something: several pieces
    assert recording.Joined == result.Text
    assert _history(client, "Bard") == [("user", "Sing"), ("assistant", result.Text)]


def test_cancelling_a_stream_raises_operation_canceled(client: Any) -> None:
    from CoreAI.Ai import AgentBuilder
    from CoreAI.Tests import StreamRecording

    AgentBuilder("Bard", client.Policy).WithoutMemory().WithMaxOutputTokens(200).Build()
    orchestrator = client.CreateOrchestrator()
    recording = wait(StreamRecording.CancelAfterFirstDeltaAsync(orchestrator, _request("Bard", "Sing long")))
    assert recording.Deltas.Count >= 1 and recording.Result is None
    # The client stays usable after a cancelled stream.
    assert wait(client.HealthAsync()).Ready


def test_scopes_isolate_two_players_in_turns(client: Any) -> None:
    from CoreAI.Ai import AgentBuilder, AgentMemoryScope

    AgentBuilder("Guard", client.Policy).WithoutMemory().WithMaxOutputTokens(16).Build()
    alice, bob = AgentMemoryScope.ForUser("alice"), AgentMemoryScope.ForUser("bob")
    orchestrator = client.CreateOrchestrator()
    assert wait(orchestrator.RunTaskWithResultAsync(_request("Guard", "I am Alice", Scope=alice))).Succeeded
    assert wait(orchestrator.RunTaskWithResultAsync(_request("Guard", "I am Bob", Scope=bob))).Succeeded
    assert [c for r, c in _history(client, "Guard", alice) if r == "user"] == ["I am Alice"]
    assert [c for r, c in _history(client, "Guard", bob) if r == "user"] == ["I am Bob"]
    assert _history(client, "Guard") == []


def test_chat_persists_across_a_runtime_restart_only_where_the_policy_says(runtime_factory: Any, tmp_path: Any) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests import DesignNoteExamples

    data = tmp_path / "save"
    policy = AgentMemoryPolicy()
    DesignNoteExamples.RecommendedOptIns(policy)  # Creator: session only; BlacksmithNPC: persisted
    first = runtime_factory(data)
    client = first.client(policy=policy)
    orchestrator = client.CreateOrchestrator()
    for role in ("BlacksmithNPC", "Creator"):
        # No tools this turn: the tiny model's tool JSON is gibberish, and chat recording is what is tested.
        request = _request(role, f"hello {role}", MaxOutputTokens=16, ForcedToolMode=_NO_TOOLS())
        assert wait(orchestrator.RunTaskWithResultAsync(request)).Succeeded
        assert [r for r, _ in _history(client, role)] == ["user", "assistant"]
    client.Dispose()
    first.stop()

    second = runtime_factory(data)
    client = second.client(policy=policy)
    try:
        assert [c for r, c in _history(client, "BlacksmithNPC") if r == "user"] == ["hello BlacksmithNPC"]
        assert len(_history(client, "BlacksmithNPC")) == 2
        assert _history(client, "Creator") == []
    finally:
        client.Dispose()
