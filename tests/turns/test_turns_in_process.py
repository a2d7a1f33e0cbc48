"""Turns against the in-process model doubles (`pyruntime.testing`): exact outcomes, no model process.

The real-llama.cpp twins of these tests (test_tool_calls.py, test_failures.py, test_client_tools.py)
prove the path through the engine; a random-weight model decides what it calls there, so they accept
either outcome. Here the replies are chosen, so every status, call, text piece and token count is exact.
Counted, never timed.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from pyruntime.memory import MemoryTool
from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, TranscriptKind, open_stores
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore
from pyruntime.testing import (
    Answer,
    ChatRequest,
    FunctionModel,
    InProcessModel,
    ScriptedCall,
    ScriptedError,
    ScriptedModel,
    scripted_answer,
)
from pyruntime.testing.scripted import scripted_usage
from pyruntime.turns import (
    AiOrchestrator,
    AiTaskRequest,
    CutReportEvent,
    FinalEvent,
    TaskResult,
    TextDeltaEvent,
    ToolCallEvent,
    ToolRegistry,
    ToolResultEvent,
    TurnStatus,
)
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from pyruntime.turns.events import TurnEvent
from pyruntime.turns.writer.passes import MemoryPassOutcome
from pyruntime.turns.writer.prompt import writer_schema
from tests.turns.conftest import run

HINT = "roll for me"
OVERFLOW = ScriptedError(400, "request (6021 tokens) exceeds the available context size (2048 tokens)")


class Roll(BaseModel):
    sides: int


class StrictRoll(BaseModel):
    sides: int

    @field_validator("sides")
    @classmethod
    def _never(cls, value: int) -> int:
        raise ValueError("this die cannot be rolled")


def dicer(args_model: type[BaseModel] = Roll, roundtrips: int | None = 3,
          max_output_tokens: int = 120) -> tuple[AgentMemoryPolicy, ToolRegistry, list[Any]]:
    policy = AgentMemoryPolicy()
    policy.configure_role("Dicer", system_prompt="You are Dicer.", use_memory_tool=False,
                          max_output_tokens=max_output_tokens, temperature=0.0, max_tool_call_roundtrips=roundtrips)
    calls: list[Any] = []

    def roll(args: BaseModel) -> dict[str, int]:
        calls.append(args)
        return {"rolled": 3}

    tools = ToolRegistry()
    tools.register("Dicer", "roll", "Roll a die with the given number of sides.", args_model, roll)
    return policy, tools, calls


def talker(**config: Any) -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Talker", system_prompt="You are Talker.", use_memory_tool=False, **config)
    return policy


def orchestrator_on(model: InProcessModel, stores: StoreBundle, policy: AgentMemoryPolicy,
                    **options: Any) -> AiOrchestrator:
    options.setdefault("model_context_tokens", 4096)
    return AiOrchestrator(policy, stores, model, **options)


def stream(orchestrator: AiOrchestrator, request: AiTaskRequest) -> list[TurnEvent]:
    async def go() -> list[TurnEvent]:
        return [e async for e in orchestrator.stream_task(request)]

    return run(go())


def final(events: list[TurnEvent]) -> TaskResult:
    last = events[-1]
    assert isinstance(last, FinalEvent)
    return last.result


def texts(events: list[TurnEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDeltaEvent)]


def chat(stores: StoreBundle, role: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in stores.scoped().get_chat_history(role)]


def sent_usage(model: InProcessModel, answers: list[Answer]) -> tuple[int, int]:
    """(prompt, completion) tokens the model reported over its requests, given what it answered to each."""
    counts = [scripted_usage(r.messages, a) for r, a in zip(model.requests, answers, strict=True)]
    return sum(p for p, _ in counts), sum(c for _, c in counts)


# -- the tool loop -------------------------------------------------------------------------------------------


def test_structured_mode_runs_the_forced_call_then_answers(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    model = ScriptedModel([ScriptedCall("roll", {"sides": 6}), "You rolled a 3."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="structured",
                                   max_calls_per_round=1)
    events = stream(orchestrator, AiTaskRequest(HINT, "Dicer", forced_tool_mode="roll"))
    result = final(events)
    assert result.status is TurnStatus.OK and result.text == "You rolled a 3."
    assert calls == [Roll(sides=6)]
    call, tool_result = [e for e in events if isinstance(e, ToolCallEvent | ToolResultEvent)]
    assert isinstance(call, ToolCallEvent) and (call.name, json.loads(call.arguments_json)) == ("roll", {"sides": 6})
    assert tool_result == ToolResultEvent(call.call_id, "roll", True, '{"rolled": 3}')
    assert "".join(texts(events)) == result.text
    first, second = (r.body for r in model.requests)
    assert first["response_format"]["schema"]["properties"]["tool_calls"]["minItems"] == 1  # forced
    assert "minItems" not in second["response_format"]["schema"]["properties"]["tool_calls"]  # released
    assistant, results = second["messages"][-2:]
    assert assistant == {"role": "assistant", "content": json.dumps(
        {"tool_calls": [{"name": "roll", "arguments": {"sides": 6}}], "reply": ""})}
    assert results == {"role": "user", "content": 'Tool results:\n{"name": "roll", "success": true, '
                                                  '"result": "{\\"rolled\\": 3}"}'}
    answers = [scripted_answer("", [ScriptedCall("roll", {"sides": 6})], structured=True),
               scripted_answer("You rolled a 3.", structured=True)]
    prompt, completion = sent_usage(model, answers)
    assert (result.usage.model_calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        2, prompt, completion)
    rows = memory_stores.scoped().get_transcript("Dicer")
    assert [r.kind for r in rows if not r.is_chat_message] == [TranscriptKind.TOOL_CALL, TranscriptKind.TOOL_RESULT]
    assert chat(memory_stores, "Dicer") == [
        ("user", HINT), ("tool", 'Tool results:\nroll (ok): {"rolled": 3}'), ("assistant", "You rolled a 3.")]


def test_native_mode_replays_the_call_and_its_result(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    model = ScriptedModel([ScriptedCall("roll", {"sides": 20}), "A three."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer", forced_tool_mode="roll")))
    assert result.status is TurnStatus.OK and result.text == "A three."
    assert calls == [Roll(sides=20)] and [(c.call_id, c.name) for c in result.tool_calls] == [("call_1", "roll")]
    first, second = (r.body for r in model.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "roll"}}
    assert "tool_choice" not in second
    assert second["messages"][-2:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "roll", "arguments": '{"sides": 20}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"rolled": 3}'}]


def test_three_failing_rounds_end_the_loop_and_a_closing_round_answers_in_words(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer(StrictRoll, roundtrips=None)
    model = ScriptedModel([*(ScriptedCall("roll", {"sides": n}) for n in (4, 6, 8)), "That die will not roll."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    events = stream(orchestrator, AiTaskRequest("roll", "Dicer", forced_tool_mode="roll"))
    result = final(events)
    assert calls == []  # invalid arguments never reach the handler
    assert result.status is TurnStatus.TOOL_LOOP_ENDED
    assert result.usage.model_calls == 4 and len(result.tool_results) == 3
    assert not any(r.success for r in result.tool_results)
    error = "invalid arguments for tool 'roll': sides: Value error, this die cannot be rolled"
    assert model.requests[1].messages[-1]["content"].startswith(error)  # fed back to the model
    # The loop's reason is the turn's error; the player hears the closing round, in which no tool may be called.
    assert result.error == f"I stopped using tools: 3 tool-call rounds in a row failed. Last error: {error}"
    closing = model.requests[3].body
    assert closing["tool_choice"] == "none" and [t["function"]["name"] for t in closing["tools"]] == ["roll"]
    assert closing["messages"] == model.requests[2].messages + closing["messages"][-2:]  # + the third call, its result
    assert result.text == "That die will not roll." and "".join(texts(events)) == result.text
    assert chat(memory_stores, "Dicer")[-1] == ("assistant", result.text)


def test_a_closing_round_that_says_nothing_leaves_the_loops_reason_as_the_reply(memory_stores: StoreBundle) -> None:
    policy, tools, _ = dicer(StrictRoll, roundtrips=None)
    model = ScriptedModel([ScriptedCall("roll", {"sides": n}) for n in (4, 6, 8, 10)])  # calls even when it may not
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    events = stream(orchestrator, AiTaskRequest("roll", "Dicer", forced_tool_mode="roll"))
    result = final(events)
    assert result.status is TurnStatus.TOOL_LOOP_ENDED and result.usage.model_calls == 4
    assert len(result.tool_calls) == 3  # the closing round's call is never run
    error = "invalid arguments for tool 'roll': sides: Value error, this die cannot be rolled"
    assert result.text == result.error == (
        f"I stopped using tools: 3 tool-call rounds in a row failed. Last error: {error}")
    assert texts(events) == [result.text]
    assert chat(memory_stores, "Dicer")[-1] == ("assistant", result.text)


def test_the_roundtrip_limit_ends_the_loop_exactly_there(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer(roundtrips=2)
    model = ScriptedModel([*(ScriptedCall("roll", {"sides": n}) for n in (4, 6, 8)), "Two threes."])  # asks again
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest("roll", "Dicer")))
    assert result.status is TurnStatus.TOOL_LOOP_ENDED
    assert result.usage.model_calls == 4  # two rounds ran; the third asked for more and was refused; the closing one
    assert calls == [Roll(sides=4), Roll(sides=6)] and [r.success for r in result.tool_results] == [True, True]
    assert result.error == ("I stopped using tools: this request reached its limit of 2 tool-call roundtrip(s) "
                            "before finishing.")
    assert result.text == "Two threes." and model.requests[3].body["tool_choice"] == "none"


def test_a_structured_closing_round_has_a_reply_only_schema_and_is_told_why(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer(roundtrips=1)
    answers = [scripted_answer("", [ScriptedCall("roll", {"sides": n})], structured=True) for n in (4, 6)]
    model = ScriptedModel([*answers, scripted_answer("A three, traveller.", structured=True)])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="structured",
                                   max_calls_per_round=1)
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert result.status is TurnStatus.TOOL_LOOP_ENDED and result.text == "A three, traveller."
    assert calls == [Roll(sides=4)] and result.usage.model_calls == 3
    closing = model.requests[2].body
    assert closing["response_format"]["schema"] == {
        "type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
    assert closing["messages"][:-1] == model.requests[1].messages[:-1]
    assert closing["messages"][-1] == {**model.requests[1].messages[-1], "content": (
        model.requests[1].messages[-1]["content"]
        + "\n\nYou cannot use tools any more in this turn: answer the player now, in words.")}


def test_a_turn_that_already_spoke_ends_the_loop_without_a_closing_round(memory_stores: StoreBundle) -> None:
    policy, tools, _ = dicer(roundtrips=1)
    answers = [scripted_answer("Let me roll.", [ScriptedCall("roll", {"sides": n})], structured=True) for n in (4, 6)]
    model = ScriptedModel(answers)
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="structured",
                                   max_calls_per_round=1)
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert result.status is TurnStatus.TOOL_LOOP_ENDED and result.usage.model_calls == 2
    assert result.text == "Let me roll.\n\nLet me roll."  # the rounds' own words, not the loop's reason
    assert result.error.startswith("I stopped using tools: this request reached its limit of 1")


def test_a_memory_call_edits_the_scoped_memory_and_the_next_turn_sees_it(memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Keeper", system_prompt="You are Keeper.", max_output_tokens=200, temperature=0.0)
    model = ScriptedModel([ScriptedCall("memory", {"action": "append", "content": "Likes axes"}), "Noted.",
                           "Axes, then."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest("I like axes", "Keeper")))
    assert result.status is TurnStatus.OK and result.text == "Noted."
    outcome = json.loads(result.tool_results[0].content)
    assert (outcome["Success"], outcome["Version"], outcome["Memory"]) == (True, 1, "Likes axes")
    loaded = memory_stores.scoped().try_load("Keeper").state
    assert loaded is not None and (loaded.latest_version, loaded.memory) == (1, "Likes axes")
    run(orchestrator.run_task(AiTaskRequest("what do I like?", "Keeper")))
    sent = "\n".join(str(m["content"]) for m in model.requests[-1].messages)
    assert "Likes axes" in sent  # the next turn's prompt carries the edited memory


def test_a_call_that_repeats_the_previous_one_exactly_is_not_run_again(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    model = ScriptedModel([ScriptedCall("roll", {"sides": 6}), ScriptedCall("roll", {"sides": 6}), "Done."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert result.status is TurnStatus.OK and result.text == "Done."
    assert calls == [Roll(sides=6)]  # once
    assert [r.success for r in result.tool_results] == [True, False]
    assert result.tool_results[1].content.startswith("this call repeats your previous call exactly (tool 'roll'")
    assert model.requests[2].messages[-1]["content"] == result.tool_results[1].content  # the model is told why


def test_a_structured_reply_that_repeats_a_successful_call_beside_an_answer_settles_the_turn(
        memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer()
    model = ScriptedModel([scripted_answer("", [ScriptedCall("roll", {"sides": 6})], structured=True),
                           scripted_answer("You rolled a 3.", [ScriptedCall("roll", {"sides": 6})], structured=True)])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="structured",
                                   max_calls_per_round=1)
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert result.status is TurnStatus.OK and result.text == "You rolled a 3."
    assert calls == [Roll(sides=6)] and result.usage.model_calls == 2  # the repeat is not run, nor asked about again
    assert [r.success for r in result.tool_results] == [True, False]


def test_a_structured_reply_that_repeats_a_failed_call_is_asked_again(memory_stores: StoreBundle) -> None:
    policy, tools, calls = dicer(StrictRoll)
    again = scripted_answer("Rolling.", [ScriptedCall("roll", {"sides": 6})], structured=True)
    model = ScriptedModel([again, again, scripted_answer("It will not roll.", structured=True)])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="structured",
                                   max_calls_per_round=1)
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert calls == [] and result.usage.model_calls == 3  # the failure's repeat needs another round
    assert result.status is TurnStatus.OK and result.text == "Rolling.\n\nRolling.\n\nIt will not roll."


def test_the_writer_design_stores_exactly_the_fact_the_pass_decided(memory_stores: StoreBundle) -> None:
    def model_of(request: ChatRequest) -> str:
        if "response_format" in request.body:  # the writer pass: its decision as the JSON it is constrained to
            return json.dumps({"kind": "fact", "topic": "name", "value": "Tobin"})
        return "Well met, Tobin."

    model = FunctionModel(model_of)
    orchestrator = orchestrator_on(model, memory_stores, AgentMemoryPolicy(), memory_design="writer")

    async def go() -> tuple[TaskResult, list[MemoryPassOutcome]]:
        result = await orchestrator.run_task(AiTaskRequest("My name is Tobin.", "SmartChat"))
        return result, await orchestrator.memory_passes.drain()

    result, outcomes = run(go())
    assert result.status is TurnStatus.OK and result.text == "Well met, Tobin."
    reply, decision = (r.body for r in model.requests)
    assert "tools" not in reply and "response_format" not in reply  # the reply itself carries no tool
    assert decision["response_format"] == {"type": "json_object", "schema": writer_schema("My name is Tobin.")}
    # version: the memory version the write made (the first one: 1), as WaitMemoryWrites reports it
    assert outcomes == [MemoryPassOutcome("SmartChat", stored="Player's name: Tobin", model_calls=1, version=1)]
    loaded = memory_stores.scoped().try_load("SmartChat").state
    assert loaded is not None and loaded.memory == "Player's name: Tobin" and loaded.latest_version == 1


def _writer_then_prewarm(slots: int, **options: Any) -> list[str]:
    """One writer-design turn (memory-last) with the prewarm on an engine of `slots` slots; the writer pass holds
    its answer until a prewarm went out (or a second passed): the order the model saw the requests in."""
    seen: list[str] = []
    prewarm_sent = asyncio.Event()

    async def model_of(request: ChatRequest) -> str:
        if "response_format" in request.body:
            seen.append("writer")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(prewarm_sent.wait(), 1.0)
            seen.append("writer done")
            return json.dumps({"kind": "fact", "topic": "name", "value": "Tobin"})
        if request.body.get("max_tokens") == PREWARM_MAX_TOKENS:
            seen.append("prewarm")
            prewarm_sent.set()
            return "."
        seen.append("turn")
        return "Well met, Tobin."

    async def go() -> None:
        stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
        MemoryTool(stores.memory, stores.scoped().key("SmartChat")).execute(
            {"action": "append", "content": "The player rides a grey mare."})  # a memory block to warm
        orchestrator = orchestrator_on(FunctionModel(model_of), stores, AgentMemoryPolicy(), memory_design="writer",
                                       queue=ModelRequestQueue(capacity=slots), memory_last=True, prewarm=True,
                                       **options)
        await orchestrator.run_task(AiTaskRequest("My name is Tobin.", "SmartChat"))
        await orchestrator.memory_passes.drain()
        await orchestrator.prewarms.drain()

    run(go())
    return seen


def test_with_several_slots_the_prewarm_does_not_wait_for_the_writer_pass() -> None:
    # The memory block before every player line: the pass runs in a slot of its own, the conversation's next
    # prefix (the block moved after the new exchange) is warmed while it decides, and warmed again after the
    # fact it stored (the block changed).
    assert _writer_then_prewarm(4, memory_last_stays=False) == ["turn", "writer", "prewarm", "writer done", "prewarm"]
    # The block where it was first sent (`memory_last_stays`): the next prefix only appends, the stored fact too
    # (its own block right before the next line): nothing to warm.
    assert _writer_then_prewarm(4, memory_last_stays=True) == ["turn", "writer", "writer done"]
    # By the player's pace (the default): this player waits for nothing, so the block moves.
    assert _writer_then_prewarm(4) == _writer_then_prewarm(4, memory_last_stays=False)
    # One slot: the pass's prompt replaces the conversation's, so the prewarm comes after it (and its edit).
    assert _writer_then_prewarm(1) == ["turn", "writer", "writer done", "prewarm"]


def _turns_with_the_block_that_stays(edits: dict[int, dict[str, str]]) -> list[list[dict[str, str]]]:
    """The requests of five writer-design turns with `memory_last_stays`, the game's memory `edits` before turn n."""
    def model_of(request: ChatRequest) -> str:
        if "response_format" in request.body:
            return json.dumps({"kind": "nothing"})
        return f"Reply {sum(m['role'] == 'user' for m in request.messages)}."

    async def go() -> list[list[dict[str, str]]]:
        stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
        key = stores.scoped().key("SmartChat")
        MemoryTool(stores.memory, key).execute({"action": "append", "content": "The player rides a grey mare."})
        model = FunctionModel(model_of)
        orchestrator = orchestrator_on(model, stores, AgentMemoryPolicy(), memory_design="writer", memory_last=True,
                                       memory_last_stays=True)
        for n, line in enumerate(["Which road is shorter?", "Is the bridge safe?", "Who keeps the inn?",
                                  "What is the inn called?", "Where is the smith?"]):
            if n in edits:
                MemoryTool(stores.memory, key).execute(edits[n])
            await orchestrator.run_task(AiTaskRequest(line, "SmartChat"))
            await orchestrator.memory_passes.drain()
        return [r.messages for r in model.requests if "response_format" not in r.body]

    sent = run(go())
    assert len(sent) == 5
    return sent


def _notes_at(messages: list[dict[str, str]]) -> list[int]:
    return [i for i, m in enumerate(messages) if "## Notes about the player" in m["content"]]


def test_the_memory_block_stays_where_it_was_first_sent_and_appended_lines_follow_where_they_were_sent() -> None:
    # The memory-last layout with `memory_last_stays`: turns that change nothing append only, so llama.cpp reuses the
    # whole previous request and reply; an appended fact is a block of its own right before the
    # player's line, which stays there too, so an append costs its own line.
    sent = _turns_with_the_block_that_stays({3: {"action": "append", "content": "The player owes 5 gold."}})
    notes = [_notes_at(messages) for messages in sent]
    assert notes[0] == [len(sent[0]) - 2]  # first sent right before the player's line
    for before, after in zip(sent, sent[1:], strict=False):  # every next turn only appends, the edit's too
        assert after[:len(before)] == before and after[len(before)]["role"] == "assistant"
    assert notes[1] == notes[2] == notes[0]
    assert notes[3] == [notes[0][0], len(sent[3]) - 2]
    assert sent[3][-2]["content"] == "## Notes about the player\nThe player owes 5 gold."
    assert notes[4] == notes[3] and "owes" not in sent[3][notes[0][0]]["content"]


def test_an_edit_that_is_not_an_append_puts_the_whole_memory_before_the_player_s_line_again() -> None:
    sent = _turns_with_the_block_that_stays({3: {"action": "write", "content": "The player rides a black horse."}})
    notes = [_notes_at(messages) for messages in sent]
    assert notes[0] == notes[1] == notes[2] == [len(sent[0]) - 2]
    assert notes[3] == [len(sent[3]) - 2] and sent[3][-2]["content"].endswith("The player rides a black horse.")
    assert "grey mare" not in str(sent[3]) and sent[3][:notes[0][0]] == sent[2][:notes[0][0]]
    assert notes[4] == notes[3]


# -- streaming, the output cap, usage ------------------------------------------------------------------------


def test_text_streams_exactly_as_the_model_sent_it_with_its_usage(memory_stores: StoreBundle) -> None:
    model = ScriptedModel([Answer(("Once ", "upon ", "a ", "time."))])
    orchestrator = orchestrator_on(model, memory_stores, talker(max_output_tokens=50))
    events = stream(orchestrator, AiTaskRequest("tell me a story", "Talker"))
    result = final(events)
    assert isinstance(events[0], CutReportEvent)
    assert texts(events) == ["Once ", "upon ", "a ", "time."] and result.text == "Once upon a time."
    prompt, completion = sent_usage(model, [Answer(("Once upon a time.",))])
    assert (result.usage.model_calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        1, prompt, completion)
    assert model.requests[0].body["stream"] is True and model.requests[0].body["max_tokens"] == 50
    assert chat(memory_stores, "Talker") == [("user", "tell me a story"), ("assistant", "Once upon a time.")]


def test_the_visible_reply_stops_at_the_output_cap_and_counts_its_pieces(memory_stores: StoreBundle) -> None:
    policy, tools, _ = dicer(max_output_tokens=3)  # tools offered: the cap is counted here, in pieces
    model = ScriptedModel(["one two three four five six"])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    events = stream(orchestrator, AiTaskRequest("count", "Dicer"))
    result = final(events)
    assert result.status is TurnStatus.OK
    assert texts(events) == ["one ", "two ", "three "] and result.text == "one two three "
    # The stream was closed before its usage chunk: the pieces streamed are its completion tokens.
    assert (result.usage.completion_tokens, result.usage.prompt_tokens) == (3, 0)


def test_usage_adds_up_over_the_rounds_of_a_turn(memory_stores: StoreBundle) -> None:
    policy, tools, _ = dicer()
    model = ScriptedModel([scripted_answer("Rolling.", [ScriptedCall("roll", {"sides": 6})]), "A three."])
    orchestrator = orchestrator_on(model, memory_stores, policy, tools=tools, tool_mode="native")
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Dicer")))
    assert result.status is TurnStatus.OK and result.text == "Rolling.\n\nA three."
    prompt, completion = sent_usage(model, [Answer(("Rolling.",)), Answer(("A three.",))])
    assert (result.usage.model_calls, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        2, prompt, completion)


# -- failures, cancellation, timeouts, context overflow ------------------------------------------------------


def test_a_model_that_is_down_fails_the_call_before_anything_is_recorded(memory_stores: StoreBundle) -> None:
    def restarting() -> None:
        raise ModelUnavailableError("the model is restarting", retry_after_s=2.0)

    model = ScriptedModel(["hi"], gate=restarting)
    orchestrator = orchestrator_on(model, memory_stores, talker())
    with pytest.raises(ModelUnavailableError, match="restarting"):
        run(orchestrator.run_task(AiTaskRequest("hello", "Talker")))
    assert model.requests == [] and chat(memory_stores, "Talker") == []


def test_a_model_error_mid_turn_fails_it_and_records_the_hint_once(memory_stores: StoreBundle) -> None:
    model = ScriptedModel([ScriptedError(500, "scripted failure")])
    orchestrator = orchestrator_on(model, memory_stores, talker())
    result = run(orchestrator.run_task(AiTaskRequest("hello", "Talker")))
    assert result.status is TurnStatus.FAILED and "HTTP 500" in result.error
    assert chat(memory_stores, "Talker") == [("user", "hello")]


def test_closing_the_stream_mid_reply_records_the_hint_once(memory_stores: StoreBundle) -> None:
    # One piece now, the next a minute later: the turn is closed while the model is still generating.
    model = ScriptedModel([Answer(("Once ", "upon ", "a ", "time."), delay_ms=60_000)])
    orchestrator = orchestrator_on(model, memory_stores, talker())

    async def go() -> list[str]:
        pieces: list[str] = []
        turn = orchestrator.stream_task(AiTaskRequest("tell me", "Talker"))
        async for event in turn:
            if isinstance(event, TextDeltaEvent):
                pieces.append(event.text)
                break
        await turn.aclose()
        return pieces

    assert run(asyncio.wait_for(go(), 30)) == ["Once "]
    assert chat(memory_stores, "Talker") == [("user", "tell me")]


def test_cancelling_run_task_while_the_model_thinks_records_once_and_propagates(memory_stores: StoreBundle) -> None:
    asked = asyncio.Event()

    async def never(request: ChatRequest) -> str:
        asked.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = FunctionModel(never)
    orchestrator = orchestrator_on(model, memory_stores, talker())

    async def go() -> None:
        task = asyncio.create_task(orchestrator.run_task(AiTaskRequest("hello", "Talker")))
        await asyncio.wait_for(asked.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    assert len(model.requests) == 1 and chat(memory_stores, "Talker") == [("user", "hello")]


def test_a_turn_timeout_while_the_model_thinks_is_timed_out(memory_stores: StoreBundle) -> None:
    model = ScriptedModel([Answer(("late",), first_delay_ms=60_000)])
    orchestrator = orchestrator_on(model, memory_stores, talker())
    result = run(orchestrator.run_task(AiTaskRequest("hello", "Talker", timeout=0.2)))
    assert result.status is TurnStatus.TIMED_OUT and "0.2 s" in result.error
    assert chat(memory_stores, "Talker") == [("user", "hello")]


def _long_history(stores: StoreBundle, role: str, messages: int, chars: int) -> None:
    scoped = stores.scoped()
    for i in range(messages):
        content = f"{i:03d} " + "lorem ipsum " * (chars // 12)
        scoped.append_chat_message(role, "user" if i % 2 == 0 else "assistant", content)


def test_one_context_overflow_retries_once_with_less_history_and_consolidates_memory(
    memory_stores: StoreBundle,
) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Chatter", system_prompt="You are Chatter.", max_output_tokens=16,
                          max_chat_history_messages=100, temperature=0.0)
    _long_history(memory_stores, "Chatter", 40, 100)
    key = memory_stores.scoped().key("Chatter")
    MemoryTool(memory_stores.memory, key).execute({"action": "write", "content": "A"})
    memory_stores.memory.mutate(key, lambda s: s.evolve(system_prompt_memory_snapshot="A",
                                                        system_prompt_memory_version=1))
    MemoryTool(memory_stores.memory, key).execute({"action": "append", "content": "B"})
    model = ScriptedModel([OVERFLOW, "Fine."])
    # A budget the 40 stored messages just fill: each retry has less room for them.
    orchestrator = orchestrator_on(model, memory_stores, policy, model_context_tokens=1200)
    events = stream(orchestrator, AiTaskRequest("so?", "Chatter", forced_tool_mode="none"))
    result = final(events)
    assert result.status is TurnStatus.OK and result.text == "Fine."
    assert result.cut_report is not None and result.cut_report.overflow_retries == 1
    assert result.usage.model_calls == 2
    first, second = (len(r.messages) for r in model.requests)
    assert second < first  # the retry sent less history
    reports = [e.report for e in events if isinstance(e, CutReportEvent)]
    assert [r.overflow_retries for r in reports] == [0, 1]  # one per attempt, each before its request
    assert reports[1].sent_verbatim == result.cut_report.sent_verbatim < reports[0].sent_verbatim
    loaded = memory_stores.memory.try_load(key).state
    assert loaded is not None and loaded.system_prompt_memory_snapshot == "A\nB"  # consolidated
    assert "## Memory (updates)" not in model.requests[-1].messages[-2]["content"]
    assert chat(memory_stores, "Chatter")[-2:] == [("user", "so?"), ("assistant", "Fine.")]


def test_overflow_gives_up_after_three_retries(memory_stores: StoreBundle) -> None:
    model = ScriptedModel([OVERFLOW])
    orchestrator = orchestrator_on(model, memory_stores, talker(max_output_tokens=16))
    result = run(orchestrator.run_task(AiTaskRequest("hello", "Talker")))
    assert result.status is TurnStatus.FAILED and "context window" in result.error
    assert result.usage.model_calls == 4 and len(model.requests) == 4
    assert result.cut_report is not None and result.cut_report.overflow_retries == 3
    assert chat(memory_stores, "Talker") == [("user", "hello")]


def test_the_example_in_the_testing_docs_runs() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text(encoding="utf-8")
    section = docs.split("## Testing your NPC logic without a model", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = compile(example, "docs/testing.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    coroutine = eval(code, namespace)  # its top-level await makes it a coroutine
    run(coroutine)
    assert namespace["result"].text == "Noted."


# -- recording -----------------------------------------------------------------------------------------------


def test_a_turn_the_store_fails_to_save_is_not_acknowledged(memory_stores: StoreBundle) -> None:
    class FullDisk(InMemoryAgentMemoryStore):  # the store memory_stores holds
        def append_transcript(self, key: str, entries: Any, persist: bool = True) -> None:
            raise OSError("no space left on device")

    stores = StoreBundle(FullDisk(), memory_stores.summaries, memory_stores.mode)
    orchestrator = orchestrator_on(ScriptedModel(["Hello there."]), stores, talker(with_chat_history=True))
    events = stream(orchestrator, AiTaskRequest("hi", "Talker"))
    result = final(events)
    assert "".join(texts(events)) == "Hello there."  # streamed before the save was tried
    assert result.status is TurnStatus.FAILED
    assert result.error == "the turn could not be saved (OSError): its reply is not in the history"
