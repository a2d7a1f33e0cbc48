"""Game tools (client-side tools) in the turn loop: the scripted model (in-process) forces exact calls.

What a game tool's JSON Schema makes llama-server's grammar write is in test_turns_on_llama_server.py.

Every test drives `AiOrchestrator.stream_task` and answers `ClientToolCallEvent`s the way the
SubmitToolResult RPC does (`orchestrator.submit_tool_result`). Counted, never timed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pyruntime.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, ToolCallEndedError
from pyruntime.model.client.types import ToolCall
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle, TranscriptKind
from pyruntime.testing import ScriptedModel
from pyruntime.testing.scripted import Script
from pyruntime.turns import AiOrchestrator, AiTaskRequest, ToolCallEvent, ToolRegistry, ToolResultEvent, TurnStatus
from pyruntime.turns.events import ClientToolCallEvent, TurnEvent
from pyruntime.turns.rounds.client_tools import ClientToolSpec, client_tool_spec, repair_and_validate
from tests.support.loads import loaded
from tests.turns.conftest import run

ROLE = "Smith"
PRICE_SCHEMA = {
    "type": "object",
    "properties": {"item": {"type": "string", "enum": ["sword", "axe"]}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["item"],
    "additionalProperties": False,
}
GIVE_SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


def price_tool() -> ClientToolSpec:
    return client_tool_spec("quote_price", "Price of an item in gold, from the game's table.", json.dumps(PRICE_SCHEMA))


def give_tool() -> ClientToolSpec:
    return client_tool_spec("give_item", "Hand an item to the player.", json.dumps(GIVE_SCHEMA))


def policy(memory: bool = False, roundtrips: int = 3) -> AgentMemoryPolicy:
    p = AgentMemoryPolicy()
    p.configure_role(ROLE, system_prompt="You are Smith, a blacksmith.", use_memory_tool=memory,
                     max_output_tokens=60, temperature=0.0, max_tool_call_roundtrips=roundtrips)
    return p


def script(calls: list[dict[str, Any]], after: str = "Thirty gold.") -> Script:
    return Script.from_dict({"rules": [{"when": {"hint": "(?i)sword"}, "reply": "Let me see.", "tool_calls": calls,
                                        "after_tools": after}], "default": {"reply": "Hm?"}})


Answer = Callable[[ClientToolCallEvent], tuple[bool, str] | None]


def recording(seen: list[ClientToolCallEvent], reply: tuple[bool, str] | None) -> Answer:
    """An answer that keeps each call in `seen` and gives `reply` (None: never answers)."""

    def answer(event: ClientToolCallEvent) -> tuple[bool, str] | None:
        seen.append(event)
        return reply

    return answer


async def drive(orchestrator, request: AiTaskRequest, answer: Answer | None) -> list[TurnEvent]:
    """All events of a streamed turn; each client call answered with answer(event) (None: not answered)."""
    events: list[TurnEvent] = []
    async for event in orchestrator.stream_task(request):
        events.append(event)
        if isinstance(event, ClientToolCallEvent) and answer is not None:
            reply = answer(event)
            if reply is not None:
                orchestrator.submit_tool_result(event.turn_id, event.call_id, *reply)
    return events


def scripted_turn(stores: StoreBundle, the_script: Script, request: AiTaskRequest, answer: Answer | None, *,
                  mode: str = "native", memory: bool = False, **options: Any):
    """(events, request bodies sent, orchestrator) of one turn against the scripted model (in-process)."""
    orchestrator, model = scripted_orchestrator(stores, the_script, mode=mode, memory=memory, **options)
    events = run(drive(orchestrator, request, answer))
    return events, [r.body for r in model.requests], orchestrator


def scripted_orchestrator(stores: StoreBundle, the_script: Script, *, mode: str = "native", memory: bool = False,
                          **options: Any) -> tuple[AiOrchestrator, ScriptedModel]:
    """An orchestrator over the scripted model, in-process (model context: 2048, as the tiny model's)."""
    model = ScriptedModel(the_script)
    options.setdefault("model_context_tokens", 2048)
    return AiOrchestrator(policy(memory), stores, model, tool_mode=mode, **options), model


def of(events: list[TurnEvent], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


@pytest.mark.parametrize("mode", ["native", "structured"])
def test_round_trip_streams_the_call_waits_for_the_result_and_records_it(memory_stores: StoreBundle,
                                                                         mode: str) -> None:
    seen: list[ClientToolCallEvent] = []

    def answer(event: ClientToolCallEvent) -> tuple[bool, str]:
        seen.append(event)
        return True, '{"gold": 30}'

    events, bodies, orchestrator = scripted_turn(
        memory_stores, script([{"name": "quote_price", "arguments": {"item": "sword"}}]),
        AiTaskRequest("How much is a sword?", ROLE, client_tools=(price_tool(),)), answer, mode=mode)
    result = events[-1].result
    assert result.status is TurnStatus.OK and result.text.endswith("Thirty gold.")
    call, client_call, tool_result = of(events, ToolCallEvent)[0], seen[0], of(events, ToolResultEvent)[0]
    # Order: the model's call, then the request to act, then the result.
    assert events.index(call) < events.index(client_call) < events.index(tool_result)
    assert (client_call.call_id, client_call.name) == (call.call_id, "quote_price")
    assert json.loads(client_call.arguments_json) == {"item": "sword"} and client_call.timeout_ms == 30_000
    assert (tool_result.success, tool_result.content) == (True, '{"gold": 30}')
    # The model saw the tool declared, and its result in the next request.
    first, second = bodies
    if mode == "native":
        assert [t["function"]["name"] for t in first["tools"]] == ["quote_price"]
        assert second["messages"][-1] == {"role": "tool", "tool_call_id": call.call_id, "content": '{"gold": 30}'}
    else:
        assert "quote_price" in json.dumps(first["response_format"]["schema"])
        assert '"result": "{\\"gold\\": 30}"' in second["messages"][-1]["content"]
    rows = memory_stores.scoped().get_transcript(ROLE)
    assert [(r.kind, r.name) for r in rows] == [
        (TranscriptKind.USER, "user"), (TranscriptKind.TOOL_CALL, "quote_price"),
        (TranscriptKind.TOOL_RESULT, "quote_price"), (TranscriptKind.USER, "tool"), (TranscriptKind.ASSISTANT,
                                                                                      "assistant")]
    assert rows[1].call_id == rows[2].call_id == call.call_id
    assert orchestrator.client_calls.waiting == 0


def test_arguments_are_repaired_before_they_reach_the_client(memory_stores: StoreBundle) -> None:
    seen: list[ClientToolCallEvent] = []
    events, _, _ = scripted_turn(
        memory_stores, script([{"name": "quote_price", "arguments": {"Item": "SWORD", "qty": "2"}}]),
        AiTaskRequest("sword?", ROLE, client_tools=(price_tool(),)), recording(seen, (True, "30")))
    assert json.loads(seen[0].arguments_json) == {"item": "sword", "qty": 2}
    assert events[-1].result.status is TurnStatus.OK


def test_arguments_failing_the_schema_are_a_tool_error_and_never_reach_the_client(memory_stores: StoreBundle) -> None:
    seen: list[ClientToolCallEvent] = []
    events, bodies, _ = scripted_turn(
        memory_stores, script([{"name": "quote_price", "arguments": {"item": "hammer", "qty": "many"}}]),
        AiTaskRequest("sword?", ROLE, client_tools=(price_tool(),)), recording(seen, (True, "30")))
    assert seen == []
    result = of(events, ToolResultEvent)[0]
    assert not result.success and result.content.startswith("invalid arguments for tool 'quote_price': ")
    assert "item: 'hammer' is not one of ['sword', 'axe']" in result.content and "qty:" in result.content
    assert bodies[1]["messages"][-1]["content"] == result.content  # the model is told, the turn goes on
    assert events[-1].result.status is TurnStatus.OK


def test_a_call_nobody_answers_times_out_as_a_tool_error_and_a_late_result_is_refused(
        memory_stores: StoreBundle) -> None:
    seen: list[ClientToolCallEvent] = []
    events, _, orchestrator = scripted_turn(
        memory_stores, script([{"name": "give_item", "arguments": {"item": "sword"}}]),
        AiTaskRequest("sword?", ROLE, client_tools=(give_tool(),), client_tool_timeout=0.05),
        recording(seen, None))
    result = of(events, ToolResultEvent)[0]
    assert (result.success, result.content) == (False, "tool 'give_item' timed out: the game did not answer "
                                                       "within 0.05 s")
    assert seen[0].timeout_ms == 50 and events[-1].result.status is TurnStatus.OK
    with pytest.raises(ToolCallEndedError, match="timed out"):
        orchestrator.submit_tool_result(seen[0].turn_id, seen[0].call_id, True, "late")


def test_result_for_an_unknown_call_and_a_second_result_are_refused(memory_stores: StoreBundle) -> None:
    seen: list[ClientToolCallEvent] = []
    _, _, orchestrator = scripted_turn(
        memory_stores, script([{"name": "give_item", "arguments": {"item": "sword"}}]),
        AiTaskRequest("sword?", ROLE, client_tools=(give_tool(),)), recording(seen, (True, "given")))
    with pytest.raises(AlreadyExistsError):
        orchestrator.submit_tool_result(seen[0].turn_id, seen[0].call_id, True, "given again")
    with pytest.raises(NotFoundError):
        orchestrator.submit_tool_result(seen[0].turn_id, "call_99", True, "x")
    with pytest.raises(NotFoundError):
        orchestrator.submit_tool_result("no-such-turn", seen[0].call_id, True, "x")
    with pytest.raises(InvalidArgumentError):
        orchestrator.submit_tool_result("", "", True, "x")


def test_closing_the_stream_mid_call_cancels_the_turn_and_records_no_half_round(memory_stores: StoreBundle) -> None:
    async def go():
        orchestrator, _ = scripted_orchestrator(memory_stores, script([{"name": "give_item",
                                                                        "arguments": {"item": "sword"}}]))
        stream = orchestrator.stream_task(AiTaskRequest("sword?", ROLE, client_tools=(give_tool(),)))
        async for event in stream:
            if isinstance(event, ClientToolCallEvent):
                break  # the client went away while the turn waits for it
        await stream.aclose()
        return event, orchestrator

    event, orchestrator = run(go())
    assert orchestrator.client_calls.waiting == 0
    with pytest.raises(ToolCallEndedError, match="cancelled"):
        orchestrator.submit_tool_result(event.turn_id, event.call_id, True, "too late")
    rows = memory_stores.scoped().get_transcript(ROLE)
    assert [r.kind for r in rows] == [TranscriptKind.USER]  # the hint once; no call without its result


def test_cancelling_the_consumer_mid_call_cancels_the_turn(memory_stores: StoreBundle) -> None:
    async def go():
        orchestrator, _ = scripted_orchestrator(memory_stores, script([{"name": "give_item",
                                                                        "arguments": {"item": "sword"}}]))
        called = asyncio.Event()

        async def consume() -> None:
            async for event in orchestrator.stream_task(AiTaskRequest("sword?", ROLE, client_tools=(give_tool(),))):
                if isinstance(event, ClientToolCallEvent):
                    called.set()

        task = asyncio.create_task(consume())
        await called.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task.cancelled(), orchestrator.client_calls.waiting

    assert run(go()) == (True, 0)


def test_a_failed_result_is_what_the_model_sees(memory_stores: StoreBundle) -> None:
    events, bodies, _ = scripted_turn(
        memory_stores, script([{"name": "give_item", "arguments": {"item": "sword"}}]),
        AiTaskRequest("sword?", ROLE, client_tools=(give_tool(),)), lambda e: (False, "inventory full"))
    result = of(events, ToolResultEvent)[0]
    assert (result.success, result.content) == (False, "inventory full")
    assert bodies[1]["messages"][-1]["content"] == "inventory full"


@pytest.mark.parametrize("mode", ["native", "structured"])
def test_a_client_tool_and_a_memory_write_in_one_round(memory_stores: StoreBundle, mode: str) -> None:
    calls = [{"name": "memory", "arguments": {"action": "append", "content": "Bought a sword for 30 gold"}},
             {"name": "give_item", "arguments": {"item": "sword"}}]
    seen: list[ClientToolCallEvent] = []
    events, _, _ = scripted_turn(memory_stores, script(calls, after="Here you go."),
                                 AiTaskRequest("I'll buy the sword", ROLE, client_tools=(give_tool(),)),
                                 recording(seen, (True, "given")), mode=mode, memory=True)
    assert [e.name for e in seen] == ["give_item"]
    assert [(r.name, r.success) for r in of(events, ToolResultEvent)] == [("memory", True), ("give_item", True)]
    assert "Bought a sword for 30 gold" in loaded(memory_stores.scoped().try_load(ROLE)).memory
    rows = memory_stores.scoped().get_transcript(ROLE)
    assert [(r.kind, r.name) for r in rows if r.kind in (TranscriptKind.TOOL_CALL, TranscriptKind.TOOL_RESULT)] == [
        (TranscriptKind.TOOL_CALL, "memory"), (TranscriptKind.TOOL_CALL, "give_item"),
        (TranscriptKind.TOOL_RESULT, "memory"), (TranscriptKind.TOOL_RESULT, "give_item")]
    assert events[-1].result.status is TurnStatus.OK


def test_client_tools_need_the_stream_and_names_must_not_collide(memory_stores: StoreBundle) -> None:
    class Args(BaseModel):
        item: str

    registry = ToolRegistry()
    registry.register(ROLE, "appraise", "Appraise an item.", Args, lambda args: "fine")
    orchestrator, model = scripted_orchestrator(memory_stores, script([]), tools=registry)
    with pytest.raises(InvalidArgumentError, match="streaming call"):
        run(orchestrator.run_task(AiTaskRequest("x", ROLE, client_tools=(give_tool(),))))
    clash = client_tool_spec("Appraise", "Mine.", "")
    with pytest.raises(InvalidArgumentError, match="collides with a tool the runtime hosts"):
        run(drive(orchestrator, AiTaskRequest("x", ROLE, client_tools=(clash,)), None))
    with pytest.raises(InvalidArgumentError, match="declared twice"):
        run(drive(orchestrator, AiTaskRequest("x", ROLE, client_tools=(give_tool(), give_tool())), None))
    with pytest.raises(InvalidArgumentError, match="collides with the runtime's 'memory' tool"):
        client_tool_spec("Memory", "Mine.", "")
    assert model.requests == []  # refused before anything reached the model


@pytest.mark.parametrize(("schema", "message"), [
    ("[1]", 'must be a JSON Schema with "type": "object"'),
    ('{"type": "object"', "schema is not valid JSON"),
    ('{"type": "object", "properties": {"a": {"type": "sting"}}}', "invalid JSON Schema"),
    ('{"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}', "only local \\$ref"),
    ('{"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}', "does not resolve"),
])
def test_a_bad_schema_is_refused(schema: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        client_tool_spec("give_item", "Hand over.", schema)


def test_repair_decodes_double_encoded_arguments_and_drops_null_optionals() -> None:
    raw = json.dumps(json.dumps({"item": "Axe", "qty": None}))
    arguments, problem = repair_and_validate(price_tool(), ToolCall.from_raw("c1", "quote_price", raw))
    assert (arguments, problem) == ({"item": "axe"}, "")

