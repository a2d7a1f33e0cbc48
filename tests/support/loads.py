"""What a store's load found, for tests that expect a saved document."""

from __future__ import annotations

from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import LoadResult


def loaded(result: LoadResult) -> AgentMemoryState:
    """The state the load read; fails the test, showing the result, when there is none (not found, or failed)."""
    assert result.state is not None, result
    return result.state
