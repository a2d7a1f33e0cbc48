"""The game learns when memory changed, through the compiled C# API: a turn says its memory write is pending, the
game awaits it or gets `MemoryChanged` on the main thread, or waits for it in the call or at the end of a stream.

The runtime runs the writer design (as for the embedded small model) against the scripted model, a real
OpenAI-compatible server whose writer decisions are exact, so what was stored can be asserted.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns.writer.prompt import WRITER_SYSTEM
from tests.unity.conftest import Runtime, start_runtime, wait

ROLE = "Bram"


def _decision(topic: str, value: str) -> str:
    return json.dumps({"kind": "fact", "topic": topic, "value": value})


SCRIPT = {"rules": [
    {"when": {"system": WRITER_SYSTEM[:30], "hint": "Tobin"}, "reply": _decision("name", "Tobin")},
    {"when": {"system": WRITER_SYSTEM[:30], "hint": "gold"}, "reply": _decision("debt", "25 gold")},
    {"when": {"system": WRITER_SYSTEM[:30], "hint": "Clover"}, "reply": _decision("horse", "Clover")},
    {"when": {"system": WRITER_SYSTEM[:30], "hint": "apples"}, "reply": _decision("food", "apples")},
    # The last turn's write is held back so the conversation-wide wait finds it running (a pass that already
    # landed is not "pending now" and would not be returned).
    {"when": {"system": WRITER_SYSTEM[:30], "hint": "smith"}, "first_delay_ms": 2000,
     "reply": json.dumps({"kind": "nothing", "topic": "", "value": ""})},
    {"when": {"system": WRITER_SYSTEM[:30]}, "reply": json.dumps({"kind": "nothing", "topic": "", "value": ""})},
], "default": {"reply": "Good day to you."}}


@pytest.fixture
def scripted_url() -> Iterator[str]:
    """The scripted model on its own event loop thread."""
    loop = asyncio.new_event_loop()
    server = ScriptedModelServer(Script.from_dict(SCRIPT))
    thread = threading.Thread(target=loop.run_forever, name="scripted-model", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    yield server.base_url
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@pytest.fixture
def writer_runtime(assemblies: Path, scripted_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """A runtime whose roles write memory after the reply (the writer design)."""
    from pyruntime.turns import ToolCallMode
    from pyruntime.turns.writer.decision import MemoryDesign

    runtime = start_runtime(tmp_path / "data", llm_url=scripted_url, tool_mode=ToolCallMode.STRUCTURED,
                            memory_design=MemoryDesign.WRITER)
    yield runtime
    runtime.stop()


def test_the_game_awaits_the_write_gets_memory_changed_on_the_main_thread_or_waits_in_the_turn(
        writer_runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Tests import MemoryWriteScenarios, SimulatedUnityMainThread

    client = writer_runtime.client(policy=AgentMemoryPolicy())
    main = SimulatedUnityMainThread()
    try:
        report: Any = wait(MemoryWriteScenarios.RunAsync(main, client.CreateOrchestrator(), ROLE))
    finally:
        main.Dispose()
        client.Dispose()
    # The reply returned first and said so; awaiting the write gives what was stored.
    assert report.Turn.Succeeded and report.Turn.MemoryWritePending and report.Turn.MemoryWrite is None
    awaited = report.Awaited
    assert awaited.Changed and [line.Stored for line in awaited.Lines] == ["Player's name: Tobin"]
    assert awaited.TraceId == report.Turn.TraceId and awaited.Version == 1 and awaited.Summary.startswith("stored: ")
    # MemoryChanged: the same write, raised on the main thread.
    assert report.Changed is not None and report.Changed.TraceId == report.Turn.TraceId and report.ChangedOnMain
    # A question: nothing pending, nothing to wait for.
    assert not report.Question.MemoryWritePending and report.QuestionWrite is None
    # Waiting in the call: the result carries the write.
    waited = report.WaitedTurn
    assert not waited.MemoryWritePending and [line.Stored for line in waited.MemoryWrite.Lines] == [
        "Player's debt: 25 gold"]
    # Waiting in a stream: the reply streams, then OnMemoryWrite on the main thread, then the result with the write.
    streamed = report.StreamedTurn
    assert [w.Lines[0].Stored for w in report.StreamedWrites] == ["Player's horse: Clover"]
    assert report.StreamedWriteOnMain
    assert streamed.MemoryWrite is not None and not streamed.MemoryWritePending
    # The async-enumerable pattern ends with the write.
    assert list(report.ItemKinds)[-1] == "MemoryWrite"
    # The conversation-wide wait: the last turn's write ("nothing to keep").
    assert [w.Changed for w in report.ConversationWrites] == [False]
    assert report.Events == 4  # Tobin, the debt, the horse, apples: one event per changing write
    memory = writer_runtime.orchestrator.stores.scoped().try_load(ROLE).state.memory
    assert memory.splitlines() == ["Player's name: Tobin", "Player's debt: 25 gold", "Player's horse: Clover",
                                   "Player's food: apples"]


def test_a_role_that_asks_for_its_earlier_sessions_tells_the_runtime(writer_runtime: Runtime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy, AiTaskRequest, RoleMemoryConfig

    policy = AgentMemoryPolicy()
    config = RoleMemoryConfig("Chronicler")
    config.SendEarlierSessions = True  # null (the default): the runtime decides
    policy.SetConfig(config)
    client = writer_runtime.client(policy=policy)
    try:
        request = AiTaskRequest()
        request.RoleId, request.Hint, request.MaxOutputTokens = "Chronicler", "Hello.", 8
        assert wait(client.CreateOrchestrator().RunTaskWithResultAsync(request)).Succeeded
        pushed = wait(client.GetRoleConfigAsync("Chronicler"))
    finally:
        client.Dispose()
    assert pushed.SendEarlierSessions is True
    assert writer_runtime.services.orchestrator.policy.get("Chronicler").send_earlier_sessions is True
