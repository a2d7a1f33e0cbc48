"""The design note's Examples 1-3 and recommended opt-ins, compiled into a C# test assembly and run."""

from __future__ import annotations

from typing import Any

from tests.unity.conftest import TOKEN, wait

BUILT_INS = ("Creator", "Builder", "Analyzer", "Programmer", "CoreMechanicAI", "AINpc", "PlainChat", "SmartChat",
             "Merchant")


def test_example_1_core_mechanic_craft_history(runtime: Any) -> None:
    from CoreAI.Tests import DesignNoteExamples

    outcome = wait(DesignNoteExamples.Example1Async(runtime.url, TOKEN))
    first, second = outcome.Turns
    # Both turns ran on the model (with the tiny model the tool JSON may be gibberish: the loop then ends cleanly).
    assert str(first.Status) in ("Ok", "ToolLoopEnded"), first.Error
    assert str(second.Status) in ("Ok", "ToolLoopEnded"), second.Error
    assert first.Usage.ModelCalls >= 1
    assert outcome.ToolResult.Success and outcome.ToolResult.Message.startswith("DONE")
    assert outcome.State.Memory.endswith("Craft#1: Iron Fireblade damage:45 fire:15")
    config = runtime.services.orchestrator.policy.get("CoreMechanicAI")
    assert config.use_memory_tool and config.default_action.name == "Append"
    # CoreMechanicAI keeps chat history: both hints were recorded, in order.
    history = runtime.services.memory_store.stores.scoped().get_chat_history("CoreMechanicAI")
    assert [m.content for m in history if m.role == "user"] == [
        "Craft a weapon from Iron + Fire Crystal and remember the result with the memory tool.", "What did we craft?"]


def test_example_2_plain_chat_dialogue_context(runtime: Any) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests import DesignNoteExamples

    outcome = wait(DesignNoteExamples.Example2Async(runtime.url, TOKEN))
    assert [t.Succeeded for t in outcome.Turns] == [True, True]
    stored = runtime.services.memory_store.stores.scoped().get_chat_history("PlainChat")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "My name is Alex"), ("assistant", outcome.Turns[0].Text),
        ("user", "What is my name?"), ("assistant", outcome.Turns[1].Text)]
    # PlainChat persists its history: the rows are in the history file, not only in the process.
    assert (runtime.memory_dir / "PlainChat.history.jsonl").read_text(encoding="utf-8").count("My name is Alex") == 1
    # MyChat was built into the default policy and reached the runtime.
    assert AgentMemoryPolicy.Default.GetConfig("MyChat").PersistChatHistory
    my_chat = runtime.services.orchestrator.policy.get("MyChat")
    assert my_chat.with_chat_history and my_chat.persist_chat_history and my_chat.context_tokens == 4096


def test_example_3_disable_memory_for_one_role_then_all(runtime: Any) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests import DesignNoteExamples

    assert AgentMemoryPolicy().GetConfig("PlainChat").UseMemoryTool is False  # off by default
    assert AgentMemoryPolicy().GetConfig("Merchant").UseMemoryTool is True
    outcome = wait(DesignNoteExamples.Example3Async(runtime.url, TOKEN))
    for role in BUILT_INS:
        assert outcome.Policy.GetConfig(role).UseMemoryTool is False, role
        assert runtime.services.orchestrator.policy.get(role).use_memory_tool is False, role
        # ChatHistory only: history settings are untouched.
        assert runtime.services.orchestrator.policy.get(role).with_chat_history is (role != "Programmer"), role


def test_recommended_opt_ins(client: Any) -> None:
    from CoreAI.Tests import DesignNoteExamples

    outcome = DesignNoteExamples.RecommendedOptIns(client.Policy)
    built = {c.RoleId: c.Memory for c in outcome.Configs}
    assert {r: (str(c.DefaultAction), c.ContextTokens, c.PersistChatHistory) for r, c in built.items()} == {
        "Creator": ("Write", 4096, False), "BlacksmithNPC": ("Append", 4096, True),
        "AnalyzerChat": ("Append", 4096, False)}
    wait(client.SyncPolicyAsync())
    for role, config in built.items():
        remote = wait(client.GetRoleConfigAsync(role))
        assert (str(remote.DefaultAction), remote.ContextTokens, remote.PersistChatHistory, remote.WithChatHistory,
                remote.UseMemoryTool) == (str(config.DefaultAction), 4096, config.PersistChatHistory, True, True)
    # The builder starts from the defaults (like the Python AgentBuilder), not the built-in row of Creator.
    assert wait(client.GetRoleConfigAsync("Creator")).MaxToolCallRoundtrips is None


def test_policy_validation_refuses_bad_input_and_changes_nothing(assemblies: Any) -> None:
    import pytest
    from CoreAI.Ai import AgentBuilder, AgentMemoryPolicy
    from System import ArgumentException, ArgumentOutOfRangeException

    policy = AgentMemoryPolicy()
    revision = policy.Revision
    with pytest.raises(ArgumentOutOfRangeException, match="MaxChatHistoryMessages"):
        policy.ConfigureRole("AINpc", useMemoryTool=False, maxChatHistoryMessages=-1)
    with pytest.raises(ArgumentException, match="roleId"):
        policy.DisableMemoryTool("  ")
    with pytest.raises(ArgumentOutOfRangeException, match="MaxOutputTokens"):
        AgentBuilder("X", policy).WithMaxOutputTokens(-1).Build()  # 0 = unlimited
    assert policy.Revision == revision and policy.GetConfig("AINpc").UseMemoryTool is True
    assert not policy.IsKnown("X")
    detached = AgentBuilder("Y", policy).WithoutChatHistory().BuildDetached()
    assert detached.Memory.WithChatHistory is False and not policy.IsKnown("Y")
    assert policy.ConfigureRole(" Merchant ", defaultAction=None).RoleId == "Merchant"
