"""The memory tool called from a turn, on the model doubles: what the tool reports is what the store holds.

The tool loop itself (both modes, failing rounds, the roundtrip limit, repeated calls) is asserted exactly in
test_turns_in_process.py; the calls llama-server's grammar and tool_choice produce, in test_turns_on_llama_server.py.
"""

from __future__ import annotations

import json

from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle
from pyruntime.testing import RecordingModel, ScriptedCall
from pyruntime.turns import AiTaskRequest, TurnStatus
from tests.support.doubles import orchestrator_on, run

OUTCOME_FIELDS = {"Success", "Message", "Error", "Version", "MemoryLength", "Memory"}


def _keeper() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Keeper", system_prompt="You are Keeper.", max_output_tokens=200, temperature=0.0,
                          max_tool_call_roundtrips=1)
    return policy


def test_a_memory_call_reports_its_outcome_and_the_store_agrees(memory_stores: StoreBundle) -> None:
    model = RecordingModel([ScriptedCall("memory", {"action": "append", "content": "Keeps a grey cat"}), "Noted."])
    orchestrator = orchestrator_on(model, memory_stores, _keeper(), tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest("remember my cat", "Keeper", forced_tool_mode="memory")))
    assert result.status is TurnStatus.OK and result.text == "Noted."
    assert [c.name for c in result.tool_calls] == ["memory"]
    assert model.requests[0].tool_choice == {"type": "function", "function": {"name": "memory"}}
    outcome = json.loads(result.tool_results[0].content)
    assert set(outcome) == OUTCOME_FIELDS
    assert (outcome["Success"], outcome["Version"], outcome["Memory"], outcome["MemoryLength"]) == (
        True, 1, "Keeps a grey cat", len("Keeps a grey cat"))
    state = memory_stores.scoped().try_load("Keeper").state
    assert state is not None and (state.latest_version, state.memory) == (outcome["Version"], outcome["Memory"])


def test_a_refused_memory_call_reports_why_and_changes_nothing(memory_stores: StoreBundle) -> None:
    # The gibberish of a random-weight model is the usual case of a bad call: an unknown action.
    model = RecordingModel([ScriptedCall("memory", {"action": "shred", "content": "x"}), "Hm."])
    orchestrator = orchestrator_on(model, memory_stores, _keeper(), tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest("forget it", "Keeper", forced_tool_mode="memory")))
    outcome = json.loads(result.tool_results[0].content)
    assert set(outcome) == OUTCOME_FIELDS and outcome["Success"] is False and outcome["Error"]
    assert not result.tool_results[0].success
    assert model.requests[1].last_text == result.tool_results[0].content  # the model is told why
    assert memory_stores.scoped().try_load("Keeper").state is None
