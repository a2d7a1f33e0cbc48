"""The memory writer pass on the model doubles: what is sent, when, and what reaches the store.

The doubles decide as the scripted writer does (a JSON decision per statement), so what is stored is asserted exactly;
that llama-server takes the decision schema as a grammar is tested in test_turns_on_llama_server.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pyruntime.cli.chat import free_port
from pyruntime.memory import MemoryTool
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.queue import ModelRequestQueue, Priority
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig
from pyruntime.stores import StoreBundle
from pyruntime.testing import ChatRequest, RecordingModel
from pyruntime.turns import AiTaskRequest, TurnStatus
from pyruntime.turns.writer.decision import MemoryDesign
from pyruntime.turns.writer.passes import (
    KEPT_OUTCOMES,
    MemoryPasses,
    MemoryPassOutcome,
    apply_decision,
    run_memory_pass,
)
from pyruntime.turns.writer.prompt import WRITER_MAX_TOKENS, WRITER_SYSTEM, WriterDecision, writer_schema
from tests.support.doubles import orchestrator_on, run
from tests.support.loads import loaded

ROLE = "SmartChat"
# The decision for each statement the writer is asked about; any other statement: nothing to keep.
DECISIONS = {"My name is Tobin.": ("name", "Tobin"), "My name is Alaric": ("name", "Alaric"),
             "I love horses.": ("horses", "love horses")}


def _is_decision(request: ChatRequest) -> bool:
    return request.system_prompt == WRITER_SYSTEM


def _writer_and_npc(request: ChatRequest) -> str:
    """The writer's decision (JSON) for a decision request, else the NPC's short reply."""
    if not _is_decision(request):
        return "Well met."
    topic, value = DECISIONS.get(request.last_text, ("", ""))
    return json.dumps({"kind": "fact" if value else "nothing", "topic": topic, "value": value})


def _model() -> RecordingModel:
    return RecordingModel(_writer_and_npc)


def test_writer_design_replies_without_the_tool_then_runs_one_constrained_pass(file_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, file_stores, memory_design="writer")

    async def go() -> tuple[TurnStatus, list[MemoryPassOutcome]]:
        result = await orchestrator.run_task(AiTaskRequest(hint="My name is Tobin.", role_id=ROLE,
                                                           max_output_tokens=8))
        return result.status, await orchestrator.memory_passes.drain()

    status, outcomes = run(go())
    assert status is TurnStatus.OK
    reply, decision = (r.body for r in model.requests)
    # The reply is plain text: no memory tool, no grammar (a small model's reply is not delayed by JSON).
    assert "response_format" not in reply and "tools" not in reply
    assert "## Tools" not in reply["messages"][0]["content"]  # no tool contract (and no format example to copy)
    # The pass: the writer's schema as a grammar, greedy, capped, the player's line last.
    assert decision["response_format"] == {"type": "json_object", "schema": writer_schema("My name is Tobin.")}
    assert decision["response_format"]["schema"]["properties"]["value"]["enum"][:3] == ["", "My", "My name"]
    assert decision["temperature"] == 0.0 and decision["max_tokens"] == WRITER_MAX_TOKENS
    assert decision["messages"][-1] == {"role": "user", "content": "My name is Tobin."}
    assert outcomes == [MemoryPassOutcome(ROLE, stored="Player's name: Tobin", model_calls=1, version=1)]
    assert loaded(file_stores.scoped().try_load(ROLE)).memory == "Player's name: Tobin"


def test_no_pass_for_questions_roles_without_memory_failed_turns_or_the_tool_design(
        memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.set(RoleMemoryConfig("Quiet", use_memory_tool=False))
    writer_model, tool_model = _model(), _model()
    writer = orchestrator_on(writer_model, memory_stores, policy, memory_design="writer")
    tool = orchestrator_on(tool_model, memory_stores, policy, memory_design="tool")

    async def go() -> tuple[list[MemoryPassOutcome], list[MemoryPassOutcome]]:
        await writer.run_task(AiTaskRequest(hint="Where is the smithy?", role_id=ROLE, max_output_tokens=4))
        await writer.run_task(AiTaskRequest(hint="My name is Tobin.", role_id="Quiet", max_output_tokens=4))
        timed_out = await writer.run_task(AiTaskRequest(hint="My name is Tobin.", role_id=ROLE, max_output_tokens=4,
                                                        timeout=1e-6))  # no pass for a turn that did not end
        assert timed_out.status is TurnStatus.TIMED_OUT
        await tool.run_task(AiTaskRequest(hint="My name is Tobin.", role_id=ROLE, max_output_tokens=4))
        return await writer.memory_passes.drain(), await tool.memory_passes.drain()

    writer_outcomes, tool_outcomes = run(go())
    # The question's pass decided without the model; nothing else started one.
    assert writer_outcomes == [MemoryPassOutcome(ROLE, reason="no statement about the player")]
    assert tool_outcomes == []
    assert [r.last_text for r in writer_model.requests] == ["Where is the smithy?", "My name is Tobin."]
    assert [_is_decision(r) or r.response_format is not None for r in writer_model.requests] == [False, False]
    # The tool design keeps the contract's memory tool in the reply (grammar with a memory branch).
    assert [r.tool_names for r in tool_model.requests] == [("memory",)]
    assert tool_model.last.schema is not None


def test_forcing_the_memory_tool_by_name_offers_it_in_the_writer_design(memory_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, memory_design="writer")

    async def go() -> None:
        await orchestrator.run_task(AiTaskRequest(hint="Remember: sword Dawnbreaker.", role_id=ROLE,
                                                  forced_tool_mode="memory", max_output_tokens=64))
        await orchestrator.memory_passes.drain()

    run(go())
    assert model.requests[0].tool_names == ("memory",) and model.requests[0].schema is not None


def test_a_pass_waits_behind_player_turns(memory_stores: StoreBundle) -> None:
    model = _model()
    queue = ModelRequestQueue()
    tool = MemoryTool(memory_stores.memory, memory_stores.scoped().key(ROLE))

    async def go() -> tuple[int, MemoryPassOutcome]:
        async with queue.slot(Priority.PLAYER):
            task = asyncio.ensure_future(run_memory_pass(model, queue, tool, ROLE, "My name is Tobin."))
            await asyncio.sleep(0.2)
            sent_while_player_held_the_model = len(model.requests)
        return sent_while_player_held_the_model, await task

    sent_while_held, outcome = run(go())
    assert sent_while_held == 0
    assert [r.last_text for r in model.requests] == ["My name is Tobin."]
    assert outcome.stored == "Player's name: Tobin"


def test_a_model_failure_is_an_outcome_not_an_error(memory_stores: StoreBundle) -> None:
    # A port nothing listens on: the real connection failure.
    client = OpenAICompatClient(f"http://127.0.0.1:{free_port('127.0.0.1')}/v1", timeout=5.0)
    tool = MemoryTool(memory_stores.memory, memory_stores.scoped().key(ROLE))
    passes = MemoryPasses()

    async def go() -> list[MemoryPassOutcome]:
        try:
            passes.start(run_memory_pass(client, ModelRequestQueue(), tool, ROLE, "My name is Tobin."), ROLE)
            assert passes.pending == 1
            return await passes.drain()
        finally:
            await client.aclose()

    outcomes = run(go())
    assert outcomes == [MemoryPassOutcome(ROLE, reason="the model is unavailable")]
    assert passes.pending == 0 and memory_stores.scoped().try_load(ROLE).state is None


def test_apply_decision_writes_versions_replaces_on_correction_and_refuses_safely(file_stores: StoreBundle) -> None:
    tool = MemoryTool(file_stores.memory, file_stores.scoped().key(ROLE))
    first = apply_decision(tool, ROLE, WriterDecision(True, "name", "Oswin"), "My name is Oswin.")
    assert first == MemoryPassOutcome(ROLE, stored="Player's name: Oswin", model_calls=1, version=1)
    assert first.summary() == "stored: Player's name: Oswin"
    fixed = apply_decision(tool, ROLE, WriterDecision(True, "name", "Osric"), "Sorry, my name is Osric.")
    assert fixed.summary() == "replaced: Player's name: Oswin -> Player's name: Osric"
    refused = apply_decision(tool, ROLE, WriterDecision(True, "name", "Zed"), "Thanks a lot!")
    assert refused.summary() == "nothing stored (the value is not in the player's message)"
    state = file_stores.scoped().try_load(ROLE).state
    assert state is not None and state.memory == "Player's name: Osric"
    assert [v.action for v in state.versions] == ["append", "str_replace"]
    # The role's size limit holds for the writer as for any memory call: refused, nothing changed.
    small = MemoryTool(file_stores.memory, file_stores.scoped().key(ROLE), max_memory_chars=25)
    over = apply_decision(small, ROLE, WriterDecision(True, "order", "a steel dagger"), "I order a steel dagger.")
    assert not over.stored and "limit" in over.reason.lower()
    assert loaded(file_stores.scoped().try_load(ROLE)).memory == "Player's name: Osric"


def test_an_unreadable_memory_document_is_never_overwritten(file_stores: StoreBundle, tmp_path: Path) -> None:
    tool = MemoryTool(file_stores.memory, file_stores.scoped().key(ROLE))
    apply_decision(tool, ROLE, WriterDecision(True, "name", "Oswin"), "My name is Oswin.")
    documents = [p for p in tmp_path.rglob("*.json") if ROLE in p.name]
    assert documents
    documents[0].write_text("{not json", encoding="utf-8")
    outcome = apply_decision(tool, ROLE, WriterDecision(True, "order", "a dagger"), "I order a dagger.")
    assert not outcome.stored and "could not be read" in outcome.reason
    assert documents[0].read_text(encoding="utf-8") == "{not json"


def test_design_is_reported_by_the_orchestrator(memory_stores: StoreBundle) -> None:
    # The orchestrator's own default: the contract's tool.
    assert orchestrator_on(_model(), memory_stores).settings.memory_design is MemoryDesign.TOOL


def test_uncollected_outcomes_are_bounded(memory_stores: StoreBundle) -> None:
    passes = MemoryPasses()

    async def outcome(index: int) -> MemoryPassOutcome:
        return MemoryPassOutcome(ROLE, reason=str(index))

    async def go() -> list[MemoryPassOutcome]:
        for index in range(KEPT_OUTCOMES + 10):
            passes.start(outcome(index), ROLE)
        return await passes.drain()

    outcomes = run(go())
    assert len(outcomes) == KEPT_OUTCOMES and outcomes[-1].reason == str(KEPT_OUTCOMES + 9)  # the newest kept
    assert run(passes.drain()) == []


def test_a_stop_gives_passes_the_grace_period_then_cancels_the_rest() -> None:
    # serve's stop: a pass waiting behind a hung engine must not hold it up (unbounded, a stop took 60 s+).
    passes = MemoryPasses()

    async def quick() -> MemoryPassOutcome:
        await asyncio.sleep(0.01)
        return MemoryPassOutcome(ROLE, stored="Player's name: Tobin")

    async def stuck() -> MemoryPassOutcome:
        await asyncio.Event().wait()  # never set: the model never answers
        raise AssertionError("unreachable")

    async def go() -> list[MemoryPassOutcome]:
        passes.start(quick(), ROLE)
        passes.start(stuck(), ROLE)
        return await asyncio.wait_for(passes.stop(0.5), timeout=10)

    outcomes = run(go())
    assert sorted(o.stored or o.reason for o in outcomes) == ["Player's name: Tobin", "cancelled"]
    assert passes.pending == 0


def test_a_line_with_two_statements_gets_a_decision_for_each(file_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, file_stores, memory_design="writer")

    async def go() -> list[MemoryPassOutcome]:
        await orchestrator.run_task(AiTaskRequest(hint="My name is Alaric and I love horses.", role_id=ROLE,
                                                  max_output_tokens=8))
        return await orchestrator.memory_passes.drain()

    outcomes = run(go())
    _, *decisions = model.requests
    assert [d.last_text for d in decisions] == ["My name is Alaric", "I love horses."]
    # Each decision's value may only be words of its own statement.
    assert [d.schema for d in decisions] == [writer_schema("My name is Alaric"), writer_schema("I love horses.")]
    # One outcome per line, as the chat shows it, with both writes.
    [line] = outcomes
    assert (line.stored, line.model_calls) == ("Player's name: Alaric", 2)
    memory = loaded(file_stores.scoped().try_load(ROLE)).memory
    assert memory == "Player's name: Alaric\nPlayer's horse: love horses"  # the topic in the singular


def test_the_outcome_of_a_line_lists_every_write_first() -> None:
    nothing = MemoryPassOutcome(ROLE, reason="nothing to keep", model_calls=1)
    name = MemoryPassOutcome(ROLE, stored="Player's name: Alaric", model_calls=1)
    horse = MemoryPassOutcome(ROLE, stored="Player's horse: Shadowfax", replaced="Player's horse: Dobbin",
                              model_calls=1)
    line = MemoryPassOutcome.of_line([nothing, name, horse])
    assert (line.stored, line.model_calls, line.more) == ("Player's name: Alaric", 3, (horse, nothing))
    assert line.summary() == ("stored: Player's name: Alaric; "
                              "replaced: Player's horse: Dobbin -> Player's horse: Shadowfax")
    assert MemoryPassOutcome.of_line([nothing]) == nothing
    assert MemoryPassOutcome.of_line([nothing, nothing]).summary() == "nothing stored (nothing to keep)"
