"""The conversation gate (pure asyncio): memory writes land only between the turns of their conversation."""

from __future__ import annotations

import asyncio

from pyruntime.turns.writer.gate import ConversationGate
from tests.turns.conftest import run


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_write_waits_for_the_running_turn_and_lands_after_it() -> None:
    gate = ConversationGate()
    order: list[str] = []

    async def go() -> None:
        turn_may_end = asyncio.Event()

        async def turn() -> None:
            async with gate.turn("npc"):
                order.append("turn started")
                await turn_may_end.wait()
                order.append("turn ended")

        async def write() -> None:
            async with gate.write("npc"):
                order.append("written")

        running = asyncio.ensure_future(turn())
        await _settle()
        writing = asyncio.ensure_future(write())
        await _settle()
        assert order == ["turn started"] and not writing.done()
        turn_may_end.set()
        await asyncio.gather(running, writing)

    run(go())
    assert order == ["turn started", "turn ended", "written"]


def test_a_turn_that_arrives_while_a_write_waits_starts_after_the_write() -> None:
    gate = ConversationGate()
    order: list[str] = []

    async def go() -> None:
        first_may_end = asyncio.Event()

        async def turn(name: str, until: asyncio.Event | None = None) -> None:
            async with gate.turn("npc"):
                order.append(f"{name} started")
                if until is not None:
                    await until.wait()

        async def write() -> None:
            async with gate.write("npc"):
                order.append("written")

        first = asyncio.ensure_future(turn("first", first_may_end))
        await _settle()
        writing = asyncio.ensure_future(write())
        await _settle()
        second = asyncio.ensure_future(turn("second"))
        await _settle()
        assert order == ["first started"]  # the second turn waits behind the waiting write
        first_may_end.set()
        await asyncio.gather(first, writing, second)

    run(go())
    assert order == ["first started", "written", "second started"]


def test_turns_share_a_conversation_and_other_conversations_are_independent() -> None:
    gate = ConversationGate()

    async def go() -> tuple[int, bool]:
        async with gate.turn("npc"), gate.turn("npc"):
            both = gate.turns_running("npc")
            # A write of another conversation lands while these turns run.
            await asyncio.wait_for(_write(gate, "other"), timeout=5)
            return both, gate.turns_running("npc") == 2

    assert run(go()) == (2, True)
    assert gate.turns_running("npc") == 0 and gate._conversations == {}  # nothing kept once unused


async def _write(gate: ConversationGate, key: str) -> None:
    async with gate.write(key):
        pass


def test_a_cancelled_waiting_write_or_turn_holds_nothing_back() -> None:
    gate = ConversationGate()

    async def go() -> bool:
        turn_may_end = asyncio.Event()

        async def turn() -> None:
            async with gate.turn("npc"):
                await turn_may_end.wait()

        running = asyncio.ensure_future(turn())
        await _settle()
        writing = asyncio.ensure_future(_write(gate, "npc"))
        await _settle()
        writing.cancel()  # e.g. the runtime stopping
        await asyncio.gather(writing, return_exceptions=True)
        # A new turn is not held back by the write that no longer waits.
        await asyncio.wait_for(_turn_once(gate), timeout=5)
        running.cancel()  # a cancelled turn leaves the conversation too
        await asyncio.gather(running, return_exceptions=True)
        await asyncio.wait_for(_write(gate, "npc"), timeout=5)
        return True

    assert run(go())
    assert gate._conversations == {}


async def _turn_once(gate: ConversationGate) -> None:
    async with gate.turn("npc"):
        pass
