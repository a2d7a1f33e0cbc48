"""Compaction between turns: the fold and its prewarm run after the reply; a player's turn never waits.

On the model doubles, every request recorded. The races are made deterministic by holding one kind of request
(the summarizer call, the prewarm) at the model until the test lets it go; a player's turn that comes meanwhile must
pre-empt it, send the previous head, and leave no part of the lost work behind. No timing. That the engine finds a
fold made between turns warm is tested on llama-server in test_prewarm_on_llama_server.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyruntime.history import CompactionKind, CutReport, LlmCompactionOptions, strip_fold_marker
from pyruntime.memory import MemoryTool
from pyruntime.model.client.queue import Priority
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, RecordingModel
from pyruntime.turns import AiOrchestrator, AiTaskRequest, TaskResult
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from pyruntime.turns.planning.prompt import SUMMARY_HEADING
from pyruntime.turns.planning.tail_anchors import conversation_digest
from tests.support.doubles import orchestrator_on, run
from tests.turns.smith_session import WINDOW, smith_policy

PLAYER = AgentMemoryScope(user_id="player1")
# The smith's window (4): the fourth turn finds 6 stored messages, past it (hysteresis folds down to 2).
SLACK = 6  # stored messages a turn may still send verbatim while its fold is prepared (the window + half of it)
HINTS = ["Good morning, smith!", "Have you heard news from the road?", "What would you charge for a sword?",
         "Tell me about this town.", "Do you remember my name?", "Any work for me?", "Will it rain?",
         "I will be back later."]
HANG_GUARD_S = 120  # only so that a turn that waits for held background work fails instead of hanging
SUMMARY = "They greeted each other and spoke of the road."


def _kind(messages: Any, max_tokens: int | None) -> str:
    if max_tokens == PREWARM_MAX_TOKENS:
        return "prewarm"
    if len(messages) == 2 and str(messages[-1].get("content", "")).startswith("Prior summary:"):
        return "summarizer"
    return "turn"


class HoldingModel(RecordingModel):
    """A recording double; a streamed request of a kind the test holds waits at the model until it is let go.

    The summarizer gets `SUMMARY`, a turn a reply that names its player's line.
    """

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.held: dict[str, asyncio.Event] = {}
        self.arrived: dict[str, asyncio.Event] = {}
        self.kinds: list[str] = []  # every streamed request, by kind, in the order they reached the model

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Every request sent, as the HTTP client's JSON body."""
        return [r.body for r in self.requests]

    def hold(self, kind: str) -> None:
        self.held[kind], self.arrived[kind] = asyncio.Event(), asyncio.Event()

    def let_go(self, kind: str) -> None:
        self.held.pop(kind).set()

    async def _answer(self, request: ChatRequest) -> str:
        kind = _kind(request.messages, request.max_tokens) if request.streamed else "other"
        self.kinds.append(kind)
        gate = self.held.get(kind)
        if gate is not None:
            self.arrived[kind].set()
            await gate.wait()  # a pre-empted request is cancelled here
        return SUMMARY if kind == "summarizer" else f"About '{request.facts.hint}': aye."


def _orchestrator(**options: Any) -> tuple[AiOrchestrator, HoldingModel]:
    options.setdefault("prewarm", True)
    options.setdefault("background_compaction", True)
    options.setdefault("llm_compaction_options", LlmCompactionOptions(max_output_tokens=24))
    client = HoldingModel()
    return orchestrator_on(client, None, smith_policy(use_memory_tool=False), **options), client


def _staged(orchestrator: AiOrchestrator):
    return orchestrator.staged_folds.get(conversation_digest(orchestrator.stores.scoped(PLAYER).key("Smith")))


def _request(index: int) -> AiTaskRequest:
    return AiTaskRequest(HINTS[index], "Smith", scope=PLAYER, forced_tool_mode="none", extra={"seed": 0})


def _summary(orchestrator: AiOrchestrator) -> str | None:
    return orchestrator.stores.scoped(PLAYER).load_summary("Smith")


def _has_summary(body: dict[str, Any]) -> bool:
    return any(SUMMARY_HEADING in str(m.get("content", "")) for m in body["messages"])


def _turn_bodies(client: HoldingModel) -> list[dict[str, Any]]:
    return [b for b, k in zip(client.bodies, _kinds_of(client.bodies), strict=True) if k == "turn"]


def _kinds_of(bodies: list[dict[str, Any]]) -> list[str]:
    return [_kind(b["messages"], b.get("max_tokens")) if b.get("stream") else "other" for b in bodies]


async def _turns(orchestrator: AiOrchestrator, indexes: range) -> list[TaskResult]:
    """Turns one after the other, each after the work between turns before it finished (a player reading)."""
    results = []
    for index in indexes:
        results.append(await orchestrator.run_task(_request(index)))
        await orchestrator.prewarms.drain()
    return results


def _cut(result: TaskResult) -> CutReport:
    assert result.cut_report is not None, result
    return result.cut_report


def _compacted(result: TaskResult) -> bool:
    return result.cut_report is not None and result.cut_report.compaction is not CompactionKind.NONE


def test_a_player_turn_during_the_summarizer_call_pre_empts_it_and_sends_the_previous_head():
    orchestrator, client = _orchestrator(llm_compaction_enabled=True)

    async def go() -> dict[str, Any]:
        try:
            early = await _turns(orchestrator, range(2))
            client.hold("summarizer")
            third = await orchestrator.run_task(_request(2))  # the work after it folds for the fourth: held
            await asyncio.wait_for(client.arrived["summarizer"].wait(), HANG_GUARD_S)
            fourth = await asyncio.wait_for(orchestrator.run_task(_request(3)), HANG_GUARD_S)  # summarizer still held
            summary_after_fourth = _summary(orchestrator)
            client.let_go("summarizer")
            await orchestrator.prewarms.drain()  # the work after the fourth makes the fold again, and warms it
            fifth = await orchestrator.run_task(_request(4))
            await orchestrator.prewarms.drain()
            return {"early": early, "third": third, "fourth": fourth, "fifth": fifth,
                    "summary_after_fourth": summary_after_fourth}
        finally:
            await client.aclose()

    out = run(go())
    assert all(r.ok for r in [*out["early"], out["third"], out["fourth"], out["fifth"]])
    fourth, fifth = out["fourth"].cut_report, out["fifth"].cut_report
    # The fourth turn reached the trigger but did not wait: the previous head, no fold, nothing stored.
    assert fourth.compaction is CompactionKind.NONE and fourth.compaction_deferred and not fourth.folded_ids
    assert fourth.sent_verbatim == fourth.stored_messages == 6
    assert out["summary_after_fourth"] is None
    assert orchestrator.compaction_stats.lost == 1 and orchestrator.compaction_stats.deferred == 1
    turns = _turn_bodies(client)
    assert not _has_summary(turns[3])
    # The lost fold was made again after the fourth turn, whole, and the fifth sent it (reported as folded there).
    assert fifth.compaction is CompactionKind.LLM and fifth.folded_between_turns and not fifth.compaction_fell_back
    assert len(fifth.folded_ids) == 8 - 2 and fifth.sent_verbatim == 2
    stored = _summary(orchestrator)
    assert stored is not None and strip_fold_marker(stored) == SUMMARY and _has_summary(turns[4])
    assert strip_fold_marker(stored) in str(turns[4]["messages"][1]["content"])
    assert orchestrator.compaction_stats.sent == 1 and len(orchestrator.staged_folds) == 0
    # Each summarizer call that ran to its end came from the work between turns, never from a turn.
    kinds = client.kinds
    assert kinds.count("summarizer") == 2  # the pre-empted one and the one made again


def test_a_player_turn_during_the_prewarm_pre_empts_it_and_sends_the_fold_the_prewarm_went_out_with():
    orchestrator, client = _orchestrator()

    async def go() -> list[TaskResult]:
        try:
            results = await _turns(orchestrator, range(2))
            client.hold("prewarm")
            # the fold for the fourth is made, its prewarm held
            results.append(await orchestrator.run_task(_request(2)))
            await asyncio.wait_for(client.arrived["prewarm"].wait(), HANG_GUARD_S)
            staged = _staged(orchestrator)
            assert staged is not None and staged.ready  # its prewarm went out: the server holds the new head
            # The player is faster than the prewarm: the turn must not wait for it (it is still held).
            results.append(await asyncio.wait_for(orchestrator.run_task(_request(3)), HANG_GUARD_S))
            client.let_go("prewarm")
            await orchestrator.prewarms.drain()
            return results
        finally:
            await client.aclose()

    results = run(go())
    assert all(r.ok for r in results)
    fourth = results[3].cut_report
    assert fourth is not None and orchestrator.prewarms.stats.preempted == 1
    # The prewarm had gone out: the model server holds (a single-slot one: is evaluating) the new head, so the
    # turn sends it rather than the previous head, which such a server would evaluate again in full.
    assert fourth.folded_between_turns and fourth.compaction is CompactionKind.DETERMINISTIC
    assert not fourth.compaction_deferred and orchestrator.compaction_stats.sent == 1


def test_a_player_turn_before_the_prewarm_reached_the_model_sends_the_previous_head():
    orchestrator, client = _orchestrator()

    async def go() -> list[TaskResult]:
        try:
            results = await _turns(orchestrator, range(2))
            results.append(await orchestrator.run_task(_request(2)))
            async with orchestrator.queue.slot(Priority.PLAYER):  # the model is busy with another NPC's turn
                for _ in range(HANG_GUARD_S * 100):  # the fold for the fourth is made, its prewarm waits
                    if orchestrator.queue.waiting:
                        break
                    await asyncio.sleep(0.01)
                assert _staged(orchestrator) is not None and orchestrator.queue.waiting == 1
                fourth = asyncio.create_task(orchestrator.run_task(_request(3)))  # the player is faster
                while orchestrator.queue.waiting < 2:
                    await asyncio.sleep(0.01)
            results.append(await asyncio.wait_for(fourth, HANG_GUARD_S))  # served before the waiting prewarm
            await orchestrator.prewarms.drain()
            folds.append(orchestrator.compaction_stats.folded)
            results += await _turns(orchestrator, range(4, 5))
            return results
        finally:
            await client.aclose()

    folds: list[int] = []
    results = run(go())
    assert all(r.ok for r in results)
    fourth, fifth = results[3].cut_report, results[4].cut_report
    assert fourth is not None and fifth is not None
    assert fourth.compaction_deferred and fourth.compaction is CompactionKind.NONE
    assert client.kinds[:5] == ["turn"] * 3 + ["turn", "prewarm"]  # the superseded prewarm never went out
    # The same fold (made once, after the third turn) was warmed after the fourth and sent by the fifth.
    assert fifth.folded_between_turns and fifth.compaction is CompactionKind.DETERMINISTIC
    assert len(fifth.folded_ids) == 4 and fifth.sent_verbatim == 4
    assert folds == [1] and orchestrator.compaction_stats.sent == 1


def test_a_fold_whose_messages_changed_before_its_turn_is_dropped_whole():
    orchestrator, client = _orchestrator()

    async def go() -> list[TaskResult]:
        try:
            results = await _turns(orchestrator, range(3))  # a fold for the fourth is made and ready
            assert len(orchestrator.staged_folds) == 1
            orchestrator.stores.scoped(PLAYER).clear_chat_history("Smith")  # the game starts over
            results += await _turns(orchestrator, range(3, 4))
            return results
        finally:
            await client.aclose()

    results = run(go())
    fourth = results[3].cut_report
    assert results[3].ok and fourth is not None and fourth.stored_messages == 0
    assert fourth.compaction is CompactionKind.NONE and not fourth.folded_between_turns
    assert _summary(orchestrator) is None and not _has_summary(_turn_bodies(client)[3])
    assert len(orchestrator.staged_folds) == 0  # the work after the fourth turn dropped it
    assert orchestrator.compaction_stats.sent == 0


def test_past_the_slack_a_turn_folds_itself_deterministically_rather_than_wait():
    orchestrator, client = _orchestrator(llm_compaction_enabled=True)

    async def go() -> list[TaskResult]:
        try:
            results = await _turns(orchestrator, range(2))
            client.hold("summarizer")  # every summarizer call is held: the player is always faster
            for index in range(2, 5):
                results.append(await asyncio.wait_for(orchestrator.run_task(_request(index)), HANG_GUARD_S))
                if index < 4:  # the work after the third and the fourth turn folds (the fifth folded itself)
                    await asyncio.wait_for(client.arrived["summarizer"].wait(), HANG_GUARD_S)
                    client.arrived["summarizer"].clear()
            client.let_go("summarizer")
            await orchestrator.prewarms.drain()
            return results
        finally:
            await client.aclose()

    results = run(go())
    assert all(r.ok for r in results)
    fourth, fifth = results[3].cut_report, results[4].cut_report
    assert fourth is not None and fifth is not None
    assert fourth.compaction_deferred and fourth.stored_messages == SLACK
    # 8 stored messages > the window and its slack: the turn folds, deterministically (no summarizer wait).
    assert fifth.compaction is CompactionKind.DETERMINISTIC and fifth.compaction_fell_back
    assert not fifth.folded_between_turns and not fifth.compaction_deferred
    summary = _summary(orchestrator)
    assert summary is not None and SUMMARY not in summary  # the turn's own deterministic fold
    stats = orchestrator.compaction_stats
    assert (stats.in_turn, stats.lost) == (1, 2)  # lost: the folds made after the third and the fourth turn


@pytest.fixture(scope="module")
def sessions() -> dict[bool, dict[str, Any]]:
    """The same session with compaction between turns on and off (the player reads each reply)."""

    async def session(orchestrator: AiOrchestrator, client: HoldingModel) -> list[TaskResult]:
        try:
            return await _turns(orchestrator, range(len(HINTS)))
        finally:
            await client.aclose()

    out = {}
    for flag in (True, False):
        orchestrator, client = _orchestrator(background_compaction=flag)
        results = run(session(orchestrator, client))
        assert all(r.ok for r in results)
        out[flag] = {"results": results, "bodies": _turn_bodies(client), "summary": _summary(orchestrator),
                     "history": orchestrator.stores.scoped(PLAYER).get_chat_history("Smith"),
                     "stats": orchestrator.compaction_stats}
    return out


def test_folds_made_between_turns_send_and_store_what_folds_in_the_turn_did(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    assert on["bodies"] == off["bodies"]
    assert on["summary"] == off["summary"] and on["summary"]
    assert [(m.role, m.content) for m in on["history"]] == [(m.role, m.content) for m in off["history"]]
    on_reports = [r.cut_report for r in on["results"]]
    off_reports = [r.cut_report for r in off["results"]]
    compacting = [i for i, r in enumerate(off_reports) if r.compaction is not CompactionKind.NONE]
    assert compacting == [3, 5, 7]
    for i, (a, b) in enumerate(zip(on_reports, off_reports, strict=True)):
        assert a.folded_between_turns == (i in compacting) and not a.compaction_deferred and not b.folded_between_turns
        a.folded_between_turns = False
        assert a == b  # the same cut report otherwise: what was folded, when, exactly once
    assert on["stats"].folded == on["stats"].sent == len(compacting) and on["stats"].in_turn == 0
    folded = [i for r in on_reports for i in r.folded_ids]
    assert len(folded) == len(set(folded))  # every message folded once


def test_a_memory_edit_after_the_prewarm_is_a_note_and_the_warmed_head_is_sent_as_it_was():
    # Before: the compaction folded the new edit into the head too, so the warmed head was never sent.
    orchestrator, client = _orchestrator()
    orchestrator.policy.configure_role("Smith", system_prompt="You are Smith, the village blacksmith.",
                                       max_chat_history_messages=WINDOW, with_chat_history=True, use_memory_tool=True,
                                       max_output_tokens=8, temperature=0.0)
    tool = MemoryTool(orchestrator.stores.memory, orchestrator.stores.scoped(PLAYER).key("Smith"))
    assert tool.execute({"action": "append", "content": "The player's name is Alex."}).success

    async def go() -> list[TaskResult]:
        try:
            results = await _turns(orchestrator, range(2))
            assert tool.execute({"action": "append", "content": "The player owes 30 gold."}).success
            results += await _turns(orchestrator, range(2, 3))  # the fold for the fourth is made and warmed
            assert tool.execute({"action": "append", "content": "The player fears spiders."}).success  # the game
            results += await _turns(orchestrator, range(3, 4))
            return results
        finally:
            await client.aclose()

    results = run(go())
    fourth = results[3]
    assert fourth.ok and fourth.cut_report is not None and fourth.cut_report.folded_between_turns
    prewarms = [b for b, k in zip(client.bodies, _kinds_of(client.bodies), strict=True) if k == "prewarm"]
    prewarm = prewarms[-1]["messages"]
    sent = _turn_bodies(client)[3]["messages"]
    assert sent[1] == prewarm[1] and "owes 30 gold" in sent[1]["content"]  # the head as warmed
    assert "fears spiders" not in sent[1]["content"]
    [note] = [m for m in sent[2:] if "fears spiders" in m["content"]]
    assert note["content"].startswith("## Memory (updates)")
    # Everything the prewarm evaluated, the re-placed tail included, then the note: the edit costs the note alone
    # (before, the note went before the tail and the tail was evaluated again: 84 instead of 61 tokens).
    assert sent[: len(prewarm)] == prewarm
    assert sent[len(prewarm)] == note and sent[len(prewarm) + 1:] == [{"role": "user", "content": sent[-1]["content"]}]


def test_without_a_prewarm_the_next_turn_is_prepared_only_near_its_fold() -> None:
    # With nothing to warm, preparing the next turn between turns serves only its fold: a history far below its
    # compaction trigger skips it (it cost a whole preparation per turn); one near it still gets its fold staged.
    window = 12  # the eighth turn finds 14 stored messages: past the window

    def prepared_after(flag: bool) -> tuple[list[TaskResult], list[dict[str, Any]], list[str]]:
        orchestrator, client = _orchestrator(prewarm=False, background_compaction=flag)
        orchestrator.policy.configure_role("Smith", system_prompt="You are Smith, the village blacksmith.",
                                           max_chat_history_messages=window, with_chat_history=True,
                                           use_memory_tool=False, max_output_tokens=8, temperature=0.0)
        predict = orchestrator.planner.predict_prefix
        after: list[str] = []  # the line of each turn whose next turn was prepared

        async def counted(turn: Any, **options: Any) -> Any:
            after.append(turn.request.hint)
            return await predict(turn, **options)

        orchestrator.planner.predict_prefix = counted  # type: ignore[method-assign]  # counting its calls

        async def go() -> list[TaskResult]:
            try:
                return await _turns(orchestrator, range(len(HINTS)))
            finally:
                await client.aclose()

        return run(go()), _turn_bodies(client), after

    on, on_bodies, on_after = prepared_after(True)
    off, off_bodies, off_after = prepared_after(False)
    assert all(r.ok for r in on + off)
    assert on_bodies == off_bodies  # the same requests as folding in the turn
    assert [_cut(r).folded_between_turns for r in on] == [False] * 7 + [True]
    assert [_cut(r).compaction is not CompactionKind.NONE for r in off] == [False] * 7 + [True]
    assert on_after == HINTS[4:] and off_after == []
