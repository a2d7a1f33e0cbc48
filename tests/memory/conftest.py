"""Fixtures of the memory-core tests: a real in-memory store, a fixed clock, a tool on one key."""

from __future__ import annotations

import pytest

from pyruntime.memory import MemoryTool
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore

KEY = "Creator"
NOW = 1_700_000_000.75  # a float on purpose: Timestamp must be int seconds


class StepClock:
    """A clock that advances one second per call, so every version gets a distinct, known timestamp."""

    def __init__(self, start: float = NOW) -> None:
        self.now = start

    def __call__(self) -> float:
        value = self.now
        self.now += 1
        return value


@pytest.fixture
def store() -> InMemoryAgentMemoryStore:
    return InMemoryAgentMemoryStore()


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def tool(store: InMemoryAgentMemoryStore, clock: StepClock) -> MemoryTool:
    return MemoryTool(store, KEY, clock=clock)
