"""What one turn costs in durable writes and token counts (file stores, the model doubles): counted, never timed."""

from __future__ import annotations

import json
import os

from pydantic import BaseModel

from pyruntime.history import HeuristicTokenCounter
from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle, TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.testing import ChatRequest, RecordingModel, ScriptedCall
from pyruntime.turns import AiOrchestrator, AiTaskRequest, TaskResult, ToolRegistry, TurnStatus
from tests.support.doubles import orchestrator_on, run
from tests.turns.conftest import make_orchestrator


class Roll(BaseModel):
    sides: int


class CountingCounter(HeuristicTokenCounter):
    """The real heuristic counter; it also keeps every text it was asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return super().count(text)


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=16,
                          temperature=0.0, persist_chat_history=True)
    policy.configure_role("Dicer", system_prompt="You are Dicer.", use_memory_tool=False, max_output_tokens=120,
                          temperature=0.0, max_tool_call_roundtrips=1, persist_chat_history=True)
    return policy


def _file_store(stores: StoreBundle) -> FileAgentMemoryStore:
    assert isinstance(stores.memory, FileAgentMemoryStore)
    return stores.memory


def _answer(request: ChatRequest) -> str:
    return f"Reply to {request.facts.hint}."


def _turns(orchestrator: AiOrchestrator, requests: list[AiTaskRequest]) -> list[TaskResult]:
    async def go() -> list[TaskResult]:
        return [await orchestrator.run_task(r) for r in requests]

    return run(go())


def test_each_turn_is_one_history_append(file_stores: StoreBundle) -> None:
    orchestrator = orchestrator_on(RecordingModel(_answer), file_stores, _policy())
    stats = _file_store(file_stores).stats
    results = _turns(orchestrator, [AiTaskRequest(f"hello {i}", "Smith", forced_tool_mode="none") for i in range(3)])
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    # Hint and reply of each turn went to disk together: one write + one fsync per turn.
    assert (stats.history_appends, stats.history_rewrites) == (3, 0)
    chat = [(m.role, m.content) for m in file_stores.scoped().get_chat_history("Smith")]
    assert chat == [x for i in range(3) for x in (("user", f"hello {i}"), ("assistant", f"Reply to hello {i}."))]


def test_a_turn_with_tool_rounds_is_still_one_append_in_order(file_stores: StoreBundle) -> None:
    tools = ToolRegistry()
    tools.register("Dicer", "roll", "Roll a die with the given number of sides.", Roll, lambda args: {"rolled": 3})
    model = RecordingModel([ScriptedCall("roll", {"sides": 6}), "A three."])
    orchestrator = orchestrator_on(model, file_stores, _policy(), tools=tools, tool_mode="structured")
    [result] = _turns(orchestrator, [AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll")])
    assert [(c.name, json.loads(c.arguments_json)) for c in result.tool_calls] == [("roll", {"sides": 6})]
    assert [(r.success, r.content) for r in result.tool_results] == [(True, '{"rolled": 3}')]
    assert (result.status, result.text) == (TurnStatus.OK, "A three.")
    assert _file_store(file_stores).stats.history_appends == 1
    rows = file_stores.scoped().get_transcript("Dicer")
    # The player's line, the call and its result (kept apart from the chat), the round's results message, the reply.
    assert [(r.kind, r.is_chat_message, r.name, r.content) for r in rows] == [
        (TranscriptKind.USER, True, "user", "roll for me"),
        (TranscriptKind.TOOL_CALL, False, "roll", '{"sides": 6}'),
        (TranscriptKind.TOOL_RESULT, False, "roll", 'roll (ok): {"rolled": 3}'),
        (TranscriptKind.USER, True, "tool", 'Tool results:\nroll (ok): {"rolled": 3}'),
        (TranscriptKind.ASSISTANT, True, "assistant", "A three.")]
    assert [r.order for r in rows] == sorted(r.order for r in rows)


def test_a_failed_turn_records_the_hint_once_in_one_append(file_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator("http://127.0.0.1:9/v1", file_stores, policy=_policy())  # no server
    [result] = _turns(orchestrator, [AiTaskRequest("anyone there?", "Smith", forced_tool_mode="none")])
    run(client.aclose())
    assert result.status is TurnStatus.FAILED
    assert _file_store(file_stores).stats.history_appends == 1
    assert [(m.role, m.content) for m in file_stores.scoped().get_chat_history("Smith")] == [
        ("user", "anyone there?")]


def test_a_steady_turn_leaves_the_memory_document_alone(file_stores: StoreBundle) -> None:
    key = file_stores.scoped().key("Smith")
    assert MemoryTool(file_stores.memory, key).execute({"action": "write", "content": "Sword: Dawnbreaker"}).success
    path = _file_store(file_stores).memory_path(key)
    model = RecordingModel(_answer)
    orchestrator = orchestrator_on(model, file_stores, _policy())

    async def go() -> list[tuple[int, int]]:
        seen = []
        for i in range(3):
            result = await orchestrator.run_task(AiTaskRequest(f"turn {i}", "Smith", forced_tool_mode="none"))
            assert result.ok
            st = os.stat(path)
            seen.append((st.st_ino, st.st_mtime_ns))
        return seen

    seen = run(go())
    # The first turn stores the snapshot (an atomic replace: a new inode); later turns only read it.
    assert seen[0] == seen[1] == seen[2]
    assert [r.messages[1]["content"] for r in model.requests] == ["## Memory\nSword: Dawnbreaker"] * 3  # the head


def test_the_system_prompt_and_tool_schemas_are_counted_once_per_role(file_stores: StoreBundle) -> None:
    counter = CountingCounter()
    model = RecordingModel(_answer)
    orchestrator = orchestrator_on(model, file_stores, _policy(), token_counter=counter, tool_mode="native")
    results = _turns(orchestrator, [AiTaskRequest(f"hello {i}", "Smith") for i in range(3)])
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    system = model.requests[0].system_prompt
    assert model.requests[0].tool_names == ("memory",)
    schemas = json.dumps(model.requests[0].tools)
    assert [r.system_prompt for r in model.requests] == [system] * 3  # byte-identical every turn
    assert counter.texts.count(system) == 1
    assert counter.texts.count(schemas) == 1
    # The hint of every turn is still counted (it is new text).
    assert all(f"hello {i}" in counter.texts for i in range(3))


def test_a_changed_system_prompt_is_counted_again(file_stores: StoreBundle) -> None:
    counter = CountingCounter()
    policy = _policy()
    model = RecordingModel(_answer)
    orchestrator = orchestrator_on(model, file_stores, policy, token_counter=counter)

    async def go() -> None:
        await orchestrator.run_task(AiTaskRequest("one", "Smith", forced_tool_mode="none"))
        policy.configure_role("Smith", system_prompt="You are Smith, a weary blacksmith.", max_output_tokens=16,
                              temperature=0.0, persist_chat_history=True)
        await orchestrator.run_task(AiTaskRequest("two", "Smith", forced_tool_mode="none"))

    run(go())
    first, second = (r.system_prompt for r in model.requests)
    assert first != second
    assert counter.texts.count(first) == 1 and counter.texts.count(second) == 1
