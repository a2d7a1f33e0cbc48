"""What one turn costs in durable writes and token counts (file stores, the real tiny server): counted, never timed."""

from __future__ import annotations

import json
import os

from pydantic import BaseModel

from pyruntime.history import HeuristicTokenCounter
from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import StoreBundle, TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore
from pyruntime.turns import AiTaskRequest, ToolRegistry, TurnStatus
from tests.turns.conftest import make_orchestrator, run


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


def _turns(orchestrator, client, requests: list[AiTaskRequest]) -> list:
    async def go() -> list:
        results = [await orchestrator.run_task(r) for r in requests]
        await client.aclose()
        return results

    return run(go())


def test_each_turn_is_one_history_append(tiny_server_url: str, file_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=_policy())
    stats = _file_store(file_stores).stats
    results = _turns(orchestrator, client, [AiTaskRequest(f"hello {i}", "Smith", forced_tool_mode="none")
                                            for i in range(3)])
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    # Hint and reply of each turn went to disk together: one write + one fsync per turn.
    assert (stats.history_appends, stats.history_rewrites) == (3, 0)
    chat = [(m.role, m.content) for m in file_stores.scoped().get_chat_history("Smith")]
    assert chat == [x for i, r in enumerate(results) for x in (("user", f"hello {i}"), ("assistant", r.text))]


def test_a_turn_with_tool_rounds_is_still_one_append_in_order(tiny_server_url: str,
                                                              file_stores: StoreBundle) -> None:
    tools = ToolRegistry()
    tools.register("Dicer", "roll", "Roll a die with the given number of sides.", Roll, lambda args: {"rolled": 3})
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=_policy(), tools=tools,
                                             tool_mode="structured")
    [result] = _turns(orchestrator, client, [AiTaskRequest("roll for me", "Dicer", forced_tool_mode="roll")])
    assert result.tool_results, "the forced tool was called"
    assert _file_store(file_stores).stats.history_appends == 1
    rows = file_stores.scoped().get_transcript("Dicer")
    kinds = [(r.kind, r.is_chat_message) for r in rows]
    calls = len(result.tool_calls)
    assert kinds[0] == (TranscriptKind.USER, True) and rows[0].content == "roll for me"
    assert kinds[1:1 + calls] == [(TranscriptKind.TOOL_CALL, False)] * calls
    assert rows[-1].name in ("tool", "assistant")  # the round's results message, then the reply if there was one
    assert [r.order for r in rows] == sorted(r.order for r in rows)


def test_a_failed_turn_records_the_hint_once_in_one_append(file_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator("http://127.0.0.1:9/v1", file_stores, policy=_policy())
    [result] = _turns(orchestrator, client, [AiTaskRequest("anyone there?", "Smith", forced_tool_mode="none")])
    assert result.status is TurnStatus.FAILED
    assert _file_store(file_stores).stats.history_appends == 1
    assert [(m.role, m.content) for m in file_stores.scoped().get_chat_history("Smith")] == [
        ("user", "anyone there?")]


def test_a_steady_turn_leaves_the_memory_document_alone(tiny_server_url: str, file_stores: StoreBundle) -> None:
    key = file_stores.scoped().key("Smith")
    assert MemoryTool(file_stores.memory, key).execute({"action": "write", "content": "Sword: Dawnbreaker"}).success
    path = _file_store(file_stores).memory_path(key)
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=_policy())

    async def go() -> list[tuple[int, int]]:
        seen = []
        for i in range(3):
            result = await orchestrator.run_task(AiTaskRequest(f"turn {i}", "Smith", forced_tool_mode="none"))
            assert result.ok
            st = os.stat(path)
            seen.append((st.st_ino, st.st_mtime_ns))
        await client.aclose()
        return seen

    seen = run(go())
    # The first turn stores the snapshot (an atomic replace: a new inode); later turns only read it.
    assert seen[0] == seen[1] == seen[2]
    assert client.bodies[2]["messages"][1]["content"] == "## Memory\nSword: Dawnbreaker"  # the head, after the system


def test_the_system_prompt_and_tool_schemas_are_counted_once_per_role(tiny_server_url: str,
                                                                      file_stores: StoreBundle) -> None:
    counter = CountingCounter()
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=_policy(), token_counter=counter,
                                             tool_mode="native")
    results = _turns(orchestrator, client, [AiTaskRequest(f"hello {i}", "Smith") for i in range(3)])
    assert all(r.status is not TurnStatus.FAILED for r in results)
    system = client.bodies[0]["messages"][0]["content"]
    schemas = json.dumps(client.bodies[0]["tools"])
    assert all(b["messages"][0]["content"] == system for b in client.bodies)  # byte-identical every turn
    assert counter.texts.count(system) == 1
    assert counter.texts.count(schemas) == 1
    # The hint of every turn is still counted (it is new text).
    assert all(f"hello {i}" in counter.texts for i in range(3))


def test_a_changed_system_prompt_is_counted_again(tiny_server_url: str, file_stores: StoreBundle) -> None:
    counter = CountingCounter()
    policy = _policy()
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=policy, token_counter=counter)

    async def go() -> None:
        await orchestrator.run_task(AiTaskRequest("one", "Smith", forced_tool_mode="none"))
        policy.configure_role("Smith", system_prompt="You are Smith, a weary blacksmith.", max_output_tokens=16,
                              temperature=0.0, persist_chat_history=True)
        await orchestrator.run_task(AiTaskRequest("two", "Smith", forced_tool_mode="none"))
        await client.aclose()

    run(go())
    first, second = (b["messages"][0]["content"] for b in client.bodies)
    assert first != second
    assert counter.texts.count(first) == 1 and counter.texts.count(second) == 1
