"""Turns on the model doubles: request assembly, memory blocks and notes, the Chat borrow, folding.

Every request is recorded (`RecordingModel`) and every reply chosen, so each layout is asserted byte for byte. What
llama.cpp does with these requests (the prompt cache reusing a prefix) is tested in test_turns_on_llama_server.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import StoreBundle
from pyruntime.testing import ChatRequest, FunctionModel, RecordingModel
from pyruntime.turns import AiOrchestrator, AiTaskRequest, TaskResult, TurnStatus
from pyruntime.turns.planning.prompt import SYSTEM_CONTEXT_UPDATE_PREFIX
from tests.support.doubles import chat_of, orchestrator_on, run

ALICE = AgentMemoryScope(user_id="alice")
BOB = AgentMemoryScope(user_id="bob")
UPDATES = "## Memory (updates)\nAdded to the memory since the block above:\n"


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=24, temperature=0.0)
    policy.configure_role("Quiet", system_prompt="You are Quiet.", use_memory_tool=False, max_output_tokens=40,
                          temperature=0.0)
    return policy


def _numbered(request: ChatRequest) -> str:
    """A reply that names the player's line it answers."""
    return f"Answer to {request.facts.hint}."


def _model() -> RecordingModel:
    return RecordingModel(FunctionModel(_numbered))


def _tail(request: ChatRequest) -> str:
    """The tail block message of a request (the context message right before the payload)."""
    return str(request.messages[-2]["content"])


def _head(request: ChatRequest) -> str:
    """The head context message (memory snapshot, summary) right after the system prompt, or ""."""
    second = request.messages[1]
    return str(second["content"]) if second["role"] == "system" else ""


def _write_memory(stores: StoreBundle, scope: AgentMemoryScope, role: str, args: dict[str, str]) -> None:
    result = MemoryTool(stores.memory, stores.scoped(scope).key(role)).execute(args)
    assert result.success


def _turn(orchestrator: AiOrchestrator, hint: str, *, scope: AgentMemoryScope = ALICE,
          world_state: str = "") -> TaskResult:
    result = run(orchestrator.run_task(AiTaskRequest(hint, "Smith", scope=scope, forced_tool_mode="none",
                                                     world_state=world_state)))
    assert result.status is TurnStatus.OK, result.error
    return result


def test_prefix_is_byte_identical_across_users_and_turns(memory_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "Alice likes swords"})
    results = [_turn(orchestrator, hint, scope=scope) for scope, hint in ((ALICE, "hello"), (BOB, "hi there"),
                                                                             (ALICE, "again"))]
    assert [r.text for r in results] == ["Answer to hello.", "Answer to hi there.", "Answer to again."]
    first, second, third = model.requests
    assert json.dumps(first.messages[0]) == json.dumps(second.messages[0]) == json.dumps(third.messages[0])
    assert first.system_prompt.startswith("You are Smith, a blacksmith.\n\n## Tools\n")
    assert "Alice" not in first.system_prompt and "swords" not in first.system_prompt  # nothing per-user in it
    # Turn 3 of Alice: system, her memory snapshot, the unchanged tail where turn 1 sent it, her previous
    # turn verbatim, the payload: her first request is a prefix of it (all the model evaluates is the rest).
    assert third.roles == ["system", "system", "system", "user", "assistant", "user"]
    assert third.messages[:4] == first.messages
    assert third.messages[3:] == [{"role": "user", "content": "hello"},
                                  {"role": "assistant", "content": "Answer to hello."},
                                  {"role": "user", "content": "again"}]
    assert _head(third) == "## Memory\nAlice likes swords"
    assert _tail(first).startswith("## Tool Availability") and "## Memory" not in _tail(first)
    assert not second.sends("Alice")  # Bob never sees Alice's memory or history
    # Each player is a conversation of its own: the engine keeps a slot per conversation.
    assert model.conversations == [first.conversation, second.conversation]
    assert model.of_conversation(first.conversation) == [first, third]


def test_memory_snapshot_then_updates_across_turns(memory_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    scoped = memory_stores.scoped(ALICE)

    _turn(orchestrator, "one")  # no memory yet: no memory blocks, no snapshot
    assert "## Memory" not in _tail(model.last) + _head(model.last)
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    _turn(orchestrator, "two")
    assert _head(model.last) == "## Memory\nlikes swords"
    assert "## Memory (updates)" not in _tail(model.last)
    state = scoped.try_load("Smith").state
    assert state is not None
    assert (state.system_prompt_memory_snapshot, state.system_prompt_memory_version) == ("likes swords", 1)
    assert state.last_system_prompt == model.last.system_prompt

    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "hates rain"})
    _turn(orchestrator, "three")
    assert _head(model.last) == "## Memory\nlikes swords"  # unchanged: the cached prompt stays valid
    assert _tail(model.last) == UPDATES + "hates rain"
    state = scoped.try_load("Smith").state
    assert state is not None
    assert (state.system_prompt_memory_snapshot, state.system_prompt_memory_version) == ("likes swords", 1)


def test_each_memory_edit_is_a_note_that_stays_where_it_was_sent(memory_stores: StoreBundle, tmp_path: Path) -> None:
    # An edit costs the model its own note; the request before it is the start of the next one, also after a
    # restart that kept the places (the disk prompt cache's case).
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    _turn(orchestrator, "one", world_state="Rain.")
    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "hates rain"})
    _turn(orchestrator, "two", world_state="Rain.")
    _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": "owns a boat"})
    _turn(orchestrator, "three", world_state="Rain.")
    one, two, three = (r.messages for r in model.requests)
    first_note = UPDATES + "hates rain"
    assert two[-2]["content"] == first_note and two[: len(one) - 1] == one[:-1]
    assert three[: len(two) - 1] == two[:-1]  # the first note stayed; nothing before it changed
    assert three[-2]["content"] == UPDATES + "owns a boat"
    assert [m["content"] for m in three].count(first_note) == 1
    assert _head(model.requests[2]) == "## Memory\nlikes swords"  # no consolidation without a compaction
    anchors = tmp_path / "anchors.json"
    orchestrator.save_tail_anchors(anchors)

    again = _model()
    restarted = orchestrator_on(again, memory_stores, _policy())
    restarted.load_tail_anchors(anchors)
    _turn(restarted, "four", world_state="Rain.")
    four = again.last.messages
    assert four[: len(three) - 1] == three[:-1]  # the notes rebuilt from the versions, byte for byte
    assert four[-1]["content"] == "four" and "## Memory (updates)" not in four[-2]["content"]


def test_a_compaction_folds_the_memory_notes_after_the_summary_and_keeps_the_snapshot(
        memory_stores: StoreBundle) -> None:
    policy = _policy()
    policy.configure_role("Smith", system_prompt="You are Smith, a blacksmith.", max_output_tokens=8,
                          temperature=0.0, max_chat_history_messages=4)
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, policy)
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    for index in range(5):
        if index in (1, 2):
            _write_memory(memory_stores, ALICE, "Smith", {"action": "append", "content": f"fact {index}"})
        _turn(orchestrator, f"line {index}")
    heads = [_head(r) for r in model.requests]
    compacted = [i for i, head in enumerate(heads) if "## Conversation Summary" in head]
    # Window 4: the fourth turn finds 6 stored messages and folds them down to 2; the fifth only appends.
    assert compacted == [3, 4]
    head = heads[3]
    # The snapshot first sent stays first, byte for byte; the two notes are one block after the summary.
    assert head.startswith("## Memory\nlikes swords\n\n## Conversation Summary\n")
    assert head.endswith("## Memory (updates)\nAdded to the memory since the block above:\nfact 1\nfact 2")
    assert not any("## Memory (updates)" in m["content"] for m in model.requests[3].messages[2:])
    state = memory_stores.scoped(ALICE).try_load("Smith").state
    assert state is not None and state.system_prompt_memory_snapshot == "likes swords"  # not consolidated
    before, after = (r.messages for r in model.requests[3:5])
    assert after[: len(before) - 1] == before[:-1]  # the turn after the compaction only appends to its request
    assert heads[4] == head


def test_tail_blocks_in_order_in_the_request(memory_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, _policy())
    _write_memory(memory_stores, ALICE, "Smith", {"action": "write", "content": "likes swords"})
    result = run(orchestrator.run_task(AiTaskRequest(
        "what now?", "Smith", scope=ALICE, request_system_instructions="Answer in one word.", allowed_tool_names=(),
        world_state="It is night.")))
    assert result.status is TurnStatus.OK and result.text == "Answer to what now?."
    [request] = model.requests
    headings = [line for line in _tail(request).splitlines() if line.startswith("## ")]
    assert headings == ["## Request System Instructions", "## Tool Availability (current request)", "## World State"]
    assert "Answer in one word." in _tail(request) and _tail(request).endswith("## World State\nIt is night.")
    assert _head(request) == "## Memory\nlikes swords"
    assert "No tools are available in this request" in _tail(request)
    assert request.response_format is None and request.tool_names == ()


def test_context_updates_fold_into_user_messages(memory_stores: StoreBundle) -> None:
    model = _model()
    orchestrator = orchestrator_on(model, memory_stores, _policy(), system_messages_after_first=False)
    result = run(orchestrator.run_task(AiTaskRequest("hi", "Quiet", world_state="Rain.")))
    assert result.status is TurnStatus.OK
    assert model.last.messages[1:] == [
        {"role": "user", "content": f"{SYSTEM_CONTEXT_UPDATE_PREFIX}\n## World State\nRain."},
        {"role": "user", "content": "hi"}]
    assert model.last.roles == ["system", "user", "user"]


def test_chat_source_borrows_history_for_programmer(file_stores: StoreBundle, tmp_path: Path) -> None:
    policy = AgentMemoryPolicy()
    model = _model()
    orchestrator = orchestrator_on(model, file_stores, policy)

    async def turns() -> list[TaskResult]:
        out = []
        for hint in ("first question", "second question"):
            out.append(await orchestrator.run_task(
                AiTaskRequest(hint, "Programmer", source_tag=" chat ", max_output_tokens=16, allowed_tool_names=())))
        out.append(await orchestrator.run_task(AiTaskRequest("not chat", "Programmer", max_output_tokens=16,
                                                             allowed_tool_names=())))
        return out

    results = run(turns())
    assert [r.status for r in results] == [TurnStatus.OK] * 3
    second, third = model.requests[1:]
    # The Chat source borrows the history: the first exchange was sent with the second question.
    assert second.messages[-3:] == [{"role": "user", "content": "first question"},
                                    {"role": "assistant", "content": "Answer to first question."},
                                    {"role": "user", "content": "second question"}]
    assert not third.sends("first question")  # no borrow: no history
    assert chat_of(file_stores, "Programmer") == [
        ("user", "first question"), ("assistant", "Answer to first question."),
        ("user", "second question"), ("assistant", "Answer to second question.")]
    assert not policy.get("Programmer").with_chat_history  # the policy is unchanged
    folder = tmp_path / "CoreAI"
    assert not list(folder.rglob("*.history.jsonl")) and not list(folder.rglob("ConversationSummaries/*"))
