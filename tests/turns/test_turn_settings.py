"""`TurnSettings`: the turn engine's settings as one frozen value, resolved once for a model, shared by every part."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.settings import RuntimeSettings
from pyruntime.testing import FunctionModel, RecordingModel
from pyruntime.turns import AiTaskRequest, ToolCallMode, TurnSettings
from pyruntime.turns.factory import HOSTED_STRUCTURED_CALLS_PER_ROUND, turn_settings
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND
from pyruntime.turns.settings import DEFAULT_MODEL_CONTEXT_TOKENS, TOOL_CALL_ALLOWANCE_TOKENS
from pyruntime.turns.writer.decision import MemoryDesign
from tests.support.doubles import orchestrator_on, run


def test_settings_parse_their_names_and_refuse_values_no_turn_runs_with() -> None:
    settings = TurnSettings().but(tool_mode=" Native ", memory_design="WRITER")  # as a game or a flag names them
    assert (settings.tool_mode, settings.memory_design) == (ToolCallMode.NATIVE, MemoryDesign.WRITER)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.prewarm = True  # type: ignore[misc]  # frozen: a part never sees settings change under it
    bad: list[tuple[dict[str, Any], str]] = [
        ({"model_context_tokens": 0}, "model_context_tokens must be positive"),
        ({"default_timeout": 0.0}, "default_timeout and client_tool_timeout must be positive"),
        ({"client_tool_timeout": -1.0}, "default_timeout and client_tool_timeout must be positive"),
        ({"max_calls_per_round": 0}, "max_calls_per_round and stream_buffer must be positive"),
        ({"stream_buffer": 0}, "max_calls_per_round and stream_buffer must be positive"),
        ({"tool_call_allowance": -1}, "tool_call_allowance must be >= 0"),
        ({"tool_mode": "json"}, "unknown tool-call mode 'json'"),
        ({"memory_design": "notes"}, "unknown memory design 'notes'")]
    for changes, message in bad:
        with pytest.raises(InvalidArgumentError, match=message):
            TurnSettings().but(**changes)
    with pytest.raises(TypeError, match="tool_modes"):
        TurnSettings().but(tool_modes="native")  # a name that is no setting


def test_the_orchestrator_builds_its_settings_once_and_every_part_shares_them() -> None:
    base = TurnSettings(tool_mode=ToolCallMode.NATIVE, default_timeout=9.0)
    orchestrator = orchestrator_on(FunctionModel(lambda request: "Hello."), settings=base, max_calls_per_round=2)
    settings = orchestrator.settings
    assert settings == dataclasses.replace(base, max_calls_per_round=2, model_context_tokens=2048)
    parts = (orchestrator.planner.settings, orchestrator.rounds.settings, orchestrator.next_turn.settings)
    assert all(part is settings for part in parts)
    with pytest.raises(TypeError):
        orchestrator_on(FunctionModel(lambda request: "Hello."), tool_modes="native")
    with pytest.raises(InvalidArgumentError, match="stream_buffer"):
        orchestrator_on(FunctionModel(lambda request: "Hello."), stream_buffer=0)


def test_new_settings_reach_the_next_turns_request() -> None:
    # The tool allowance is read by the planner (the history's room) and the rounds (max_tokens): both see the change.
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith.", max_output_tokens=24, temperature=0.0)
    model = RecordingModel(FunctionModel(lambda request: '{"tool_calls": [], "reply": "Hello."}'))
    orchestrator = orchestrator_on(model, policy=policy)

    def max_tokens() -> int:
        result = run(orchestrator.run_task(AiTaskRequest(role_id="Smith", hint="Hi there.")))
        assert result.ok, result.error
        return int(model.last.body["max_tokens"])

    assert max_tokens() == 24 + TOOL_CALL_ALLOWANCE_TOKENS  # the memory tool is offered
    orchestrator.settings = orchestrator.settings.but(tool_call_allowance=100)
    assert max_tokens() == 24 + 100
    assert orchestrator.planner.settings.tool_call_allowance == orchestrator.rounds.settings.tool_call_allowance == 100


def test_turn_settings_resolve_the_model_profile_and_the_choices_win() -> None:
    external = turn_settings(hosted=False)
    assert external == TurnSettings(tool_mode=ToolCallMode.NATIVE, max_calls_per_round=MAX_CALLS_PER_ROUND,
                                    background_compaction=True, prewarm=False)
    hosted = turn_settings(hosted=True, model_context_tokens=4096)
    assert (hosted.tool_mode, hosted.max_calls_per_round, hosted.prewarm, hosted.model_context_tokens) == (
        ToolCallMode.STRUCTURED, HOSTED_STRUCTURED_CALLS_PER_ROUND, True, 4096)
    # None leaves a setting to the profile; a value wins over it; the writer design brings the memory-last layout.
    assert turn_settings(hosted=True, tool_mode=None, prewarm=None, max_calls_per_round=None) == turn_settings(
        hosted=True)
    chosen = turn_settings(hosted=True, tool_mode="native", prewarm=False, memory_design="writer",
                           memory_last_stays=None, background_compaction=False, default_timeout=7.0)
    assert chosen == TurnSettings(tool_mode=ToolCallMode.NATIVE, max_calls_per_round=MAX_CALLS_PER_ROUND,
                                  memory_design=MemoryDesign.WRITER, memory_last=True, memory_last_stays=None,
                                  model_context_tokens=DEFAULT_MODEL_CONTEXT_TOKENS, default_timeout=7.0)


def test_a_runtimes_flags_are_its_turn_choices() -> None:
    assert RuntimeSettings().turn_choices() == {"tool_mode": None, "memory_design": None, "prewarm": None}
    flags = RuntimeSettings(tool_mode=ToolCallMode.NATIVE, memory_design=MemoryDesign.WRITER, prewarm=False,
                            turn_timeout=42.0)
    settings = turn_settings(hosted=True, **flags.turn_choices())
    assert (settings.tool_mode, settings.memory_design, settings.prewarm, settings.default_timeout) == (
        ToolCallMode.NATIVE, MemoryDesign.WRITER, False, 42.0)
