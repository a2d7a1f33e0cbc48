"""ModelRequestQueue: one holder at a time, player turns first, FIFO within a priority, cancellation-safe."""

from __future__ import annotations

import asyncio

import pytest

from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.queue import ModelRequestQueue, Preempted, Priority
from pyruntime.model.client.types import ChatCompletionAccumulator
from tests.support.tiny_model import TINY_MODEL_ALIAS


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def settle() -> None:
    """Let every ready task run until it blocks."""
    for _ in range(5):
        await asyncio.sleep(0)


async def holder(queue: ModelRequestQueue, priority: Priority, name: str, log: list[str], release: asyncio.Event):
    async with queue.slot(priority):
        log.append(f"start {name}")
        await release.wait()
        log.append(f"end {name}")


def test_one_holder_at_a_time_and_player_waiters_jump_ahead_of_earlier_background_ones():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        gates = {name: asyncio.Event() for name in ("first", "bg1", "bg2", "player", "bg3")}
        order = [
            ("first", Priority.BACKGROUND),
            ("bg1", Priority.BACKGROUND),
            ("bg2", Priority.BACKGROUND),
            ("player", Priority.PLAYER),
            ("bg3", Priority.BACKGROUND),
        ]
        tasks = []
        for name, priority in order:
            tasks.append(asyncio.create_task(holder(queue, priority, name, log, gates[name])))
            await settle()
        assert queue.busy and queue.waiting == 4
        for name in ("first", "player", "bg1", "bg2", "bg3"):
            gates[name].set()
            await settle()
        await asyncio.gather(*tasks)
        return log, queue

    log, queue = run(go())
    assert log == [
        "start first", "end first",
        "start player", "end player",
        "start bg1", "end bg1",
        "start bg2", "end bg2",
        "start bg3", "end bg3",
    ]  # fmt: skip
    assert not queue.busy and queue.waiting == 0


def test_a_cancelled_waiter_leaves_the_queue():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        gate_a, gate_b, gate_c = asyncio.Event(), asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(holder(queue, Priority.PLAYER, "a", log, gate_a))
        await settle()
        b = asyncio.create_task(holder(queue, Priority.PLAYER, "b", log, gate_b))
        c = asyncio.create_task(holder(queue, Priority.BACKGROUND, "c", log, gate_c))
        await settle()
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        assert queue.waiting == 1
        gate_a.set()
        gate_c.set()
        await asyncio.gather(a, c)
        return log, queue

    log, queue = run(go())
    assert log == ["start a", "end a", "start c", "end c"]
    assert not queue.busy


def test_a_cancelled_holder_releases_the_slot():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        never, gate_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(holder(queue, Priority.PLAYER, "a", log, never))
        await settle()
        b = asyncio.create_task(holder(queue, Priority.BACKGROUND, "b", log, gate_b))
        await settle()
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        await settle()
        gate_b.set()
        await b
        return log, queue

    log, queue = run(go())
    assert log == ["start a", "start b", "end b"]
    assert not queue.busy


def test_a_waiter_cancelled_just_as_it_is_granted_passes_the_slot_on():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        gate_c = asyncio.Event()
        slot = queue.slot(Priority.PLAYER)
        await slot.__aenter__()
        b = asyncio.create_task(holder(queue, Priority.PLAYER, "b", log, asyncio.Event()))
        c = asyncio.create_task(holder(queue, Priority.PLAYER, "c", log, gate_c))
        await settle()
        await slot.__aexit__(None, None, None)  # hands the slot to b's future, b has not run yet ...
        b.cancel()  # ... and is cancelled before it ever does
        with pytest.raises(asyncio.CancelledError):
            await b
        gate_c.set()
        await c
        return log, queue

    log, queue = run(go())
    assert log == ["start c", "end c"]
    assert not queue.busy and queue.waiting == 0


async def background_holder(queue: ModelRequestQueue, name: str, log: list[str], release: asyncio.Event) -> None:
    """Background work a player may stop: logs how it ended."""
    try:
        async with queue.slot(Priority.BACKGROUND, preemptible=True) as grant:
            log.append(f"start {name}")
            await release.wait()
            log.append(f"end {name}")
    except Preempted:
        assert grant.preempted
        log.append(f"preempted {name}")


def test_a_player_call_stops_preemptible_background_work_and_gets_the_slot_at_once():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        never, gate_p, gate_bg2 = asyncio.Event(), asyncio.Event(), asyncio.Event()
        bg = asyncio.create_task(background_holder(queue, "bg", log, never))
        await settle()
        bg2 = asyncio.create_task(background_holder(queue, "bg2", log, gate_bg2))  # waits: not stopped by anyone
        await settle()
        player = asyncio.create_task(holder(queue, Priority.PLAYER, "player", log, gate_p))
        await settle()
        assert log == ["start bg", "preempted bg", "start player"]
        gate_p.set()
        gate_bg2.set()
        await asyncio.gather(bg, bg2, player)
        return log, queue

    log, queue = run(go())
    assert log == ["start bg", "preempted bg", "start player", "end player", "start bg2", "end bg2"]
    assert not queue.busy


def test_background_work_that_is_not_preemptible_keeps_the_slot_until_it_is_done():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        gate_bg, gate_p = asyncio.Event(), asyncio.Event()
        bg = asyncio.create_task(holder(queue, Priority.BACKGROUND, "writer", log, gate_bg))
        await settle()
        player = asyncio.create_task(holder(queue, Priority.PLAYER, "player", log, gate_p))
        await settle()
        assert log == ["start writer"]
        gate_bg.set()
        gate_p.set()
        await asyncio.gather(bg, player)
        return log

    assert run(go()) == ["start writer", "end writer", "start player", "end player"]


def test_a_player_that_comes_just_as_background_work_is_handed_the_slot_still_stops_it():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        first = queue.slot(Priority.PLAYER)
        await first.__aenter__()
        bg = asyncio.create_task(background_holder(queue, "bg", log, asyncio.Event()))
        await settle()
        await first.__aexit__(None, None, None)  # hands the slot to the background work, which has not resumed yet
        player = asyncio.create_task(holder(queue, Priority.PLAYER, "player", log, asyncio.Event()))
        await settle()
        assert log == ["start bg", "preempted bg", "start player"]
        player.cancel()
        await asyncio.gather(bg, player, return_exceptions=True)
        return queue

    assert not run(go()).busy


def test_background_arrivals_do_not_stop_background_work_and_only_background_work_is_preemptible():
    async def go():
        queue = ModelRequestQueue()
        log: list[str] = []
        gate_a, gate_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(background_holder(queue, "a", log, gate_a))
        await settle()
        b = asyncio.create_task(background_holder(queue, "b", log, gate_b))
        await settle()
        gate_a.set()
        gate_b.set()
        await asyncio.gather(a, b)
        with pytest.raises(ValueError):
            async with queue.slot(Priority.PLAYER, preemptible=True):
                pass
        return log

    assert run(go()) == ["start a", "end a", "start b", "end b"]


def test_priority_must_be_a_known_priority():
    async def go():
        async with ModelRequestQueue().slot(7):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError):
        run(go())


def test_two_overlapping_streams_through_the_queue_both_complete_intact(endless_server):
    async def go():
        queue = ModelRequestQueue()
        async with OpenAICompatClient(endless_server.base_url, model=TINY_MODEL_ALIAS) as client:
            in_flight = 0
            most = 0

            async def turn(priority: Priority, text: str):
                nonlocal in_flight, most
                async with queue.slot(priority):
                    in_flight += 1
                    most = max(most, in_flight)
                    acc = ChatCompletionAccumulator()
                    async for delta in client.stream_chat([{"role": "user", "content": text}], max_tokens=200):
                        acc.add(delta)
                    in_flight -= 1
                    return acc.result()

            results = await asyncio.gather(turn(Priority.BACKGROUND, "summarise"), turn(Priority.PLAYER, "hi"))
            return results, most

    results, most = run(go())
    assert most == 1
    for result in results:
        assert result.finish_reason == "length" and result.text


async def three_call_turn(queue: ModelRequestQueue, name: str, log: list[str], gap: float = 0.01) -> None:
    """A turn of three model calls with a short tool step between them, as the tool loop makes."""
    owner = queue.new_owner()
    for call in range(3):
        async with queue.slot(Priority.PLAYER, owner) as grant:
            log.append(f"{name}{call}")
            await asyncio.sleep(0.01)  # decoding
            if call < 2:
                grant.expect_more()
        await asyncio.sleep(gap)  # the tool runs, the next prompt is built


def test_concurrent_turns_keep_their_calls_together():
    async def main() -> list[str]:
        queue = ModelRequestQueue(linger=5.0)
        log: list[str] = []
        await asyncio.gather(*(three_call_turn(queue, name, log) for name in "ABCD"))
        assert not queue.busy
        return log

    assert run(main()) == ["A0", "A1", "A2", "B0", "B1", "B2", "C0", "C1", "C2", "D0", "D1", "D2"]


def test_without_owners_the_same_calls_interleave():
    # The baseline the owners fix: plain FIFO hands the slot to another turn between two calls.
    async def main() -> list[str]:
        queue = ModelRequestQueue(linger=5.0)
        log: list[str] = []

        async def turn(name: str) -> None:
            for call in range(3):
                async with queue.slot(Priority.PLAYER):
                    log.append(f"{name}{call}")
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(turn(name) for name in "AB"))
        return log

    assert run(main())[:2] == ["A0", "B0"]


def test_a_reservation_lapses_after_the_linger_and_the_next_waiter_goes_on():
    async def main() -> list[str]:
        queue = ModelRequestQueue(linger=0.05)
        log: list[str] = []

        async def slow_turn() -> None:
            owner = queue.new_owner()
            async with queue.slot(Priority.PLAYER, owner) as grant:
                log.append("A0")
                await asyncio.sleep(0.01)
                grant.expect_more()
            await asyncio.sleep(0.5)  # a game tool far longer than the linger
            async with queue.slot(Priority.PLAYER, owner):
                log.append("A1")

        async def other() -> None:
            await asyncio.sleep(0.001)
            async with queue.slot(Priority.PLAYER, queue.new_owner()):
                log.append("B0")

        await asyncio.gather(slow_turn(), other())
        assert not queue.busy
        return log

    assert run(main()) == ["A0", "B0", "A1"]


def test_nobody_waiting_means_no_reservation():
    async def main() -> bool:
        queue = ModelRequestQueue(linger=5.0)
        owner = queue.new_owner()
        async with queue.slot(Priority.PLAYER, owner) as grant:
            grant.expect_more()
        return queue.busy

    assert run(main()) is False


def test_an_older_turn_goes_before_a_newer_one_and_background_after_both():
    async def main() -> list[str]:
        queue = ModelRequestQueue(linger=0)
        log: list[str] = []
        release = asyncio.Event()
        old, new = queue.new_owner(), queue.new_owner()
        blocker = asyncio.create_task(holder(queue, Priority.PLAYER, "X", log, release))
        await settle()

        async def call(name: str, priority: Priority, owner: int | None) -> None:
            async with queue.slot(priority, owner):
                log.append(name)

        tasks = [asyncio.create_task(call("background", Priority.BACKGROUND, None))]
        await settle()
        tasks.append(asyncio.create_task(call("new", Priority.PLAYER, new)))
        await settle()
        tasks.append(asyncio.create_task(call("old", Priority.PLAYER, old)))
        await settle()
        release.set()
        await asyncio.gather(blocker, *tasks)
        return log

    assert run(main()) == ["start X", "end X", "old", "new", "background"]


def test_an_owner_that_never_calls_again_frees_the_slot_after_the_linger():
    async def main() -> bool:
        queue = ModelRequestQueue(linger=0.05)
        owner = queue.new_owner()
        release = asyncio.Event()
        log: list[str] = []
        async with queue.slot(Priority.PLAYER, owner) as grant:
            waiter = asyncio.create_task(holder(queue, Priority.PLAYER, "B", log, release))
            await settle()
            grant.expect_more()
        assert queue.busy  # reserved for the owner, B waits
        await asyncio.sleep(0.2)  # the owner never comes back: the reservation lapses
        assert log == ["start B"]
        release.set()
        await waiter
        return queue.busy

    assert run(main()) is False


def test_a_queue_of_several_slots_runs_that_many_at_once_and_keeps_one_for_the_player():
    # The hosted llama-server decodes its parallel slots together: the queue hands out as many, but background
    # work (writer pass, prewarm, compaction) never takes the last one, so a player's turn starts at once.
    async def go():
        queue = ModelRequestQueue(capacity=3)
        log: list[str] = []
        gates = {name: asyncio.Event() for name in ("bg1", "bg2", "bg3", "p1", "p2")}
        tasks = [asyncio.create_task(holder(queue, Priority.BACKGROUND, name, log, gates[name]))
                 for name in ("bg1", "bg2", "bg3")]
        await settle()
        assert log == ["start bg1", "start bg2"] and queue.waiting == 1 and queue.in_use == 2
        tasks.append(asyncio.create_task(holder(queue, Priority.PLAYER, "p1", log, gates["p1"])))
        await settle()
        assert log[-1] == "start p1" and queue.in_use == 3  # the player's slot was free
        tasks.append(asyncio.create_task(holder(queue, Priority.PLAYER, "p2", log, gates["p2"])))
        await settle()
        assert "start p2" not in log  # all three slots are taken
        gates["bg1"].set()
        await settle()
        assert log[-2:] == ["end bg1", "start p2"]  # the player before the waiting background request
        gates["p1"].set()
        await settle()
        assert log[-2:] == ["end p1", "start bg3"]  # one background request runs beside bg2 again
        for name in ("p2", "bg2", "bg3"):
            gates[name].set()
        await asyncio.gather(*tasks)
        return queue

    queue = run(go())
    assert not queue.busy and queue.waiting == 0 and queue.in_use == 0


def test_a_one_slot_queue_still_runs_background_work_and_bad_capacities_are_refused():
    async def go():
        queue = ModelRequestQueue()
        async with queue.slot(Priority.BACKGROUND):
            assert queue.busy
        return queue

    assert not run(go()).busy
    with pytest.raises(ValueError):
        ModelRequestQueue(capacity=0)
    with pytest.raises(ValueError):
        ModelRequestQueue(capacity=2, background_capacity=3)
