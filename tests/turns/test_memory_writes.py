"""The game learns when memory changed (writer design): a pending write is said, waited for, streamed, and
never lands in the middle of the conversation's next turn.

The scripted model (a real OpenAI-compatible server) gives exact writer decisions and scripted delays,
so the order of a pass and a turn can be arranged; counted, never timed.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns import AiTaskRequest, FinalEvent, MemoryWriteEvent, TurnStatus
from pyruntime.turns.planning.memory_last import LAST_MEMORY_HEADING
from pyruntime.turns.writer.passes import NO_STATEMENT
from pyruntime.turns.writer.prompt import WRITER_SYSTEM
from tests.turns.conftest import RecordingClient, make_orchestrator, run

ROLE = "Bram"
NAME = json.dumps({"kind": "fact", "topic": "name", "value": "Tobin"})
STORED = "Player's name: Tobin"
KNOWN = LAST_MEMORY_HEADING


def policy() -> AgentMemoryPolicy:
    p = AgentMemoryPolicy()
    p.configure_role(ROLE, system_prompt="You are Bram, the village blacksmith.", temperature=0.0,
                     max_output_tokens=16)
    return p


def script(decision_delay_ms: int = 0, reply_delay_ms: int = 0) -> Script:
    writer = WRITER_SYSTEM[:30]
    return Script.from_dict({"rules": [
        {"when": {"system": writer, "hint": "Tobin"}, "reply": NAME, "first_delay_ms": decision_delay_ms},
        {"when": {"system": writer}, "reply": json.dumps({"kind": "nothing", "topic": "", "value": ""})},
        {"when": {"hint": "smithy"}, "reply": "Down the road.", "first_delay_ms": reply_delay_ms},
    ], "default": {"reply": "Good day."}})


def memory_of(stores: StoreBundle) -> str:
    loaded = stores.scoped().try_load(ROLE)
    return loaded.state.memory if loaded.state is not None else ""


def test_a_turn_says_its_write_is_pending_and_the_wait_by_trace_id_gets_it(memory_stores: StoreBundle) -> None:
    async def go():
        server = ScriptedModelServer(script(decision_delay_ms=300))
        await server.start()
        orchestrator, client = make_orchestrator(server.base_url, memory_stores, policy=policy(),
                                                 memory_design="writer")
        try:
            stated = await orchestrator.run_task(AiTaskRequest("My name is Tobin.", ROLE, trace_id="t-1"))
            in_memory_at_return = memory_of(memory_stores)
            writes, pending = await orchestrator.wait_memory_writes(ROLE, trace_id="t-1", timeout=30)
            again = await orchestrator.wait_memory_writes(ROLE, trace_id="t-1", timeout=0)  # landed: still found
            asked = await orchestrator.run_task(AiTaskRequest("Where is the smithy?", ROLE, trace_id="t-2"))
            question = await orchestrator.wait_memory_writes(ROLE, trace_id="t-2", timeout=0)
            other = await orchestrator.wait_memory_writes("Someone", trace_id="t-1", timeout=0)
            return stated, in_memory_at_return, writes, pending, again, asked, question, other
        finally:
            await client.aclose()
            await server.stop()

    stated, at_return, writes, pending, again, asked, question, other = run(go())
    assert stated.status is TurnStatus.OK and stated.memory_write_pending and stated.memory_write is None
    assert at_return == ""  # the reply came first: the turn said the write was still to come
    assert not pending and [w.stored for w in writes] == [STORED]
    assert writes[0].trace_id == "t-1" and writes[0].version == 1 and writes[0].changed
    assert again == (writes, False)
    assert memory_of(memory_stores) == STORED
    # A question stores nothing and is decided without the model: nothing pending, its outcome still waitable.
    assert not asked.memory_write_pending
    assert [(w.reason, w.changed) for w in question[0]] == [(NO_STATEMENT, False)]
    assert other == ([], False)  # another conversation's trace id is not this one's


def test_waiting_for_the_write_in_the_call_and_in_the_stream(memory_stores: StoreBundle) -> None:
    async def go():
        server = ScriptedModelServer(script())
        await server.start()
        orchestrator, client = make_orchestrator(server.base_url, memory_stores, policy=policy(),
                                                 memory_design="writer")
        try:
            waited = await orchestrator.run_task(AiTaskRequest("My name is Tobin.", ROLE, wait_memory_write=True))
            events = [e async for e in orchestrator.stream_task(
                AiTaskRequest("I'm Tobin, I said.", ROLE, wait_memory_write=True))]
            plain = [e async for e in orchestrator.stream_task(AiTaskRequest("I am Tobin.", ROLE))]
            asked = [e async for e in orchestrator.stream_task(
                AiTaskRequest("Where is the smithy?", ROLE, wait_memory_write=True))]
            orchestrator.policy.configure_role("Mute", use_memory_tool=False, max_output_tokens=8)
            no_memory = [e async for e in orchestrator.stream_task(
                AiTaskRequest("My name is Tobin.", "Mute", wait_memory_write=True))]
            await orchestrator.memory_passes.drain()
            return waited, events, plain, asked, no_memory
        finally:
            await client.aclose()
            await server.stop()

    waited, events, plain, asked, no_memory = run(go())
    assert not waited.memory_write_pending and waited.memory_write is not None
    assert waited.memory_write.stored == STORED and waited.memory_write.version == 1
    # The stream: the reply's final event first (the write still pending), then the write, last.
    final, write = events[-2], events[-1]
    assert isinstance(final, FinalEvent) and final.result.memory_write_pending
    assert isinstance(write, MemoryWriteEvent) and not write.write.changed and write.write.reason == "already stored"
    # Without asking, the stream ends with its final event, which says a write is still to come.
    assert isinstance(plain[-1], FinalEvent) and plain[-1].result.memory_write_pending
    assert not any(isinstance(e, MemoryWriteEvent) for e in plain)
    # A question is decided at once: nothing pending, and the stream still ends with its (empty) write.
    assert not asked[-2].result.memory_write_pending and asked[-1].write.reason == NO_STATEMENT
    # A role without memory has no write to wait for: its stream ends with the final event.
    assert isinstance(no_memory[-1], FinalEvent) and not no_memory[-1].result.memory_write_pending


def test_a_write_never_lands_while_the_next_turn_of_its_conversation_runs(memory_stores: StoreBundle) -> None:
    # The pass's decision takes a while; the player's next line starts a turn meanwhile, which plans its
    # prompt (memory still empty) and then waits for the model. The write must not land under that turn.
    async def go():
        server = ScriptedModelServer(script(decision_delay_ms=400, reply_delay_ms=400))
        await server.start()
        orchestrator, client = make_orchestrator(server.base_url, memory_stores, policy=policy(),
                                                 memory_design="writer")
        try:
            first = await orchestrator.run_task(AiTaskRequest("My name is Tobin.", ROLE, trace_id="t-1"))
            while len(client.bodies) < 2:  # the pass's decision request is out
                await asyncio.sleep(0.01)
            second = asyncio.ensure_future(orchestrator.run_task(AiTaskRequest("Where is the smithy?", ROLE)))
            while len(client.bodies) < 3:  # the second turn's reply request is out: its prompt is fixed
                await asyncio.sleep(0.01)
            memory_while_second_ran = memory_of(memory_stores)
            second_prompt = json.dumps(client.bodies[2]["messages"])
            await second
            writes, _ = await orchestrator.wait_memory_writes(ROLE, trace_id="t-1", timeout=30)
            await orchestrator.run_task(AiTaskRequest("Good morning!", ROLE))  # its prompt: the last body
            return first, memory_while_second_ran, second_prompt, writes, json.dumps(client.bodies[-1]["messages"])
        finally:
            await client.aclose()
            await server.stop()

    first, during, second_prompt, writes, third_prompt = run(go())
    assert first.memory_write_pending
    # The decision came back while the second turn waited for the model, yet the edit waited for that turn:
    # the memory the second turn ran with is the memory in its prompt.
    assert during == "" and STORED not in second_prompt
    assert [w.stored for w in writes] == [STORED] and memory_of(memory_stores) == STORED
    assert STORED in third_prompt  # clearly after: the next turn carries it


@pytest.mark.parametrize("send_earlier", [None, True])
def test_the_writer_design_sends_the_whole_memory_last_and_leaves_earlier_sessions_out(
        tmp_path, send_earlier) -> None:
    # SmolLM2-135M recalled 12/65 with the memory before a saved history, 32/65 with it last,
    # 37/65 with the earlier sessions' lines left out as well (docs/benchmarks.md#recall-layouts).
    from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
    from pyruntime.turns import build_orchestrator

    def role() -> AgentMemoryPolicy:
        p = policy()
        p.configure_role(ROLE, persist_chat_history=True, send_earlier_sessions=send_earlier)
        return p

    async def session(lines: list[str]) -> tuple[list[list[dict]], list]:
        server = ScriptedModelServer(Script.from_dict({"rules": [
            {"when": {"system": WRITER_SYSTEM[:30], "hint": "Tobin"}, "reply": NAME},
            {"when": {"system": WRITER_SYSTEM[:30], "hint": "gold"},
             "reply": json.dumps({"kind": "fact", "topic": "debt", "value": "5 gold"})},
        ], "default": {"reply": "Good day."}}))
        await server.start()
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
        client = RecordingClient(server.base_url)  # the real client, keeping the bodies
        orchestrator = build_orchestrator(base_url=server.base_url, stores=stores, policy=role(),
                                          tool_mode="structured", memory_design="writer", client=client)
        reports = []
        try:
            for line in lines:
                result = await orchestrator.run_task(AiTaskRequest(line, ROLE, wait_memory_write=True))
                reports.append(result.cut_report)
        finally:
            await client.aclose()
            await server.stop()
        return [b["messages"] for b in client.bodies if "response_format" not in b], reports  # the replies'

    (_, _, third), _ = run(session(["My name is Tobin.", "I owe you 5 gold.", "Nice day."]))
    (asked, again), reports = run(session(["What is my name?", "And what do I owe you?"]))  # a new process
    memory = KNOWN + "\nPlayer's name: Tobin\nPlayer's debt: 5 gold"
    # Within a session: the whole history, the memory last (the model keeps up: the block moves, block_pace.py).
    assert third[-2]["content"] == memory
    assert [m["content"] for m in third[1:5]] == ["My name is Tobin.", "Good day.", "I owe you 5 gold.", "Good day."]
    assert asked[-2]["content"] == memory and asked[-1] == {"role": "user", "content": "What is my name?"}
    earlier = ["My name is Tobin.", "I owe you 5 gold.", "Nice day."]
    if send_earlier:  # the role asks for its whole saved history
        assert [m["content"] for m in asked[1:7:2]] == earlier and not reports[0].earlier_session_ids
    else:  # the earlier session's lines are left out, and the cut report says so; this session's stay
        assert [m["role"] for m in asked] == ["system", "system", "user"]
        assert len(reports[0].earlier_session_ids) == 6 and reports[0].sent_verbatim == 0
        assert [m["content"] for m in again[1:3]] == ["What is my name?", "Good day."]
    text = json.dumps(asked)
    assert "## Memory" not in text and text.count("Player's name: Tobin") == 1
