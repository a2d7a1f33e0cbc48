"""Turns against the real tiny llama.cpp server: assembly, streaming, memory blocks, the Chat borrow, folding."""

from __future__ import annotations

import json
from pathlib import Path

from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import StoreBundle
from pyruntime.turns import (
    AiTaskRequest,
    CutReportEvent,
    FinalEvent,
    TextDeltaEvent,
    TurnStatus,
)
from pyruntime.turns.planning.prompt import SYSTEM_CONTEXT_UPDATE_PREFIX
from tests.support.loads import loaded
from tests.turns.conftest import make_orchestrator, run

ALICE = AgentMemoryScope(user_id="alice")
BOB = AgentMemoryScope(user_id="bob")


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=24, temperature=0.0)
    policy.configure_role("Quiet", system_prompt="You are Quiet.", use_memory_tool=False, max_output_tokens=40,
                          temperature=0.0)
    return policy


def _tail(body: dict) -> str:
    """The tail block message of a request (the context message right before the payload)."""
    return body["messages"][-2]["content"]


def _head(body: dict) -> str:
    """The head context message (memory snapshot, summary) right after the system prompt, or ""."""
    second = body["messages"][1]
    return second["content"] if second["role"] == "system" else ""


def _write_memory(stores: StoreBundle, scope: AgentMemoryScope, role: str, args: dict) -> None:
    result = MemoryTool(stores.memory, stores.scoped(scope).key(role)).execute(args)
    assert result.success


def test_prefix_is_byte_identical_across_users_and_turns(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "Alice likes swords"})

    async def turns() -> list:
        results = []
        for scope, hint in ((ALICE, "hello"), (BOB, "hi there"), (ALICE, "again")):
            results.append(await orchestrator.run_task(AiTaskRequest(hint, "Smith", scope=scope,
                                                                     forced_tool_mode="none")))
        await client.aclose()
        return results

    results = run(turns())
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    first, second, third = client.bodies
    prefix = json.dumps(first["messages"][0])
    assert prefix == json.dumps(second["messages"][0]) == json.dumps(third["messages"][0])
    system = first["messages"][0]["content"]
    assert system.startswith("You are Smith, a blacksmith.\n\n## Tools\n")
    assert "Alice" not in system and "swords" not in system  # nothing per-user in the prefix
    # Turn 3 of Alice: system, her memory snapshot, the unchanged tail where turn 1 sent it, her previous
    # turn verbatim, the payload: her first request is a prefix of it (all the model evaluates is the rest).
    roles = [m["role"] for m in third["messages"]]
    assert roles == ["system", "system", "system", "user", "assistant", "user"]
    assert third["messages"][:4] == first["messages"]
    assert third["messages"][3]["content"] == "hello"
    assert third["messages"][4]["content"] == results[0].text
    assert third["messages"][-1] == {"role": "user", "content": "again"}
    assert _head(third) == "## Memory\nAlice likes swords"
    assert "## Memory" not in third["messages"][2]["content"]
    assert third["messages"][2]["content"].startswith("## Tool Availability")
    assert "Alice" not in json.dumps(second)  # Bob never sees Alice's memory or history


def test_text_streams_in_deltas_that_add_up(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())

    async def stream() -> list:
        events = [e async for e in orchestrator.stream_task(AiTaskRequest("tell me a story", "Quiet", scope=ALICE))]
        await client.aclose()
        return events

    events = run(stream())
    assert isinstance(events[0], CutReportEvent) and isinstance(events[-1], FinalEvent)
    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    result = events[-1].result
    assert result.status is TurnStatus.OK and result.usage.model_calls == 1
    assert len(deltas) > 1 and "".join(deltas) == result.text != ""
    assert client.bodies[0]["stream"] is True
    chat = memory_stores.scoped(ALICE).get_chat_history("Quiet")
    assert [(m.role, m.content) for m in chat] == [("user", "tell me a story"), ("assistant", result.text)]


def test_memory_snapshot_then_updates_across_turns(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    scoped = memory_stores.scoped(ALICE)

    async def turn(hint: str) -> None:
        result = await orchestrator.run_task(AiTaskRequest(hint, "Smith", scope=ALICE, forced_tool_mode="none"))
        assert result.status is TurnStatus.OK

    run(turn("one"))  # no memory yet: no memory blocks, no snapshot
    assert "## Memory" not in _tail(client.bodies[-1]) + _head(client.bodies[-1])
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    run(turn("two"))
    assert _head(client.bodies[-1]) == "## Memory\nlikes swords"
    assert "## Memory (updates)" not in _tail(client.bodies[-1])
    state = loaded(scoped.try_load("Smith"))
    assert (state.system_prompt_memory_snapshot, state.system_prompt_memory_version) == ("likes swords", 1)
    assert state.last_system_prompt == client.bodies[-1]["messages"][0]["content"]

    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "hates rain"})
    run(turn("three"))
    assert _head(client.bodies[-1]) == "## Memory\nlikes swords"  # unchanged: the cached prompt stays valid
    expected = "## Memory (updates)\nAdded to the memory since the block above:\nhates rain"
    assert expected in _tail(client.bodies[-1])
    state = loaded(scoped.try_load("Smith"))
    assert (state.system_prompt_memory_snapshot, state.system_prompt_memory_version) == ("likes swords", 1)
    run(client.aclose())


def test_each_memory_edit_is_a_note_that_stays_where_it_was_sent(tiny_server_url: str, memory_stores: StoreBundle,
                                                                  tmp_path: Path) -> None:
    # An edit costs the model its own note; the request before it is the start of the next one,
    # also after a restart that kept the places (the disk prompt cache's case).
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})

    async def turn(orchestrator, hint: str) -> None:
        result = await orchestrator.run_task(AiTaskRequest(hint, "Smith", scope=ALICE, forced_tool_mode="none",
                                                           world_state="Rain."))
        assert result.status is TurnStatus.OK

    run(turn(orchestrator, "one"))
    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "hates rain"})
    run(turn(orchestrator, "two"))
    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "owns a boat"})
    run(turn(orchestrator, "three"))
    one, two, three = (body["messages"] for body in client.bodies)
    first_note = "## Memory (updates)\nAdded to the memory since the block above:\nhates rain"
    assert two[-2]["content"] == first_note and two[: len(one) - 1] == one[:-1]
    assert three[: len(two) - 1] == two[:-1]  # the first note stayed; nothing before it changed
    assert three[-2]["content"] == "## Memory (updates)\nAdded to the memory since the block above:\nowns a boat"
    assert [m["content"] for m in three].count(first_note) == 1
    assert _head(client.bodies[2]) == "## Memory\nlikes swords"  # no consolidation without a compaction
    anchors = tmp_path / "anchors.json"
    orchestrator.save_tail_anchors(anchors)
    run(client.aclose())

    restarted, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    restarted.load_tail_anchors(anchors)
    run(turn(restarted, "four"))
    four = client.bodies[0]["messages"]
    assert four[: len(three) - 1] == three[:-1]  # the notes rebuilt from the versions, byte for byte
    assert four[-1]["content"] == "four" and "## Memory (updates)" not in four[-2]["content"]
    run(client.aclose())


def test_a_compaction_folds_the_memory_notes_after_the_summary_and_keeps_the_snapshot(
        tiny_server_url: str, memory_stores: StoreBundle) -> None:
    policy = _policy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=8,
                          temperature=0.0, max_chat_history_messages=4)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy)
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})

    async def turns() -> None:
        for index in range(5):
            if index in (1, 2):
                _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": f"fact {index}"})
            result = await orchestrator.run_task(AiTaskRequest(f"line {index}", "Smith", scope=ALICE,
                                                               forced_tool_mode="none"))
            assert result.status is TurnStatus.OK
        await client.aclose()

    run(turns())
    heads = [_head(body) for body in client.bodies]
    compacted = [i for i, head in enumerate(heads) if "## Conversation Summary" in head]
    assert compacted, heads
    head = heads[compacted[0]]
    # The snapshot first sent stays first, byte for byte; the two notes are one block after the summary.
    assert head.startswith("## Memory\nlikes swords\n\n## Conversation Summary\n")
    assert head.endswith("## Memory (updates)\nAdded to the memory since the block above:\nfact 1\nfact 2")
    assert not any("## Memory (updates)" in m["content"] for m in client.bodies[compacted[0]]["messages"][2:])
    state = loaded(memory_stores.scoped(ALICE).try_load("Smith"))
    assert state.system_prompt_memory_snapshot == "likes swords"  # not consolidated by the compaction
    # Window 4, folded down to 2: the turn after the compaction only appends to its request.
    assert compacted == [3, 4]
    before, after = (body["messages"] for body in client.bodies[3:5])
    assert after[: len(before) - 1] == before[:-1]


def test_tail_blocks_in_order_in_the_real_request(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    request = AiTaskRequest("what now?", "Smith", scope=ALICE, request_system_instructions="Answer in one word.",
                            allowed_tool_names=(), world_state="It is night.")
    result = run(orchestrator.run_task(request))
    run(client.aclose())
    assert result.status is TurnStatus.OK
    tail = _tail(client.bodies[0])
    headings = [line for line in tail.splitlines() if line.startswith("## ")]
    assert headings == ["## Request System Instructions", "## Tool Availability (current request)", "## World State"]
    assert _head(client.bodies[0]) == "## Memory\nlikes swords"
    assert "No tools are available in this request" in tail
    assert "response_format" not in client.bodies[0] and "tools" not in client.bodies[0]


def test_context_updates_fold_into_user_messages(tiny_server_url: str, memory_stores: StoreBundle) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy(),
                                             system_messages_after_first=False)
    result = run(orchestrator.run_task(AiTaskRequest("hi", "Quiet", world_state="Rain.")))
    run(client.aclose())
    assert result.status is TurnStatus.OK
    messages = client.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert messages[1]["content"] == f"{SYSTEM_CONTEXT_UPDATE_PREFIX}\n## World State\nRain."


def test_chat_source_borrows_history_for_programmer(tiny_server_url: str, file_stores: StoreBundle,
                                                    tmp_path: Path) -> None:
    policy = AgentMemoryPolicy()
    orchestrator, client = make_orchestrator(tiny_server_url, file_stores, policy=policy)
    scoped = file_stores.scoped()

    async def turns() -> list:
        out = []
        for hint in ("first question", "second question"):
            out.append(await orchestrator.run_task(
                AiTaskRequest(hint, "Programmer", source_tag=" chat ", max_output_tokens=16, allowed_tool_names=())))
        out.append(await orchestrator.run_task(AiTaskRequest("not chat", "Programmer", max_output_tokens=16,
                                                             allowed_tool_names=())))
        await client.aclose()
        return out

    results = run(turns())
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    second = client.bodies[1]["messages"]
    assert [m["content"] for m in second if m["role"] == "user"][0] == "first question"  # history was sent
    assert all(m["content"] != "first question" for m in client.bodies[2]["messages"])  # no borrow: no history
    chat = [(m.role, m.content) for m in scoped.get_chat_history("Programmer")]
    assert [c for c in chat if c[0] == "user"] == [("user", "first question"), ("user", "second question")]
    assert not policy.get("Programmer").with_chat_history  # the policy is unchanged
    folder = tmp_path / "CoreAI"
    assert not list(folder.rglob("*.history.jsonl")) and not list(folder.rglob("ConversationSummaries/*"))


def test_turn_usage_reports_the_prompt_and_what_the_model_cache_saved(tiny_server_url: str,
                                                                        memory_stores: StoreBundle) -> None:
    # TurnUsage carries llama.cpp's counts: the hosted server ends each stream with them.
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=_policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})

    async def turns() -> list:
        results = [await orchestrator.run_task(AiTaskRequest(hint, "Smith", scope=ALICE, forced_tool_mode="none"))
                   for hint in ("hello there", "tell me more")]
        await client.aclose()
        return results

    first, second = run(turns())
    assert first.ok and second.ok
    assert first.usage.model_calls == second.usage.model_calls == 1
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert second.usage.prompt_tokens > first.usage.prompt_tokens  # the first turn is in its history
    # Turn 2 extends turn 1's request up to its tail: that prefix is reused, only the rest is evaluated.
    assert second.usage.cached_prompt_tokens > first.usage.prompt_tokens // 2
    assert 0 < second.usage.evaluated_prompt_tokens < second.usage.prompt_tokens
