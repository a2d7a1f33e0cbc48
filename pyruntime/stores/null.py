"""Stores that keep nothing: for roles or hosts that must not remember (contract §3)."""

from __future__ import annotations

from collections.abc import Sequence

from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import ChatMessage, LoadResult, Mutation, TranscriptEntry
from pyruntime.stores.in_memory import require_key


class NullAgentMemoryStore:
    """AgentMemoryStore that saves nothing: loads find nothing, writes vanish."""

    def try_load(self, key: str) -> LoadResult:
        """Always NotFound."""
        require_key(key)
        return LoadResult.not_found()

    def save(self, key: str, state: AgentMemoryState) -> None:
        """Discards the state."""
        require_key(key)

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Applies fn to a fresh state and returns the result without keeping it."""
        require_key(key)
        fresh = AgentMemoryState()
        updated = fn(fresh)
        return fresh if updated is None else updated

    def clear(self, key: str) -> None:
        """Nothing to delete."""
        require_key(key)

    def append_chat_message(self, key: str, role: str, content: str, persist: bool = True) -> None:
        """Discards the message."""
        require_key(key)

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Always empty."""
        require_key(key)
        return []

    def clear_chat_history(self, key: str) -> None:
        """Nothing to delete."""
        require_key(key)

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Discards the rows."""
        require_key(key)

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Always empty."""
        require_key(key)
        return []


class NullConversationSummaryStore:
    """ConversationSummaryStore that saves nothing."""

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """Always None."""
        require_key(key)
        return None

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Discards the summary."""
        require_key(key)

    def clear_summary(self, key: str) -> None:
        """Nothing to delete."""
        require_key(key)
