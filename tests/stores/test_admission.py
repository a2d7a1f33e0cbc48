"""A stuck save never blocks other saves: calls waiting for a save hold no worker thread.

A real second process holds one save's file lock; 40 calls pile onto that save at once through the
service's worker pool (16 threads), and calls for 10 other saves still answer. No timing is asserted:
the other saves must all be answered before any call of the stuck save has ended (it ends only at
its lock timeout), which the pool could not do if the 40 calls held its 16 workers.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from pyruntime.memory.state import AgentMemoryState
from pyruntime.service.executor import DEFAULT_WORKERS, BlockingCalls
from pyruntime.service.status import ServiceError, StatusCode
from pyruntime.stores.admission import Admission, SaveBusy, admitted
from pyruntime.stores.file_layout import file_stem
from pyruntime.stores.file_store import FileAgentMemoryStore
from tests.support.loads import loaded
from tests.support.lock_holder import hold_lock_in_another_process, release

LOCK_TIMEOUT = 5.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def test_forty_calls_on_a_stuck_save_leave_the_workers_to_the_other_saves(root):
    store = FileAgentMemoryStore(root, lock_timeout=LOCK_TIMEOUT)
    store.save("Stuck", AgentMemoryState(memory="before"))
    proc = hold_lock_in_another_process(store, "Stuck")
    calls = BlockingCalls(DEFAULT_WORKERS)
    finished: list[str] = []

    async def stuck(i: int) -> object:
        try:
            if i % 2:
                await calls.run(store.mutate, "Stuck", lambda s: s.evolve(memory="after"))
            else:
                await calls.run(store.append_chat_message, "Stuck", "user", "lost?")
            return "written"
        except ServiceError as exc:
            return exc
        finally:
            finished.append("stuck")

    async def other(i: int) -> None:
        await calls.run(store.append_chat_message, f"Other{i}", "user", "hi")
        await calls.run(store.save, f"Other{i}", AgentMemoryState(memory=f"memory {i}"))
        finished.append("other")

    async def scenario() -> list[object]:
        piled = [asyncio.ensure_future(stuck(i)) for i in range(40)]  # queued on the pool first
        await asyncio.sleep(0)
        others = [asyncio.ensure_future(other(i)) for i in range(10)]
        await asyncio.wait_for(asyncio.gather(*others), timeout=120)  # a generous bound, not a timing
        return await asyncio.wait_for(asyncio.gather(*piled), timeout=120)

    try:
        outcomes = asyncio.run(scenario())
        # Every other save answered before any call of the stuck save had ended (at its lock timeout).
        assert finished[:10] == ["other"] * 10 and finished.count("stuck") == 40
        for outcome in outcomes:
            assert isinstance(outcome, ServiceError), outcome
            assert outcome.code == StatusCode.UNAVAILABLE
            assert "locked by another process" in outcome.message and "nothing was done" in outcome.message
        assert loaded(store.try_load("Stuck")).memory == "before"
        assert store.get_chat_history("Stuck") == []
    finally:
        release(proc)
        calls.close()
    assert [loaded(store.try_load(f"Other{i}")).memory for i in range(10)] == [f"memory {i}" for i in range(10)]
    assert store.mutate("Stuck", lambda s: s.evolve(memory="after")).memory == "after"  # free again


def test_a_busy_but_moving_save_still_takes_every_call(root):
    # Many calls on one healthy save: turned-away calls wait off the pool and all get through.
    store = FileAgentMemoryStore(root, lock_timeout=60)
    calls = BlockingCalls(4)

    def add(s: AgentMemoryState) -> AgentMemoryState:
        return s.evolve(memory=s.memory + "x")

    async def scenario() -> None:
        await asyncio.gather(*(calls.run(store.mutate, "Busy", add) for _ in range(30)),
                             *(calls.run(store.append_chat_message, "Busy", "user", f"m{i}") for i in range(30)))

    try:
        asyncio.run(scenario())
    finally:
        calls.close()
    assert loaded(store.try_load("Busy")).memory == "x" * 30
    assert sorted(m.content for m in store.get_chat_history("Busy")) == sorted(f"m{i}" for i in range(30))


def test_an_admitted_call_is_turned_away_before_it_changes_anything_and_later_locks_wait(root):
    store = FileAgentMemoryStore(root, lock_timeout=30)
    store.save("Stuck", AgentMemoryState(memory="before"))
    proc = hold_lock_in_another_process(store, "Stuck")
    try:
        admission = Admission()
        with admitted(admission), pytest.raises(SaveBusy):
            store.save("Stuck", AgentMemoryState(memory="after"))
        assert admission.saw_other_process and loaded(store.try_load("Stuck")).memory == "before"
        # A read takes no file lock: admitted or not, it answers while the other process holds the save.
        with admitted(Admission()):
            assert loaded(store.try_load("Stuck")).memory == "before"
    finally:
        release(proc)
    # Once a try holds its first lock it may have changed something: its later locks wait, never bounce.
    admission = Admission()
    with admitted(admission):
        store.save("A", AgentMemoryState(memory="a"))
        assert not admission.may_bounce
        holder = threading.Event()
        done = threading.Event()

        def hold_b() -> None:
            with store._keys.locked(file_stem("B")):
                holder.set()
                done.wait(timeout=30)

        t = threading.Thread(target=hold_b)
        t.start()
        holder.wait(timeout=30)
        threading.Timer(0.2, done.set).start()
        store.save("B", AgentMemoryState(memory="b"))  # waits for the other thread instead of SaveBusy
        t.join(timeout=30)
    assert loaded(store.try_load("B")).memory == "b"


def test_threads_started_by_an_admitted_call_wait_as_usual(root):
    # A bulk import runs its writes on threads of its own (in a copy of the call's context).
    import contextvars

    from pyruntime.stores.admission import current

    seen: list[object] = []
    with admitted(Admission()):
        assert current() is not None
        context = contextvars.copy_context()
        t = threading.Thread(target=context.run, args=(lambda: seen.append(current()),))
        t.start()
        t.join(timeout=30)
    assert seen == [None]
