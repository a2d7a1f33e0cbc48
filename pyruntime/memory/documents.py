"""What the memory tool needs of a store: read one key's document, and change it atomically (contract §3).

The stores (`pyruntime.stores`) implement it; the memory package names only this, so its arrows point down: the
stores build on the memory's types, never the other way round.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pyruntime.memory.state import AgentMemoryState

Mutation = Callable[[AgentMemoryState], "AgentMemoryState | None"]
"""A read-modify-write: the new state, or None to leave the document as it is."""


class LoadStatus(enum.Enum):
    """Outcome of `try_load`."""

    LOADED = "loaded"
    NOT_FOUND = "not_found"
    FAILED = "failed"


@dataclass(frozen=True)
class LoadResult:
    """Loaded (with state), NotFound, or Failed (with a reason that names no key or content)."""

    status: LoadStatus
    state: AgentMemoryState | None = None
    reason: str | None = None

    @classmethod
    def loaded(cls, state: AgentMemoryState) -> LoadResult:
        """A document that exists and was read."""
        return cls(LoadStatus.LOADED, state)

    @classmethod
    def not_found(cls) -> LoadResult:
        """No document for this key."""
        return cls(LoadStatus.NOT_FOUND)

    @classmethod
    def failed(cls, reason: str) -> LoadResult:
        """A document exists but cannot be read."""
        return cls(LoadStatus.FAILED, reason=reason)


class MemoryDocuments(Protocol):
    """The memory documents of storage keys, as the memory tool reads and changes them."""

    def try_load(self, key: str) -> LoadResult:
        """Loaded | NotFound | Failed(reason)."""
        ...

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's lock; durable before return.

        Returns the state after the call (unchanged when fn returned None).
        Raises MemoryUnreadableError when the document exists but cannot be read.
        """
        ...
