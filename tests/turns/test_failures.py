"""Failing, timed-out and cancelled turns, and context overflow: the hint is recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyruntime.history import CompactionKind, LlamaTokenCounter
from pyruntime.memory import MemoryTool
from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns import AiTaskRequest, CutReportEvent, FinalEvent, TaskResult, TextDeltaEvent, TurnEvent, TurnStatus
from tests.support.fixtures import free_port, start_llama_server
from tests.support.loads import loaded
from tests.turns.conftest import make_orchestrator, run

HINT = "tell me everything"


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Talker", system_prompt="You are Talker.", use_memory_tool=False, max_output_tokens=1500)
    return policy


def _chat(stores: StoreBundle, role: str = "Talker") -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in stores.scoped().get_chat_history(role)]


@pytest.fixture(scope="module")
def endless_server(tiny_endless_model_path: Path) -> Iterator[LlamaServerProcess]:
    """A server whose replies run to max_tokens (long streams to interrupt)."""
    server = start_llama_server(tiny_endless_model_path)
    yield server
    server.stop()


def test_server_killed_mid_turn_fails_and_records_the_hint_once(
    tiny_endless_model_path: Path, memory_stores: StoreBundle
) -> None:
    server = start_llama_server(tiny_endless_model_path)
    assert server.pid is not None
    pid = server.pid
    orchestrator, client = make_orchestrator(server.base_url, memory_stores, policy=_policy())

    async def turn() -> list:
        events = []
        async for event in orchestrator.stream_task(AiTaskRequest(HINT, "Talker")):
            events.append(event)
            if isinstance(event, TextDeltaEvent) and server.is_alive():
                os.kill(pid, signal.SIGKILL)
        await client.aclose()
        return events

    try:
        events = run(turn())
    finally:
        server.stop()
    result = events[-1].result
    assert any(isinstance(e, TextDeltaEvent) for e in events)
    assert result.status is TurnStatus.FAILED and "model server" in result.error
    assert _chat(memory_stores) == [("user", HINT)]  # exactly once, and no assistant message


def test_unreachable_server_fails_and_records_the_hint_once(memory_stores: StoreBundle) -> None:
    # A model name skips the model listing: the chat request itself must fail.
    orchestrator, client = make_orchestrator(f"http://127.0.0.1:{free_port()}/v1", memory_stores, policy=_policy(),
                                             model="any")
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Talker")))
    run(client.aclose())
    assert result.status is TurnStatus.FAILED and "cannot connect" in result.error
    assert _chat(memory_stores) == [("user", HINT)]


def test_timeout_records_the_hint_once(endless_server: LlamaServerProcess, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(endless_server.base_url, memory_stores, policy=_policy())
    result = run(orchestrator.run_task(AiTaskRequest(HINT, "Talker", timeout=0.2)))
    run(client.aclose())
    assert result.status is TurnStatus.TIMED_OUT and "0.2 s" in result.error
    assert _chat(memory_stores) == [("user", HINT)]


def test_closing_the_stream_cancels_and_records_once(endless_server: LlamaServerProcess,
                                                     memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(endless_server.base_url, memory_stores, policy=_policy())

    async def turn() -> int:
        stream = orchestrator.stream_task(AiTaskRequest(HINT, "Talker"))
        deltas = 0
        async for event in stream:
            deltas += isinstance(event, TextDeltaEvent)
            if deltas == 3:
                break
        await stream.aclose()
        await client.aclose()
        return deltas

    assert run(turn()) == 3
    assert _chat(memory_stores) == [("user", HINT)]


def test_cancelling_run_task_records_once_and_propagates(endless_server: LlamaServerProcess,
                                                         memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(endless_server.base_url, memory_stores, policy=_policy())

    async def turn() -> None:
        task = asyncio.create_task(orchestrator.run_task(AiTaskRequest(HINT, "Talker")))
        while orchestrator.queue.busy is False and not task.done():
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.aclose()

    run(turn())
    assert _chat(memory_stores) == [("user", HINT)]


def _long_history(stores: StoreBundle, role: str, messages: int, chars: int) -> None:
    scoped = stores.scoped()
    for i in range(messages):
        content = f"{i:03d} " + "lorem ipsum " * (chars // 12)
        scoped.append_chat_message(role, "user" if i % 2 == 0 else "assistant", content)


def test_overflow_retries_with_a_smaller_history_and_consolidates_memory(
    tiny_server_url: str, tiny_model_path: Path, memory_stores: StoreBundle
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
    # The budget believes in a bigger context than the server has: the first request overflows.
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, model_context_tokens=3400,
                                             token_counter=LlamaTokenCounter(tiny_model_path))
    result = run(orchestrator.run_task(AiTaskRequest("so?", "Chatter", forced_tool_mode="none")))
    run(client.aclose())
    assert result.status is TurnStatus.OK and result.cut_report is not None
    assert 1 <= result.cut_report.overflow_retries <= 3
    assert result.usage.model_calls == result.cut_report.overflow_retries + 1
    sizes = [len(b["messages"]) for b in client.bodies]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]  # each retry sends less history
    state: AgentMemoryState = loaded(memory_stores.memory.try_load(key))
    assert state.system_prompt_memory_snapshot == "A\nB"  # consolidated
    assert "## Memory (updates)" not in client.bodies[-1]["messages"][-2]["content"]
    chat = _chat(memory_stores, "Chatter")
    assert chat[-2:] == [("user", "so?"), ("assistant", result.text)]


def test_after_an_overflow_retry_the_streamed_cut_report_describes_the_request_sent(
    tiny_server_url: str, tiny_model_path: Path, memory_stores: StoreBundle
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
    # The budget believes in a bigger context than the server has: the first request overflows.
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, model_context_tokens=3400,
                                             token_counter=LlamaTokenCounter(tiny_model_path))

    async def turn() -> list:
        events = [e async for e in orchestrator.stream_task(AiTaskRequest("so?", "Chatter", forced_tool_mode="none"))]
        await client.aclose()
        return events

    events = run(turn())
    final = events[-1].result
    assert final.status is TurnStatus.OK and final.cut_report.overflow_retries >= 1
    reports = [e.report for e in events if isinstance(e, CutReportEvent)]
    assert len(reports) == final.cut_report.overflow_retries + 1  # one per attempt, each before its request
    first, last = reports[0], reports[-1]
    assert first.sent_verbatim > last.sent_verbatim  # the retry sent less history
    assert (last.sent_verbatim, last.overflow_retries) == (final.cut_report.sent_verbatim,
                                                           final.cut_report.overflow_retries)
    assert [r.overflow_retries for r in reports] == list(range(len(reports)))


def test_overflow_gives_up_after_three_retries(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    hint = "x" * 5000  # never fits the 2048-token context, whatever the history

    async def turn():
        try:
            return await orchestrator.run_task(AiTaskRequest(hint, "Talker", max_output_tokens=16))
        finally:
            await client.aclose()  # on the loop of its kept-alive connection

    result = run(turn())
    assert result.status is TurnStatus.FAILED and "context window" in result.error
    assert result.usage.model_calls == 4 and result.cut_report.overflow_retries == 3
    assert _chat(memory_stores) == [("user", hint)]


def test_rolling_summary_is_committed_only_after_a_successful_turn(
    tiny_server_url: str, memory_stores: StoreBundle
) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Folder", system_prompt="You are Folder.", use_memory_tool=False, max_output_tokens=8,
                          max_chat_history_messages=2)
    failed_stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
    for stores in (memory_stores, failed_stores):
        _long_history(stores, "Folder", 6, 24)
    good, good_client = make_orchestrator(tiny_server_url, memory_stores, policy=policy)
    # A model name: no model listing first, the chat request itself must fail.
    bad, bad_client = make_orchestrator(f"http://127.0.0.1:{free_port()}/v1", failed_stores, policy=policy,
                                        model="any")
    ok = run(good.run_task(AiTaskRequest("next", "Folder")))
    failed = run(bad.run_task(AiTaskRequest("next", "Folder")))
    run(good.run_task(AiTaskRequest("and then", "Folder")))
    run(good_client.aclose())
    run(bad_client.aclose())
    assert ok.status is TurnStatus.OK and failed.status is TurnStatus.FAILED
    assert ok.cut_report is not None and failed.cut_report is not None
    assert ok.cut_report.compaction is failed.cut_report.compaction is CompactionKind.DETERMINISTIC
    stored = memory_stores.scoped().load_summary("Folder")
    assert stored is not None and stored.startswith("Previous conversation summary:")
    assert failed_stores.scoped().load_summary("Folder") is None
    summary = good_client.bodies[-1]["messages"][1]  # the next turn sends it right after the system prompt
    assert summary["role"] == "system" and summary["content"].startswith("## Conversation Summary\n")
    assert "[fold:" not in summary["content"]  # the hidden marker never reaches the model


def test_a_turn_that_times_out_after_streaming_text_reports_its_completion_tokens(memory_stores: StoreBundle) -> None:
    # A timed-out turn that streamed text reports the tokens it streamed, not completion_tokens 0.
    from pyruntime.testing.scripted import Script
    from pyruntime.testing.scripted_server import ScriptedModelServer

    script = {"rules": [], "default": {"pieces": [f"word{i} " for i in range(200)], "delay_ms": 100}}

    async def turn() -> tuple[list[TurnEvent], TaskResult]:
        server = ScriptedModelServer(Script.from_dict(script))
        await server.start()
        orchestrator, client = make_orchestrator(server.base_url, memory_stores, policy=_policy())
        try:
            events = [e async for e in orchestrator.stream_task(AiTaskRequest(HINT, "Talker", timeout=2.0))]
        finally:
            await client.aclose()
            await server.stop()
        final = events[-1]
        assert isinstance(final, FinalEvent)
        return events, final.result

    events, result = run(turn())
    deltas = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert result.status is TurnStatus.TIMED_OUT and deltas  # cut mid-stream, after some text
    # The stream never reached its final usage chunk: the pieces streamed (one per token) are its tokens.
    assert result.usage.completion_tokens == len(deltas)
