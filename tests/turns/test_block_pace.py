"""Where the memory-last block goes, by the player's pace (turns/between/block_pace.py)."""

from __future__ import annotations

import asyncio
import json

from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.testing import ChatRequest, FunctionModel
from pyruntime.turns import AiOrchestrator, AiTaskRequest
from pyruntime.turns.between.block_pace import RECOVERY_TURNS, BlockPace
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from tests.turns.conftest import run


def test_the_block_moves_until_a_line_comes_before_the_prewarm_ended() -> None:
    pace = BlockPace()
    assert pace.turn_started("npc", 0.0) is False
    pace.turn_ended("npc", 1.0)
    pace.prewarm_started("npc")
    # The player answered while the model moved the block: this turn is placed as that prewarm predicted (it finds
    # its prefix evaluated), the block stays from the next turn on.
    assert pace.turn_started("npc", 2.0) is False
    assert pace.next_stays("npc") is True
    pace.prewarm_ended("npc", 1.5, moved_block=True)
    pace.turn_ended("npc", 2.5)
    assert pace.turn_started("npc", 3.0) is True
    assert pace.turn_started("other", 2.0) is False  # per conversation
    assert pace.next_stays("never seen") is False


def test_the_block_moves_again_after_turns_that_left_the_model_ample_time() -> None:
    pace = BlockPace()
    pace.turn_ended("npc", 0.0)
    pace.prewarm_started("npc")
    assert pace.turn_started("npc", 1.0) is False
    assert pace.next_stays("npc") is True
    pace.prewarm_ended("npc", 1.5, moved_block=True)  # moving the block took 1.5 s
    now = 1.0
    for slow in range(RECOVERY_TURNS * 2):
        pace.turn_ended("npc", now)
        now += 2.5 if slow != RECOVERY_TURNS - 1 else 6.0  # 2.5 s: less than twice 1.5 s, not ample
        assert pace.turn_started("npc", now) is True
    for _ in range(RECOVERY_TURNS):
        pace.turn_ended("npc", now)
        now += 3.5
        assert pace.turn_started("npc", now) is True  # the third ample turn still stays: its prewarm predicted it
    assert pace.next_stays("npc") is False  # the prewarm after it moves the block, and the next turn finds it moved
    pace.turn_ended("npc", now)
    assert pace.turn_started("npc", now + 3.5) is False


def test_a_fixed_pace_always_answers_the_same_and_remembers_a_bounded_number_of_conversations() -> None:
    for fixed in (True, False):
        pace = BlockPace(fixed)
        pace.prewarm_started("npc")
        assert pace.turn_started("npc", 0.0) is fixed
        assert pace.next_stays("npc") is fixed
    pace = BlockPace(limit=2)
    for name in ("a", "b", "c"):
        pace.prewarm_started(name)
    placed = []
    for name in ("b", "c", "a"):  # "a" was forgotten: its prewarm no longer counts
        pace.turn_started(name, 0.0)
        placed.append(pace.next_stays(name))
    assert placed == [True, True, False]


def test_a_player_faster_than_the_prewarm_finds_its_prefix_then_gets_the_block_that_stays() -> None:
    # The writer design: after the first reply the prewarm moves the block after the new exchange; the model holds
    # it until the next line came, as a slow engine would. That line's request is the prewarm's prefix and the line
    # (it waits for the prewarm, then evaluates only the line); from the next line on the block stays: the third
    # request appends to the second one.
    prewarm_in, release = asyncio.Event(), asyncio.Event()

    async def model_of(request: ChatRequest) -> str:
        if "response_format" in request.body:
            return json.dumps({"kind": "nothing"})
        if request.body.get("max_tokens") == PREWARM_MAX_TOKENS:
            prewarm_in.set()
            await release.wait()
            return "."
        return f"Reply {sum(m['role'] == 'user' for m in request.messages)}."

    async def go() -> tuple[list[list[dict[str, str]]], list[list[dict[str, str]]], list[bool]]:
        stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
        MemoryTool(stores.memory, stores.scoped().key("SmartChat")).execute(
            {"action": "append", "content": "The player rides a grey mare."})
        model = FunctionModel(model_of)
        orchestrator = AiOrchestrator(AgentMemoryPolicy(), stores, model, model_context_tokens=4096,
                                      memory_design="writer", memory_last=True, prewarm=True)
        stays = []
        await orchestrator.run_task(AiTaskRequest("Which road is shorter?", "SmartChat"))
        await asyncio.wait_for(prewarm_in.wait(), 5)
        second = asyncio.ensure_future(orchestrator.run_task(AiTaskRequest("Is the bridge safe?", "SmartChat")))
        await asyncio.sleep(0.05)
        release.set()
        await second
        await orchestrator.memory_passes.drain()
        await orchestrator.prewarms.drain()
        await orchestrator.run_task(AiTaskRequest("And the ford?", "SmartChat"))
        stays.append(orchestrator.block_pace.turn_started("other", 0.0))
        await orchestrator.memory_passes.drain()
        await orchestrator.prewarms.drain()
        turns = [r.messages for r in model.requests if "response_format" not in r.body
                 and r.body.get("max_tokens") != PREWARM_MAX_TOKENS]
        prewarms = [r.messages for r in model.requests if r.body.get("max_tokens") == PREWARM_MAX_TOKENS]
        return turns, prewarms, stays

    (first, second, third), prewarms, stays = run(go())
    assert first[-2]["content"].startswith("## Notes about the player")
    assert second[:-1] == prewarms[0] and second[-1] == {"role": "user", "content": "Is the bridge safe?"}
    assert second[-2]["content"].startswith("## Notes about the player")  # moved after the first exchange
    assert third[:len(second)] == second and [m["role"] for m in third[len(second):]] == ["assistant", "user"]
    assert stays == [False]  # another NPC's block still moves
