"""The prewarm: after a turn, the next turn's prefix is evaluated in the background.

On the model doubles, every request recorded: which turns get a prewarm, what it sends, that a failing or superseded
one changes nothing, and that the turns send and store the same bytes with the prewarm on and off. What the engine
then evaluates (the warm prefix, its prompt cache) is tested on llama-server in test_prewarm_on_llama_server.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from pyruntime.history import CompactionKind
from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.client.queue import Priority
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, FunctionModel, RecordingModel
from pyruntime.testing.scripted import scripted_answer, scripted_usage
from pyruntime.turns import AiOrchestrator, AiTaskRequest, TaskResult
from pyruntime.turns.between.prewarm import (
    PREWARM_MAX_TOKENS,
    in_own_slot,
    needs_prewarm,
    prompt_cache_has_room,
    worth_prewarming,
)
from tests.support.doubles import orchestrator_on, run, session_stores
from tests.turns.smith_session import HINTS, PLAYER, WINDOW, is_prewarm, kind, smith_policy, smith_session

COMPACTING = [3, 5, 7]  # the turns whose history reaches the window's fold (every second one past it)


def _reply(request: ChatRequest) -> str:
    return f"About '{request.facts.hint}': aye."


def _model() -> RecordingModel:
    return RecordingModel(FunctionModel(_reply))


def _compacting(results: list[TaskResult]) -> list[int]:
    return [i for i, r in enumerate(results)
            if r.cut_report is not None and r.cut_report.compaction is not CompactionKind.NONE]


@pytest.fixture(scope="module")
def sessions() -> dict[bool, dict[str, Any]]:
    """The same session with the prewarm on and off."""
    return {flag: smith_session(_model(), prewarm=flag) for flag in (True, False)}


def test_a_prewarm_goes_out_after_each_turn_whose_next_turn_compacts_and_only_then(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    assert _compacting(on["results"]) == _compacting(off["results"]) == COMPACTING
    # The turn before each compacting one is followed by its prewarm; the turns that only append were warm already.
    order = ["prewarm" if is_prewarm(r) else "turn" for r in sorted(on["turns"] + on["prewarms"], key=_number)]
    assert order == ["turn", "turn", "turn", "prewarm", "turn", "turn", "prewarm", "turn", "turn", "prewarm", "turn"]
    stats = on["stats"]
    assert (stats.sent, stats.skipped, stats.failed, stats.preempted) == (3, 5, 0, 0)
    assert stats.evaluated_tokens == sum(_prompt_tokens(r) for r in on["prewarms"])
    for prewarm in on["prewarms"]:
        assert (prewarm.max_tokens, prewarm.temperature, prewarm.streamed) == (PREWARM_MAX_TOKENS, 0.0, True)
        assert prewarm.conversation == on["turns"][0].conversation  # the player's conversation (its slot)
    assert off["prewarms"] == [] and off["stats"].sent == off["stats"].skipped == 0


def test_a_prewarm_sends_the_next_turns_request_but_the_player_line(sessions: dict) -> None:
    on = sessions[True]
    for prewarm in on["prewarms"]:
        following = next(r for r in on["turns"] if r.number == prewarm.number + 1)
        assert prewarm.messages == following.messages[:-1]  # the tail was predicted right
        assert following.messages[-1] == {"role": "user", "content": following.facts.hint}


def test_turns_send_and_store_the_same_bytes_with_the_prewarm_on_and_off(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    assert len(on["turns"]) == len(off["turns"]) == len(HINTS)
    assert [r.body for r in on["turns"]] == [r.body for r in off["turns"]]
    assert on["history"] == off["history"] and on["summary"] == off["summary"] and on["summary"]
    assert [r.cut_report for r in on["results"]] == [r.cut_report for r in off["results"]]
    assert [r.text for r in on["results"]] == [r.text for r in off["results"]] == [
        f"About '{hint}': aye." for hint in HINTS]


def test_a_failing_prewarm_changes_no_turn(caplog: pytest.LogCaptureFixture) -> None:
    stores = session_stores()
    down = False

    def gate() -> None:  # what the watchdog answers while the model server restarts
        if down:
            raise ModelUnavailableError("the model server is restarting")

    model = RecordingModel(_reply, gate=gate)
    orchestrator = orchestrator_on(model, stores, smith_policy(), prewarm=True)

    async def go() -> list[TaskResult]:
        nonlocal down
        results = []
        for hint in HINTS[:WINDOW]:  # the last one predicts a compaction: its prewarm is due
            down = False
            results.append(await orchestrator.run_task(
                AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none")))
            down = True  # gone before its prewarm reaches it
            await orchestrator.prewarms.drain()
        return results

    with caplog.at_level(logging.WARNING, logger="pyruntime.turns"):
        results = run(go())
    assert [r.ok for r in results] == [True] * WINDOW
    stats = orchestrator.prewarms.stats
    assert (stats.sent, stats.failed) == (0, 1)
    warnings = [r.getMessage() for r in caplog.records if "prewarm" in r.getMessage()]
    assert warnings == ["prewarm failed (ModelUnavailableError)"]
    assert len(stores.scoped(PLAYER).get_chat_history("Smith")) == 2 * WINDOW  # every turn recorded
    assert [kind(r) for r in model.requests] == ["turn"] * WINDOW  # nothing else reached the model


def test_a_turn_that_comes_first_supersedes_its_prewarm() -> None:
    model = _model()
    orchestrator = orchestrator_on(model, None, smith_policy(), prewarm=True)
    request = [AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none") for hint in HINTS[:4]]

    async def go() -> TaskResult:
        for r in request[:2]:
            await orchestrator.run_task(r)
            await orchestrator.prewarms.drain()
        await orchestrator.run_task(request[2])  # its prewarm (the next turn compacts) is due
        async with orchestrator.queue.slot(Priority.PLAYER):  # the model is busy with another NPC's turn
            await asyncio.wait_for(_waiting(orchestrator, 1), 60)  # the prewarm waits for it
            later = asyncio.create_task(orchestrator.run_task(request[3]))
            # The player is faster than the prewarm: the next turn waits for the model beside it.
            await asyncio.wait_for(_waiting(orchestrator, 2), 60)
        result = await later
        await orchestrator.prewarms.drain()
        return result

    result = run(go())
    assert result.ok and result.cut_report is not None and result.cut_report.compaction is not CompactionKind.NONE
    stats = orchestrator.prewarms.stats
    assert (stats.sent, stats.skipped, stats.failed) == (0, 4, 0)  # two warm already, the stale one, the last
    assert [kind(r) for r in model.requests] == ["turn"] * 4  # the stale prewarm never reached the model


def test_without_a_prompt_cache_npcs_taking_turns_get_no_prewarm() -> None:
    # Two players with the same smith, turn about, on an engine without a prompt cache (no status): each turn
    # replaces the other conversation in llama.cpp's one sequence, so a prewarm would be wasted work.
    session = smith_session(_model(), prewarm=True, scopes=(PLAYER, AgentMemoryScope(user_id="player2")))
    assert _compacting(session["results"]) == [6, 7, 10, 11, 14, 15]  # a prewarm would have been due before each
    stats = session["stats"]
    assert (stats.sent, stats.skipped) == (0, 2 * len(HINTS))
    assert session["prewarms"] == []


async def _waiting(orchestrator: AiOrchestrator, calls: int) -> None:
    """Return once `calls` model calls wait for the model."""
    while orchestrator.queue.waiting < calls:
        await asyncio.sleep(0.01)


def _number(request: ChatRequest) -> int:
    return request.number


def _prompt_tokens(request: ChatRequest) -> int:
    """The prompt tokens the doubles report for a request (the scripted model's count)."""
    return scripted_usage(request.messages, scripted_answer(""))[0]


def test_a_turn_is_warm_already_when_its_request_starts_the_next_one() -> None:
    system, head, tail = ({"role": "system", "content": c} for c in ("s", "h", "t"))
    history = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    sent = [system, head, tail, history[0]]
    assert not needs_prewarm([*sent, history[1]], sent, displaced=False)  # only this turn's reply follows
    assert needs_prewarm([*sent, history[1]], sent, displaced=True)  # the writer pass's prompt replaced it
    assert needs_prewarm([system, {"role": "system", "content": "new head"}, *history, tail], sent, displaced=False)


def test_a_prewarm_is_sent_only_while_the_prompt_cache_has_room_for_it() -> None:
    mb = 1 << 20
    status = {"prompt_cache_limit_bytes": 256 * mb, "prompt_cache_used_bytes": 60 * mb, "prompt_cache_entries": 4}
    assert prompt_cache_has_room(status) is True  # 4 NPCs of 15 MB: room for many more
    # 16 NPCs of 15 MB fill a 256 MB cache: a prewarm's state would evict the next NPC's (LRU, in rotation).
    assert prompt_cache_has_room({**status, "prompt_cache_used_bytes": 240 * mb, "prompt_cache_entries": 16}) is False
    assert prompt_cache_has_room({**status, "prompt_cache_used_bytes": 0, "prompt_cache_entries": 0}) is True
    assert prompt_cache_has_room({"prompt_cache_limit_bytes": 0}) is None  # no cache
    assert prompt_cache_has_room({}) is None
    assert worth_prewarming(True, ["npc-b", "npc-a"], "npc-a") and not worth_prewarming(False, ["npc-a"], "npc-a")
    # Without a cache only a dialogue gains: another conversation's turn would replace the prefix first.
    assert worth_prewarming(None, ["npc-a", "npc-a"], "npc-a")
    assert not worth_prewarming(None, ["npc-b", "npc-a"], "npc-a")


def test_a_conversation_in_its_own_slot_is_prewarmed_whatever_the_host_cache_holds() -> None:
    # Several slots: the prewarm goes to the conversation's slot, the host cache's room does not matter.
    assert in_own_slot(4, ["npc-b", "npc-a"], "npc-a") and in_own_slot(2, ["npc-a", "npc-a"], "npc-a")
    # More conversations speaking than slots, or one slot: the host cache's rule decides (worth_prewarming).
    assert not in_own_slot(2, ["npc-b", "npc-c"], "npc-a") and not in_own_slot(1, ["npc-a"], "npc-a")
