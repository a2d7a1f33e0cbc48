"""Turn admission (`service/admission.py`), the pure logic: places, the fair queue, deadlines, retry hints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from pyruntime.service import ServiceError, StatusCode
from pyruntime.service.admission import TurnAdmission


class Turns:
    """Turns that take a place and hold it until released, recording the order they got it in."""

    def __init__(self, admission: TurnAdmission) -> None:
        self.admission = admission
        self.order: list[str] = []
        self.release: dict[str, asyncio.Event] = {}
        self.tasks: list[asyncio.Task[float]] = []

    def start(self, name: str, key: str, deadline_s: float | None = None) -> asyncio.Task[float]:
        self.release[name] = asyncio.Event()

        async def turn() -> float:
            async with self.admission.admit(key, deadline_s) as waited:
                self.order.append(name)
                await self.release[name].wait()
            return waited

        task = asyncio.ensure_future(turn())
        self.tasks.append(task)
        return task

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def finish(self, name: str) -> None:
        self.release[name].set()
        await self.settle()


@contextlib.asynccontextmanager
async def turns(admission: TurnAdmission) -> AsyncIterator[Turns]:
    held = Turns(admission)
    try:
        yield held
    finally:
        for event in held.release.values():
            event.set()
        await asyncio.gather(*held.tasks, return_exceptions=True)


def test_waiting_turns_are_served_round_robin_by_conversation_not_first_come() -> None:
    async def scenario() -> list[str]:
        async with turns(TurnAdmission(max_running=1, max_queued=10, max_per_conversation=5)) as t:
            t.start("x", "x")  # holds the only place
            for name in ("a1", "a2", "a3", "b1", "c1"):  # a player who sent three lines, then two others
                t.start(name, name[0])
            await t.settle()
            for name in ("x", "a1", "b1", "c1", "a2"):
                await t.finish(name)
            return t.order

    # First come first served would be x a1 a2 a3 b1 c1: the others would wait behind all of a's lines.
    assert asyncio.run(scenario()) == ["x", "a1", "b1", "c1", "a2", "a3"]


def test_a_conversation_runs_one_turn_at_a_time_in_order_while_others_use_the_free_places() -> None:
    async def scenario() -> tuple[list[str], int, int]:
        admission = TurnAdmission(max_running=4, max_queued=10, max_per_conversation=3)
        async with turns(admission) as t:
            t.start("a1", "a")
            t.start("a2", "a")
            t.start("b1", "b")
            await t.settle()
            now = admission.snapshot()
            running, queued = now.running, now.queued
            await t.finish("a1")
            return t.order, running, queued

    order, running, queued = asyncio.run(scenario())
    assert (running, queued) == (2, 1)  # a2 waits for a1 although places are free; b1 did not wait
    assert order == ["a1", "b1", "a2"]


def test_a_full_queue_refuses_at_once_with_a_retry_hint_from_the_turns_that_finished() -> None:
    async def scenario() -> ServiceError:
        admission = TurnAdmission(max_running=1, max_queued=1)
        async with turns(admission) as t:
            t.start("done", "d")
            await t.settle()
            await asyncio.sleep(0.05)
            await t.finish("done")  # a turn that held its place ~50 ms: what the next ones are expected to take
            t.start("x", "x")
            t.start("y", "y")  # waits: the one place of the queue
            await t.settle()
            with pytest.raises(ServiceError) as refused:
                async with admission.admit("z"):
                    pass
            now = admission.snapshot()
            assert now.queued == 1 and now.running == 1  # the refusal changed nothing
            return refused.value

    error = asyncio.run(scenario())
    assert error.code is StatusCode.RESOURCE_EXHAUSTED and "full" in error.message
    assert error.retry_after_s is not None and 0.05 <= error.retry_after_s < 1.0


def test_a_turn_whose_deadline_passes_while_it_waits_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> tuple[ServiceError, int, int]:
        admission = TurnAdmission(max_running=1, max_queued=5)
        async with turns(admission) as t:
            t.start("x", "x")
            await t.settle()
            with pytest.raises(ServiceError) as refused:
                async with admission.admit("late", deadline_s=0.05):
                    pass
            now = admission.snapshot()
            return refused.value, now.queued, now.in_flight

    error, queued, in_flight = asyncio.run(scenario())
    assert error.code is StatusCode.RESOURCE_EXHAUSTED and "deadline" in error.message
    assert error.retry_after_s is not None
    assert (queued, in_flight) == (0, 1)


def test_a_turn_that_cannot_start_within_its_deadline_is_refused_at_once() -> None:
    async def scenario() -> tuple[ServiceError, float]:
        admission = TurnAdmission(max_running=1, max_queued=10)
        async with turns(admission) as t:
            t.start("slow", "s")
            await t.settle()
            await asyncio.sleep(0.2)
            await t.finish("slow")  # turns take ~0.2 s here
            for name in "abcde":
                t.start(name, name)  # one runs, four wait: ~1 s of turns ahead
            await t.settle()
            loop = asyncio.get_running_loop()
            began = loop.time()
            with pytest.raises(ServiceError) as refused:
                async with admission.admit("late", deadline_s=0.3):
                    pass
            return refused.value, loop.time() - began

    error, took = asyncio.run(scenario())
    assert error.code is StatusCode.RESOURCE_EXHAUSTED and "within its deadline" in error.message
    assert took < 0.1  # told at once, not after waiting its 0.3 s
    assert error.retry_after_s is not None and error.retry_after_s >= 0.5


def test_a_conversation_over_its_limit_is_refused_and_a_cancelled_waiter_gives_its_place_back() -> None:
    async def scenario() -> tuple[ServiceError, list[str], int]:
        admission = TurnAdmission(max_running=1, max_queued=10, max_per_conversation=2)
        async with turns(admission) as t:
            t.start("a1", "a")
            gone = t.start("a2", "a")
            await t.settle()
            with pytest.raises(ServiceError) as refused:
                async with admission.admit("a"):
                    pass
            gone.cancel()  # the player hung up while waiting
            await t.settle()
            t.start("b1", "b")
            await t.settle()
            await t.finish("a1")
            return refused.value, t.order, admission.snapshot().in_flight

    error, order, in_flight = asyncio.run(scenario())
    assert error.code is StatusCode.RESOURCE_EXHAUSTED and "this conversation" in error.message
    assert order == ["a1", "b1"] and in_flight == 1


def test_running_places_follow_the_model_unless_a_limit_was_given() -> None:
    sized = TurnAdmission()
    sized.size_to(64)
    fixed = TurnAdmission(max_running=3)
    fixed.size_to(64)
    assert (sized.max_running, fixed.max_running) == (80, 3)  # 64 and a quarter more
    small = TurnAdmission()
    small.size_to(1)
    assert small.max_running == 5  # at least 4 more: turns that prepare, record or wait for a game tool
    with pytest.raises(ValueError):
        TurnAdmission(max_queued=-1)
