"""The design note's request layout that the benchmarks compare against (bench/design_note_layout.py).

It left production (`pyruntime.turns.planning.prompt`) and the benchmarks stopped patching module globals: they
give it to the orchestrator (`assemble=`, `compaction_target_ratio=`). These tests keep the comparison
honest: it is the note's order, not a second copy of the runtime's.
"""

from __future__ import annotations

from dataclasses import replace

from bench.design_note_layout import NO_HYSTERESIS, assemble_design_note
from pyruntime.history.messages import HistoryMessage
from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.testing import ChatRequest, RecordingModel
from pyruntime.turns import AiTaskRequest, TurnStatus
from pyruntime.turns.planning.prompt import MemoryNote, TailBlocks, assemble_messages
from tests.support.doubles import orchestrator_on, run, session_stores
from tests.turns.test_prompt import FULL_TAIL, HISTORY, _headings


def test_the_design_note_layout_keeps_the_note_order() -> None:
    messages = assemble_design_note(system_prompt="SYS", summary="they met", history=HISTORY, tail=FULL_TAIL,
                                    user_payload="what now?")
    assert [m["role"] for m in messages] == ["system", "system", "user", "assistant", "user", "system", "user"]
    assert messages[1]["content"].startswith("## Conversation Summary\n")
    assert messages[1]["content"].endswith("they met")
    assert _headings(messages[5]["content"]) == [
        "## Request System Instructions",
        "## Memory",
        "## Memory (updates)",
        "## Tool Availability (current request)",
        "## World State",
    ]


def test_it_resends_the_snapshot_after_the_history_where_the_runtime_keeps_it_in_the_head() -> None:
    tail = TailBlocks(memory="likes swords", memory_updates="Added: hates rain", world_state="Rain.")
    old = assemble_design_note(system_prompt="SYS", summary="s", history=HISTORY, tail=tail, user_payload="a")
    assert "## Memory\nlikes swords" in old[-2]["content"]
    new = assemble_messages(system_prompt="SYS", summary="s", history=HISTORY, tail=tail, user_payload="a")
    assert new[1]["content"].startswith("## Memory\nlikes swords") and "## Memory\n" not in new[-2]["content"]


def test_it_ignores_the_runtime_places_and_keeps_one_cumulative_updates_block() -> None:
    turn = [HistoryMessage("user", "hi", order=1), HistoryMessage("assistant", "hello", order=2)]
    tail = TailBlocks(world_state="Rain.", memory_updates="Added: both",
                      memory_notes=(MemoryNote(5, "Added: likes rain"), MemoryNote(6, "Added: owns a boat")))
    design = assemble_design_note(system_prompt="SYS", history=turn, tail=tail, user_payload="go",
                                  tail_after=0, notes_after=(0, 1))
    assert [m["content"] for m in design] == ["SYS", "hi", "hello",
                                              "## Memory (updates)\nAdded: both\n\n## World State\nRain.", "go"]
    folded = replace(tail, memory_folded=MemoryNote(7, "Added: x"))
    assert "## Memory (updates)\nAdded: x" not in "".join(
        m["content"] for m in assemble_design_note(system_prompt="SYS", summary="s", tail=folded))


def test_empty_blocks_are_left_out_as_in_the_runtime() -> None:
    messages = assemble_design_note(system_prompt="SYS", tail=TailBlocks(memory="m"), user_payload="x")
    assert messages == assemble_messages(system_prompt="SYS", tail=TailBlocks(memory="m"), user_payload="x")
    assert assemble_design_note(system_prompt="SYS", summary=" ", user_payload="x") == [
        {"role": "system", "content": "SYS"}, {"role": "user", "content": "x"}]


def test_an_orchestrator_given_the_layout_sends_its_requests_in_it() -> None:
    # The benchmark's design-note pass: the layout is an argument, no module global is patched.
    def sent(**options: object) -> ChatRequest:
        stores = session_stores()
        MemoryTool(stores.memory, stores.scoped().key("Smith")).execute({"action": "write", "content": "likes swords"})
        policy = AgentMemoryPolicy()
        policy.configure_role("Smith", system_prompt="You are Smith.", max_output_tokens=4, temperature=0.0)
        model = RecordingModel(["Aye."])
        orchestrator = orchestrator_on(model, stores, policy, **options)
        result = run(orchestrator.run_task(AiTaskRequest("hello", "Smith", forced_tool_mode="none")))
        assert result.status is TurnStatus.OK
        [request] = model.requests
        return request

    design = sent(assemble=assemble_design_note, compaction_target_ratio=NO_HYSTERESIS)
    runtime = sent()
    assert design.system_prompt == runtime.system_prompt
    # The note's order: the memory in the tail after the history; the runtime's: the memory in the head.
    assert design.roles == ["system", "system", "user"] and runtime.roles == ["system", "system", "system", "user"]
    assert _headings(str(design.messages[1]["content"])) == ["## Memory", "## Tool Availability (current request)"]
    assert design.messages[1]["content"].startswith("## Memory\nlikes swords\n\n") and design.last_text == "hello"
    assert runtime.messages[1]["content"] == "## Memory\nlikes swords"
    assert _headings(str(runtime.messages[2]["content"])) == ["## Tool Availability (current request)"]
