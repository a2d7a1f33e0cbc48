"""Code written against the design note's original API compiles unchanged and behaves as the note describes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unity.conftest import TOKEN, wait


def test_original_api_style_compiles_and_behaves(runtime: Any) -> None:
    from CoreAI.Tests import OriginalApi

    outcome = wait(OriginalApi.RunAsync(runtime.url, TOKEN))
    policy = outcome.Policy
    remote = runtime.services.orchestrator.policy
    # ConfigureRole's 4th positional argument was allowDuplicateToolCalls: history stays on for Merchant.
    merchant = policy.GetConfig("Merchant")
    assert merchant.WithChatHistory is True and str(merchant.DefaultAction) == "Write" and merchant.UseMemoryTool
    assert "allowDuplicateToolCalls" in outcome.DuplicateCallsError
    assert policy.GetConfig("Builder").DefaultAction == policy.GetConfig("Analyzer").DefaultAction  # refused: unchanged
    assert policy.GetConfig("Analyzer").ContextTokens == 512
    assert (policy.GetConfig("AINpc").ContextTokens, policy.GetConfig("AINpc").MaxChatHistoryMessages) == (1024, 12)
    assert policy.GetConfig("SmartChat").ContextTokens == 2048 and policy.GetConfig("SmartChat").PersistChatHistory
    # SetMaxOutputTokens(role, 0) and WithMaxOutputTokens(0) mean unlimited.
    assert policy.GetConfig("Creator").MaxOutputTokens is None
    assert policy.GetConfig("Bard").MaxOutputTokens is None and policy.GetConfig("Bard").ContextTokens == 4096
    smith = remote.get("Smith")  # pushed before the turn
    assert smith.context_tokens == 2048 and smith.persist_chat_history and smith.max_output_tokens == 24
    # RunTaskAsync returned the reply text itself.
    assert isinstance(outcome.Reply, str)
    # Revert: bool, and false with a reason for an unknown version.
    assert outcome.VersionCount == 2 and outcome.Reverted is True
    assert outcome.RevertedUnknown is False and "999" in outcome.RevertError
    assert outcome.MemoryAfterRevert == "first"
    # The turn's own user line first (Smith keeps history), then the two appended.
    assert list(outcome.History)[0] == "user:Forge me a sword"
    assert list(outcome.History)[-2:] == ["user:hello", "assistant:welcome"]
    assert outcome.HistoryAfterClear == 0 and outcome.LoadedAfterClear is False


def test_original_forms_refuse_bad_input_and_change_nothing(assemblies: Any) -> None:
    from CoreAI.Ai import AgentBuilder, AgentMemoryPolicy
    from System import ArgumentException, ArgumentOutOfRangeException, NotSupportedException

    policy = AgentMemoryPolicy()
    revision = policy.Revision
    with pytest.raises(NotSupportedException):
        policy.ConfigureRole("Merchant", True, None, True)
    with pytest.raises(ArgumentException, match="contextWindowTokens"):
        policy.ConfigureRole("Merchant", contextTokens=10, contextWindowTokens=20)
    with pytest.raises(ArgumentOutOfRangeException, match="MaxOutputTokens"):
        policy.SetMaxOutputTokens("Merchant", -1)
    assert policy.Revision == revision
    assert AgentBuilder("Z", policy).WithMaxOutputTokens(0).BuildDetached().Memory.MaxOutputTokens is None
    # The string-returning and the full-result forms sit side by side.
    from System import Type

    methods = Type.GetType("CoreAI.Ai.AiOrchestrator, CoreAI.Client").GetMethods()
    returns = {m.Name: m.ReturnType.ToString() for m in methods if "RunTask" in m.Name}
    assert returns["RunTaskAsync"].endswith("Task`1[System.String]")
    assert returns["RunTaskWithResultAsync"].endswith("Task`1[CoreAI.Ai.AiTaskResult]")
