"""Tool calls in both modes against the real tiny model: execution, events, feedback, loop limits, recording.

The random-weight model decides what it calls, so some outcomes here are either-or; their exact twins run on the
in-process doubles in test_turns_in_process.py.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, field_validator

from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle, TranscriptKind
from pyruntime.turns import (
    AiTaskRequest,
    TextDeltaEvent,
    ToolCallEvent,
    ToolRegistry,
    ToolResultEvent,
    TurnStatus,
)
from tests.turns.conftest import make_orchestrator, run


class Roll(BaseModel):
    sides: int


class StrictRoll(BaseModel):
    sides: int

    @field_validator("sides")
    @classmethod
    def _never(cls, value: int) -> int:
        raise ValueError("this die cannot be rolled")


def _setup(
    args_model: type[BaseModel] = Roll, roundtrips: int | None = 3
) -> tuple[AgentMemoryPolicy, ToolRegistry, list]:
    policy = AgentMemoryPolicy()
    policy.configure_role("Dicer", system_prompt="You are Dicer.", use_memory_tool=False, max_output_tokens=120,
                          temperature=0.0, max_tool_call_roundtrips=roundtrips)
    calls: list = []

    def roll(args: BaseModel) -> dict[str, int]:
        calls.append(args)
        return {"rolled": 3}

    tools = ToolRegistry()
    tools.register("Dicer", "roll", "Roll a die with the given number of sides.", args_model, roll)
    return policy, tools, calls


def _stream(orchestrator, client, request: AiTaskRequest) -> list:
    async def go() -> list:
        events = [e async for e in orchestrator.stream_task(request)]
        await client.aclose()
        return events

    return run(go())


def test_structured_mode_runs_grammar_constrained_calls(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy, tools, calls = _setup()
    # One call per round: the random model's replies decide how many it makes, the transcript's order is the test.
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, tools=tools,
                                             tool_mode="structured", max_calls_per_round=1)
    events = _stream(orchestrator, client, AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll"))
    result = events[-1].result
    assert result.status in (TurnStatus.OK, TurnStatus.TOOL_LOOP_ENDED)
    first_call = next(e for e in events if isinstance(e, ToolCallEvent))
    first_result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert first_call.name == "roll" and json.loads(first_call.arguments_json)["sides"] == calls[0].sides
    assert (first_result.call_id, first_result.success, first_result.content) == (first_call.call_id, True,
                                                                                  '{"rolled": 3}')
    body = client.bodies[0]
    schema = body["response_format"]["schema"]
    assert body["response_format"]["type"] == "json_object"
    assert schema["properties"]["tool_calls"]["minItems"] == 1  # forced
    assert "minItems" not in client.bodies[1]["response_format"]["schema"]["properties"]["tool_calls"]  # released
    replay = client.bodies[1]["messages"][-2:]
    # The model's own (possibly max_tokens-cut) JSON reply is replayed as it was.
    assert replay[0]["role"] == "assistant" and replay[0]["content"].lstrip().startswith('{"tool_calls"')
    assert replay[1]["role"] == "user" and replay[1]["content"].startswith('Tool results:\n{"name": "roll"')
    deltas = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    assert deltas == result.text
    rows = memory_stores.scoped().get_transcript("Dicer")
    kinds = [r.kind for r in rows if not r.is_chat_message]
    assert kinds[:2] == [TranscriptKind.TOOL_CALL, TranscriptKind.TOOL_RESULT]
    chat = memory_stores.scoped().get_chat_history("Dicer")
    assert chat[0].content == "roll for me" and chat[1].role == "tool"
    assert chat[1].content.startswith("Tool results:\nroll (ok): {\"rolled\": 3}")


def test_native_mode_with_forced_tool_choice(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy, tools, calls = _setup()
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, tools=tools,
                                             tool_mode="native")
    events = _stream(orchestrator, client, AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll"))
    result = events[-1].result
    assert result.status is TurnStatus.OK  # round 2 is not forced: llama.cpp answers in plain text
    assert len(calls) == 1 and [c.name for c in result.tool_calls] == ["roll"]
    first, second = client.bodies
    assert first["tool_choice"] == {"type": "function", "function": {"name": "roll"}}
    assert [t["function"]["name"] for t in first["tools"]] == ["roll"]
    assert "tool_choice" not in second
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == result.tool_calls[0].call_id
    assert tool == {"role": "tool", "tool_call_id": result.tool_calls[0].call_id, "content": '{"rolled": 3}'}


def test_validation_errors_go_back_and_three_failing_rounds_end_the_loop(
    tiny_server_url: str, memory_stores: StoreBundle
) -> None:
    policy, tools, calls = _setup(StrictRoll, roundtrips=None)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, tools=tools)
    events = _stream(orchestrator, client, AiTaskRequest("roll", "Dicer", forced_tool_mode="roll"))
    result = events[-1].result
    assert calls == []  # invalid arguments never reach the handler
    assert result.status is TurnStatus.TOOL_LOOP_ENDED
    # A closing round without tools follows when the rounds said nothing (the model's words decide).
    closing = client.bodies[-1].get("tool_choice") == "none"
    assert result.usage.model_calls == 3 + closing and len(result.tool_results) >= 3
    assert not any(r.success for r in result.tool_results)
    assert "invalid arguments for tool 'roll'" in result.tool_results[0].content
    assert "this die cannot be rolled" in client.bodies[1]["messages"][-1]["content"]  # fed back to the model
    assert result.error == ("I stopped using tools: 3 tool-call rounds in a row failed. Last error: invalid "
                            "arguments for tool 'roll': sides: Value error, this die cannot be rolled")
    assert result.text.strip()  # the rounds' words, the closing round's, or the loop's reason when none said any
    assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == result.text
    chat = memory_stores.scoped().get_chat_history("Dicer")
    assert chat[-1].role == "assistant" and chat[-1].content == result.text


def test_roundtrip_limit_ends_the_loop(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy, tools, _ = _setup(StrictRoll, roundtrips=2)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, tools=tools)
    result = run(orchestrator.run_task(AiTaskRequest("roll", "Dicer", forced_tool_mode="roll")))
    run(client.aclose())
    assert result.status is TurnStatus.TOOL_LOOP_ENDED
    # Two rounds ran; the third call asked for more and was refused (then a closing round, if none said anything).
    assert result.usage.model_calls == 3 + (client.bodies[-1].get("tool_choice") == "none")
    assert len(result.tool_calls) >= 2 and not any(r.success for r in result.tool_results)
    assert "limit of 2 tool-call roundtrip(s)" in result.error and result.text.strip()


def test_memory_tool_call_changes_the_scoped_memory(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Keeper", system_prompt="You are Keeper.", max_output_tokens=200, temperature=0.0,
                          max_tool_call_roundtrips=1)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest("remember", "Keeper", forced_tool_mode="memory")))
    run(client.aclose())
    assert result.tool_calls and result.tool_calls[0].name == "memory"
    outcome = json.loads(result.tool_results[0].content)
    assert set(outcome) == {"Success", "Message", "Error", "Version", "MemoryLength", "Memory"}
    state = memory_stores.scoped().try_load("Keeper").state
    # Whatever the gibberish asked for, the store agrees with what the tool reported.
    assert (state.latest_version if state else 0) == outcome["Version"]
