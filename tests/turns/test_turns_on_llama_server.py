"""The turn engine's end-to-end tests on real llama.cpp: the tiny random-weight model hosted by llama-server.

A deliberate, small set. Each proves something only the engine can: that its grammar turns the structured tool
schema into a call the loop can run, that a forced native `tool_choice` comes back as a parsed call, that a game
tool's JSON Schema constrains what the model writes, that the writer's decision schema is a grammar llama-server
accepts, that its prompt cache reuses a turn's prefix, and that a stream the turn closes or an engine that dies
ends the turn cleanly. What the runtime decides with those replies (rounds, limits, layouts, retries) is tested
exactly on the model doubles; the random-weight model's text is gibberish, so these assert protocol and structure.
Every request is recorded by a `RecordingModel` around the runtime's own client.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pyruntime.memory import MemoryTool
from pyruntime.model import LlamaServerProcess, OpenAICompatClient
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import StoreBundle, TranscriptKind
from pyruntime.testing import RecordingModel
from pyruntime.turns import (
    AiOrchestrator,
    AiTaskRequest,
    TaskResult,
    TextDeltaEvent,
    ToolCallEvent,
    ToolRegistry,
    ToolResultEvent,
    TurnEvent,
    TurnStatus,
)
from pyruntime.turns.events import ClientToolCallEvent
from pyruntime.turns.rounds.client_tools import client_tool_spec
from pyruntime.turns.writer.prompt import WRITER_MAX_TOKENS, writer_schema
from tests.support.doubles import chat_of, final, orchestrator_on, run, stream_events
from tests.support.fixtures import start_llama_server

ALICE = AgentMemoryScope(user_id="alice")


def on_engine(base_url: str, stores: StoreBundle, policy: AgentMemoryPolicy | None = None,
              **options: Any) -> tuple[AiOrchestrator, RecordingModel]:
    """An orchestrator over the real engine, in llama-server's dialect as `build_orchestrator` sets it up (the tiny
    model's template renders no tools, so a forced call goes to llama-server as a JSON schema), recorded."""
    model = RecordingModel(OpenAICompatClient(base_url, llama_server=True, forced_tools_as_schema=True))
    return orchestrator_on(model, stores, policy, **options), model


def turns(orchestrator: AiOrchestrator, model: RecordingModel, *requests: AiTaskRequest) -> list[TaskResult]:
    """Run the turns one after the other, then close the client (on the loop of its kept-alive connection)."""
    async def go() -> list[TaskResult]:
        try:
            return [await orchestrator.run_task(request) for request in requests]
        finally:
            await model.aclose()

    return run(go())


def streamed_turn(orchestrator: AiOrchestrator, model: RecordingModel, request: AiTaskRequest) -> list[TurnEvent]:
    async def go() -> list[TurnEvent]:
        try:
            return await stream_events(orchestrator, request)
        finally:
            await model.aclose()

    return run(go())


class Roll(BaseModel):
    sides: int


def dicer() -> tuple[AgentMemoryPolicy, ToolRegistry, list[Roll]]:
    policy = AgentMemoryPolicy()
    policy.configure_role("Dicer", system_prompt="You are Dicer.", use_memory_tool=False, max_output_tokens=120,
                          temperature=0.0, max_tool_call_roundtrips=3)
    calls: list[Roll] = []

    def roll(args: BaseModel) -> dict[str, int]:
        assert isinstance(args, Roll)
        calls.append(args)
        return {"rolled": 3}

    tools = ToolRegistry()
    tools.register("Dicer", "roll", "Roll a die with the given number of sides.", Roll, roll)
    return policy, tools, calls


@pytest.fixture(scope="module")
def endless_server(tiny_endless_model_path: Path) -> Iterator[LlamaServerProcess]:
    """A server whose replies run to max_tokens (long streams to interrupt)."""
    server = start_llama_server(tiny_endless_model_path)
    yield server
    server.stop()


# -- tool calls through llama-server's grammar and its tool_choice ------------------------------------------


def test_structured_mode_runs_the_call_the_grammar_produced(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    # One call per round: the random model's replies decide how many it makes, the transcript's order is the test.
    orchestrator, model = on_engine(tiny_server_url, memory_stores, policy, tools=tools, tool_mode="structured",
                                    max_calls_per_round=1)
    events = streamed_turn(orchestrator, model, AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll"))
    result = final(events)
    # The forced first round is a call (the grammar's minItems); later rounds are the model's choice.
    assert result.status in (TurnStatus.OK, TurnStatus.TOOL_LOOP_ENDED), result.error
    first_call = next(e for e in events if isinstance(e, ToolCallEvent))
    first_result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert first_call.name == "roll" and json.loads(first_call.arguments_json)["sides"] == calls[0].sides
    assert (first_result.call_id, first_result.success, first_result.content) == (first_call.call_id, True,
                                                                                  '{"rolled": 3}')
    first, second = model.requests[:2]
    assert first.response_format is not None and first.response_format["type"] == "json_object"
    assert first.schema is not None and first.schema["properties"]["tool_calls"]["minItems"] == 1  # forced
    assert second.schema is not None and "minItems" not in second.schema["properties"]["tool_calls"]  # released
    replay = second.messages[-2:]
    # The model's own (possibly max_tokens-cut) JSON reply is replayed as it was.
    assert replay[0]["role"] == "assistant" and replay[0]["content"].lstrip().startswith('{"tool_calls"')
    assert replay[1]["role"] == "user" and replay[1]["content"].startswith('Tool results:\n{"name": "roll"')
    assert "".join(e.text for e in events if isinstance(e, TextDeltaEvent)) == result.text
    rows = memory_stores.scoped().get_transcript("Dicer")
    assert [r.kind for r in rows if not r.is_chat_message][:2] == [TranscriptKind.TOOL_CALL, TranscriptKind.TOOL_RESULT]
    chat = chat_of(memory_stores, "Dicer")
    assert chat[0] == ("user", "roll for me") and chat[1][0] == "tool"
    assert chat[1][1].startswith('Tool results:\nroll (ok): {"rolled": 3}')


def test_native_mode_with_a_forced_tool_choice(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    orchestrator, model = on_engine(tiny_server_url, memory_stores, policy, tools=tools, tool_mode="native")
    [result] = turns(orchestrator, model, AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll"))
    assert result.status is TurnStatus.OK  # round 2 is not forced: llama.cpp answers in plain text
    assert len(calls) == 1 and [c.name for c in result.tool_calls] == ["roll"]
    first, second = model.requests
    assert first.tool_choice == {"type": "function", "function": {"name": "roll"}} and first.tool_names == ("roll",)
    assert second.tool_choice is None
    assistant, tool = second.messages[-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == result.tool_calls[0].call_id
    assert tool == {"role": "tool", "tool_call_id": result.tool_calls[0].call_id, "content": '{"rolled": 3}'}


@pytest.mark.parametrize("mode", ["native", "structured"])
def test_a_game_tools_schema_constrains_the_call_in_both_modes(tiny_server_url: str, memory_stores: StoreBundle,
                                                                mode: str) -> None:
    price = client_tool_spec("quote_price", "Price of an item in gold, from the game's table.", json.dumps({
        "type": "object",
        "properties": {"item": {"type": "string", "enum": ["sword", "axe"]}, "qty": {"type": "integer", "minimum": 1}},
        "required": ["item"], "additionalProperties": False}))
    policy = AgentMemoryPolicy()
    # One round: the random-weight model's later rounds would fill its 2048-token context with gibberish.
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", use_memory_tool=False,
                          max_output_tokens=60, temperature=0.0, max_tool_call_roundtrips=1)
    orchestrator, model = on_engine(tiny_server_url, memory_stores, policy, tool_mode=mode)
    seen: list[ClientToolCallEvent] = []

    async def go() -> list[TurnEvent]:
        # An enum argument: the random-weight model's free strings run to max_tokens unterminated.
        request = AiTaskRequest("how much?", "Smith", client_tools=(price,), forced_tool_mode="quote_price")
        events: list[TurnEvent] = []
        try:
            async for event in orchestrator.stream_task(request):
                events.append(event)
                if isinstance(event, ClientToolCallEvent):
                    seen.append(event)
                    orchestrator.submit_tool_result(event.turn_id, event.call_id, True, "30 gold")
        finally:
            await model.aclose()
        return events

    events = run(go())
    result = final(events)
    assert result.status in (TurnStatus.OK, TurnStatus.TOOL_LOOP_ENDED), result.error
    assert seen and all(e.name == "quote_price" for e in seen)
    assert json.loads(seen[0].arguments_json)["item"] in ("sword", "axe")  # the grammar followed the schema
    first = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (first.call_id, first.success, first.content) == (seen[0].call_id, True, "30 gold")
    assert model.requests[0].tool_names == ("quote_price",)
    # The role's tool_result_memory (CompactSummary) keeps one line per result.
    rows = memory_stores.scoped().get_transcript("Smith")
    assert (TranscriptKind.TOOL_RESULT, "quote_price", "quote_price (ok): 30 gold") in [
        (r.kind, r.name, r.content) for r in rows]


# -- the memory writer's grammar ----------------------------------------------------------------------------


def test_the_writers_decision_schema_is_a_grammar_and_only_grounded_lines_are_kept(
        tiny_server_url: str, file_stores: StoreBundle) -> None:
    orchestrator, model = on_engine(tiny_server_url, file_stores, memory_design="writer")

    async def go() -> TaskResult:
        try:
            result = await orchestrator.run_task(AiTaskRequest(hint="My name is Tobin.", role_id="SmartChat",
                                                               max_output_tokens=8))
            outcomes.extend(await orchestrator.memory_passes.drain())
            return result
        finally:
            await model.aclose()

    outcomes: list[Any] = []
    assert run(go()).status is TurnStatus.OK
    reply, decision = model.requests
    assert reply.response_format is None and reply.tool_names == ()
    assert decision.response_format == {"type": "json_object", "schema": writer_schema("My name is Tobin.")}
    assert (decision.temperature, decision.max_tokens, decision.streamed) == (0.0, WRITER_MAX_TOKENS, False)
    # llama-server took the schema as a grammar and answered with a decision the pass could read.
    assert len(outcomes) == 1 and outcomes[0].model_calls == 1 and "unavailable" not in outcomes[0].reason
    # The tiny model decides gibberish: whatever it decided, memory holds only grounded, labelled lines.
    state = file_stores.scoped().try_load("SmartChat").state
    lines = state.memory.splitlines() if state is not None else []
    assert all(line.startswith("Player's ") for line in lines)
    assert bool(lines) == bool(outcomes[0].stored)


# -- what llama.cpp's prompt cache does with the turn's layout ---------------------------------------------


def test_the_next_turn_reuses_the_previous_request_from_the_prompt_cache(tiny_server_url: str,
                                                                         memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=24, temperature=0.0)
    orchestrator, model = on_engine(tiny_server_url, memory_stores, policy)
    MemoryTool(memory_stores.memory, memory_stores.scoped(ALICE).key("Smith")).execute(
        {"action": "write", "content": "likes swords"})
    first, second = turns(orchestrator, model, *(AiTaskRequest(hint, "Smith", scope=ALICE, forced_tool_mode="none")
                                                 for hint in ("hello there", "tell me more")))
    assert first.ok and second.ok
    assert first.usage.model_calls == second.usage.model_calls == 1
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert second.usage.prompt_tokens > first.usage.prompt_tokens  # the first turn is in its history
    # Turn 2 extends turn 1's request up to its tail: that prefix is reused, only the rest is evaluated.
    assert second.usage.cached_prompt_tokens > first.usage.prompt_tokens // 2
    assert 0 < second.usage.evaluated_prompt_tokens < second.usage.prompt_tokens
    assert model.requests[1].messages[:len(model.requests[0].messages) - 1] == model.requests[0].messages[:-1]


# -- streams that end early ----------------------------------------------------------------------------------

HINT = "tell me everything"


def _talker() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Talker", system_prompt="You are Talker.", use_memory_tool=False, max_output_tokens=1500)
    return policy


def test_closing_the_stream_mid_reply_cancels_and_records_the_hint_once(endless_server: LlamaServerProcess,
                                                                        memory_stores: StoreBundle) -> None:
    orchestrator, model = on_engine(endless_server.base_url, memory_stores, _talker())

    async def turn() -> int:
        stream = orchestrator.stream_task(AiTaskRequest(HINT, "Talker"))
        deltas = 0
        async for event in stream:
            deltas += isinstance(event, TextDeltaEvent)
            if deltas == 3:
                break
        await stream.aclose()
        await model.aclose()
        return deltas

    assert run(turn()) == 3
    assert chat_of(memory_stores, "Talker") == [("user", HINT)]


def test_an_engine_killed_mid_turn_fails_it_and_records_the_hint_once(tiny_endless_model_path: Path,
                                                                      memory_stores: StoreBundle) -> None:
    server = start_llama_server(tiny_endless_model_path)
    orchestrator, model = on_engine(server.base_url, memory_stores, _talker())

    async def turn() -> list[TurnEvent]:
        events = []
        async for event in orchestrator.stream_task(AiTaskRequest(HINT, "Talker")):
            events.append(event)
            if isinstance(event, TextDeltaEvent) and server.is_alive():
                assert server.pid is not None
                os.kill(server.pid, signal.SIGKILL)
        await model.aclose()
        return events

    try:
        events = run(turn())
    finally:
        server.stop()
    result = final(events)
    assert any(isinstance(e, TextDeltaEvent) for e in events)
    assert result.status is TurnStatus.FAILED and "model server" in result.error
    assert chat_of(memory_stores, "Talker") == [("user", HINT)]  # exactly once, and no assistant message
