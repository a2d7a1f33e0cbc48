"""Failing, timed-out and cancelled turns, and context overflow: the hint is recorded exactly once.

The turn's decisions run on the model doubles, so each outcome is exact: a model that refuses any request above
its context (counted as the runtime counts) makes the overflow retries deterministic. The HTTP client's own
failures (a refused connection, a scripted server that stops mid-stream) keep their real sockets; an engine killed
mid-turn and a stream closed mid-reply on real llama.cpp are in test_turns_on_llama_server.py.
"""

from __future__ import annotations

import asyncio

import pytest

from pyruntime.history import CompactionKind, HeuristicTokenCounter, count_chat_tokens
from pyruntime.memory import MemoryTool
from pyruntime.model import OpenAICompatClient
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle
from pyruntime.testing import Answer, ChatRequest, RecordingModel, Reply, ScriptedError
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns import AiTaskRequest, CutReportEvent, TextDeltaEvent, TurnEvent, TurnStatus
from tests.support.doubles import chat_of, final, orchestrator_on, run, session_stores, stream_events, streamed
from tests.support.fixtures import free_port

HINT = "tell me everything"
SERVER_CONTEXT = 2048  # what the double's "server" holds; the runtime is told more


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Talker", system_prompt="You are Talker.", use_memory_tool=False, max_output_tokens=1500)
    return policy


class _CharTokens(HeuristicTokenCounter):
    """A tokenizer that makes every character a token (a run of one letter, to a real tokenizer)."""

    def count(self, text: str) -> int:
        return max(1, len(text))


def _context_of(tokens: int, reply: str = "Fine.", *, counter: HeuristicTokenCounter | None = None) -> RecordingModel:
    """A model with a context of `tokens`: a request whose prompt and output cap do not fit it is refused with
    llama-server's overflow error (counted by `counter`; default: as the runtime's default counter counts)."""
    counter = counter or HeuristicTokenCounter()

    def answer(request: ChatRequest) -> Reply:
        needed = count_chat_tokens(counter, request.messages) + (request.max_tokens or 0)
        if needed > tokens:
            return ScriptedError(400, f"request ({needed} tokens) exceeds the available context size ({tokens} "
                                      "tokens), try increasing it")
        return reply

    return RecordingModel(answer)


# -- the HTTP client's failures (real sockets, no model) ----------------------------------------------------


def test_unreachable_server_fails_and_records_the_hint_once(memory_stores: StoreBundle) -> None:
    # A model name skips the model listing: the chat request itself must fail.
    client = OpenAICompatClient(f"http://127.0.0.1:{free_port()}/v1", model="any")
    orchestrator = orchestrator_on(client, memory_stores, _policy())

    async def turn() -> TurnStatus:
        try:
            result = await orchestrator.run_task(AiTaskRequest(HINT, "Talker"))
        finally:
            await client.aclose()
        assert "cannot connect" in result.error
        return result.status

    assert run(turn()) is TurnStatus.FAILED
    assert chat_of(memory_stores, "Talker") == [("user", HINT)]


def test_a_turn_that_times_out_after_streaming_text_reports_its_completion_tokens(memory_stores: StoreBundle) -> None:
    # A timed-out turn that had streamed 13,026 characters once reported completion_tokens 0.
    script = {"rules": [], "default": {"pieces": [f"word{i} " for i in range(200)], "delay_ms": 100}}

    async def turn() -> list[TurnEvent]:
        server = ScriptedModelServer(Script.from_dict(script))
        await server.start()
        client = OpenAICompatClient(server.base_url)
        orchestrator = orchestrator_on(client, memory_stores, _policy())
        try:
            return await stream_events(orchestrator, AiTaskRequest(HINT, "Talker", timeout=2.0))
        finally:
            await client.aclose()
            await server.stop()

    events = run(turn())
    result = final(events)
    deltas = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert result.status is TurnStatus.TIMED_OUT and deltas  # cut mid-stream, after some text
    # The stream never reached its final usage chunk: the pieces streamed (one per token) are its tokens.
    assert result.usage.completion_tokens == len(deltas)


# -- timeouts and cancellation while the reply streams ------------------------------------------------------


def test_a_timeout_while_the_reply_streams_records_the_hint_once(memory_stores: StoreBundle) -> None:
    model = RecordingModel([Answer(tuple(f"w{i} " for i in range(100)), delay_ms=50)])
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    events = streamed(orchestrator, AiTaskRequest(HINT, "Talker", timeout=0.2))
    result = final(events)
    assert result.status is TurnStatus.TIMED_OUT and result.error == "the turn did not finish within 0.2 s"
    pieces = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert pieces and pieces == [f"w{i} " for i in range(len(pieces))] and len(pieces) < 100
    assert result.usage.completion_tokens == len(pieces)
    assert chat_of(memory_stores, "Talker") == [("user", HINT)]  # no half reply


def test_cancelling_run_task_while_the_reply_streams_records_once_and_propagates(memory_stores: StoreBundle) -> None:
    streaming = asyncio.Event()

    async def slow_story(request: ChatRequest) -> Reply:
        streaming.set()
        return Answer(tuple(f"w{i} " for i in range(100)), delay_ms=50)

    model = RecordingModel(slow_story)
    orchestrator = orchestrator_on(model, memory_stores, _policy())

    async def turn() -> None:
        task = asyncio.create_task(orchestrator.run_task(AiTaskRequest(HINT, "Talker")))
        await asyncio.wait_for(streaming.wait(), 30)
        await asyncio.sleep(0.12)  # a few pieces out
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert orchestrator.queue.busy is False  # the model's place is given back

    run(turn())
    assert len(model.requests) == 1
    assert chat_of(memory_stores, "Talker") == [("user", HINT)]


# -- context overflow ----------------------------------------------------------------------------------------


def _long_history(stores: StoreBundle, role: str, messages: int, chars: int) -> None:
    scoped = stores.scoped()
    for i in range(messages):
        content = f"{i:03d} " + "lorem ipsum " * (chars // 12)
        scoped.append_chat_message(role, "user" if i % 2 == 0 else "assistant", content)


def _chatter(stores: StoreBundle) -> str:
    """The Chatter role with 40 stored messages and a memory whose snapshot is behind by one append; its key."""
    _long_history(stores, "Chatter", 40, 100)
    key = stores.scoped().key("Chatter")
    MemoryTool(stores.memory, key).execute({"action": "write", "content": "A"})
    stores.memory.mutate(key, lambda s: s.evolve(system_prompt_memory_snapshot="A", system_prompt_memory_version=1))
    MemoryTool(stores.memory, key).execute({"action": "append", "content": "B"})
    return key


def _chatter_policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Chatter", system_prompt="You are Chatter.", max_output_tokens=16,
                          max_chat_history_messages=100, temperature=0.0)
    return policy


def test_overflows_retry_with_less_history_until_it_fits_and_consolidate_memory(memory_stores: StoreBundle) -> None:
    key = _chatter(memory_stores)
    # The budget believes in a bigger context than the server has: the first requests overflow.
    model = _context_of(800)
    orchestrator = orchestrator_on(model, memory_stores, _chatter_policy(), model_context_tokens=SERVER_CONTEXT)
    events = streamed(orchestrator, AiTaskRequest("so?", "Chatter", forced_tool_mode="none"))
    result = final(events)
    assert result.status is TurnStatus.OK and result.text == "Fine."
    assert result.cut_report is not None and result.cut_report.overflow_retries == 2
    assert result.usage.model_calls == 3 == len(model.requests)
    sizes = [len(r.messages) for r in model.requests]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3  # each retry sends less history
    counter = HeuristicTokenCounter()
    needed = [count_chat_tokens(counter, r.messages) + (r.max_tokens or 0) for r in model.requests]
    assert needed[0] > needed[1] > 800 >= needed[2]  # refused, refused, sent
    # One cut report per attempt, each before its request; the last describes the request that was answered.
    reports = [e.report for e in events if isinstance(e, CutReportEvent)]
    assert [r.overflow_retries for r in reports] == [0, 1, 2]
    assert [r.sent_verbatim for r in reports] == sorted((r.sent_verbatim for r in reports), reverse=True)
    assert reports[-1].sent_verbatim == result.cut_report.sent_verbatim < reports[0].sent_verbatim
    state = memory_stores.memory.try_load(key).state
    assert state is not None and state.system_prompt_memory_snapshot == "A\nB"  # consolidated
    assert not model.last.sends("## Memory (updates)")
    assert chat_of(memory_stores, "Chatter")[-2:] == [("user", "so?"), ("assistant", "Fine.")]


def test_an_overflow_of_the_player_message_alone_gives_up_after_three_retries(memory_stores: StoreBundle) -> None:
    # The runtime's estimate (4 characters a token) fits the hint; the model's tokenizer makes each x a token.
    model = _context_of(SERVER_CONTEXT, counter=_CharTokens())
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    hint = "x" * 5000  # never fits the 2048-token context, whatever the history
    result = run(orchestrator.run_task(AiTaskRequest(hint, "Talker", max_output_tokens=16)))
    assert result.status is TurnStatus.FAILED and "context window" in result.error
    assert result.usage.model_calls == 4 == len(model.requests)
    assert result.cut_report is not None and result.cut_report.overflow_retries == 3
    assert chat_of(memory_stores, "Talker") == [("user", hint)]


# -- the rolling summary -------------------------------------------------------------------------------------


def test_rolling_summary_is_committed_only_after_a_successful_turn(memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Folder", system_prompt="You are Folder.", use_memory_tool=False, max_output_tokens=8,
                          max_chat_history_messages=2)
    failed_stores = session_stores()
    for stores in (memory_stores, failed_stores):
        _long_history(stores, "Folder", 6, 24)
    good_model = RecordingModel(["Folded.", "Again."])
    good = orchestrator_on(good_model, memory_stores, policy)
    bad = orchestrator_on(RecordingModel([ScriptedError(503, "the model server is restarting")]), failed_stores,
                          policy)
    ok = run(good.run_task(AiTaskRequest("next", "Folder")))
    failed = run(bad.run_task(AiTaskRequest("next", "Folder")))
    run(good.run_task(AiTaskRequest("and then", "Folder")))
    assert ok.status is TurnStatus.OK and failed.status is TurnStatus.FAILED
    assert ok.cut_report is not None and failed.cut_report is not None
    assert ok.cut_report.compaction is failed.cut_report.compaction is CompactionKind.DETERMINISTIC
    summary = memory_stores.scoped().load_summary("Folder")
    assert summary is not None and summary.startswith("Previous conversation summary:")
    assert failed_stores.scoped().load_summary("Folder") is None
    sent = good_model.last.messages[1]  # the next turn sends it right after the system prompt
    assert sent["role"] == "system" and sent["content"].startswith("## Conversation Summary\n")
    assert "[fold:" not in sent["content"]  # the hidden marker never reaches the model
