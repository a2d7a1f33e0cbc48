"""CoreAI's `AgentMemoryConcurrencyEditModeTests`, ported: concurrent writers of one memory document lose nothing.

CoreAI starts 32 tasks on one store; here 32 threads (released together) write through one file store, and then
through two store instances on the same folder (what two processes do), and a fresh store reads the result.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pyruntime.memory import MemoryTool
from pyruntime.memory.state import AgentMemoryState
from tests.seed.conftest import ROLE, StoreFactory, loaded_memory

WRITERS = 32
WAIT_S = 60.0


def _together(count: int, work) -> None:
    """Run work(i) for i in range(count) on count threads released at once."""
    start = threading.Barrier(count)

    def run(i: int) -> None:
        start.wait(WAIT_S)
        work(i)

    with ThreadPoolExecutor(count) as pool:
        for done in [pool.submit(run, i) for i in range(count)]:
            done.result(WAIT_S)


def _lines(store_factory: StoreFactory) -> list[str]:
    return sorted(line.strip() for line in loaded_memory(store_factory()).memory.split("\n") if line.strip())


@pytest.mark.parametrize("instances", [1, 2])
def test_file_store_mutate_async_concurrent_appends_all_lines_survive(new_store, instances):
    """Ports AgentMemoryConcurrencyEditModeTests.FileStore_MutateAsync_ConcurrentAppends_AllLinesSurvive."""
    stores = [new_store() for _ in range(instances)]

    def append(i: int) -> None:
        line = f"fact_{i:02d}"

        def add(state: AgentMemoryState) -> AgentMemoryState:
            return state.evolve(memory=f"{state.memory}\n{line}" if state.memory else line)

        stores[i % instances].mutate(ROLE, add)

    _together(WRITERS, append)
    assert _lines(new_store) == [f"fact_{i:02d}" for i in range(WRITERS)]


@pytest.mark.parametrize("instances", [1, 2])
def test_memory_tool_concurrent_append_calls_all_lines_survive(new_store, instances):
    """Ports AgentMemoryConcurrencyEditModeTests.MemoryTool_ConcurrentAppendCalls_AllLinesSurvive."""
    tools = [MemoryTool(new_store(), ROLE) for _ in range(instances)]
    results = []

    def append(i: int) -> None:
        results.append(tools[i % instances].execute({"action": "append", "content": f"tool_fact_{i:02d}"}))

    _together(WRITERS, append)
    assert all(r.success for r in results) and len(results) == WRITERS
    assert _lines(new_store) == [f"tool_fact_{i:02d}" for i in range(WRITERS)]
    assert len(loaded_memory(new_store()).versions) == min(WRITERS, 30)  # one version per append, newest 30 kept
