"""The scoped decorator every caller goes through: (role, scope, actor) -> one storage key (contract §3-§4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import ANONYMOUS_ACTOR, EMPTY_SCOPE, AgentMemoryScope, normalize_role_id, storage_key
from pyruntime.stores.base import (
    AgentMemoryStore,
    ChatMessage,
    ConversationSummaryStore,
    HistoryStatus,
    LoadResult,
    Mutation,
    TranscriptEntry,
)
from pyruntime.stores.identity_index import Identity, IdentityIndex


class ScopedAgentMemoryStore:
    """Memory, chat, transcript and summary of one scope (and actor), addressed by role id."""

    def __init__(
        self,
        store: AgentMemoryStore,
        summaries: ConversationSummaryStore,
        scope: AgentMemoryScope = EMPTY_SCOPE,
        actor: str | None = None,
    ) -> None:
        self.store: Final = store
        """The underlying key-addressed store."""
        self.summaries: Final = summaries
        """The underlying key-addressed summary store."""
        self.scope: Final = scope or EMPTY_SCOPE
        """The scope every key of this view is derived from."""
        self.actor: Final = actor
        """The named actor of this view (None or `local` = no actor)."""
        self._keys: dict[str, str] = {}  # role id -> storage key, for this view's scope and actor

    def with_scope(self, scope: AgentMemoryScope, actor: str | None = None) -> ScopedAgentMemoryStore:
        """The same stores seen through another scope and actor."""
        return ScopedAgentMemoryStore(self.store, self.summaries, scope, actor)

    def key(self, role_id: str) -> str:
        """The storage key of role_id in this scope; a blank role is an InvalidArgumentError.

        The key's identity is noted in the stores' identity index (when they keep one) the first time this view
        derives it, and again before every write (`_key_to_write`), so the store can record it on its first write
        and an export can find the save again. A turn asks for its key a dozen times, most of them on the event
        loop while worker threads write: noting each time made them queue on the index's lock.
        """
        key = self._keys.get(role_id)
        if key is None:
            key = storage_key(role_id, self.scope, self.actor)
            self._note(key, role_id)
            self._keys[role_id] = key
        return key

    def _key_to_write(self, role_id: str) -> str:
        """`key`, its identity noted again: the index keeps the newest notes, and a write records its key's."""
        key = self.key(role_id)
        self._note(key, role_id)
        return key

    def _note(self, key: str, role_id: str) -> None:
        identity: Identity | None = None
        for store in (self.store, self.summaries):
            index = getattr(store, "identities", None)
            if isinstance(index, IdentityIndex):
                if identity is None:
                    actor = (self.actor or "").strip()
                    identity = Identity(normalize_role_id(role_id), self.scope,
                                        actor if actor and actor != ANONYMOUS_ACTOR else None)
                index.note(key, identity)

    # -- memory document -------------------------------------------------

    def try_load(self, role_id: str) -> LoadResult:
        """Loaded | NotFound | Failed(reason)."""
        return self.store.try_load(self.key(role_id))

    def save(self, role_id: str, state: AgentMemoryState) -> None:
        """Replace the role's state."""
        self.store.save(self._key_to_write(role_id), state)

    def mutate(self, role_id: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write of the role's state."""
        return self.store.mutate(self._key_to_write(role_id), fn)

    def clear(self, role_id: str) -> None:
        """Delete the role's memory document and versions; chat history stays."""
        self.store.clear(self._key_to_write(role_id))

    # -- chat history and transcript --------------------------------------

    def append_chat_message(self, role_id: str, role: str, content: str, persist: bool = True) -> None:
        """Append one chat message to the role's history."""
        self.store.append_chat_message(self._key_to_write(role_id), role, content, persist)

    def get_chat_history(self, role_id: str, max_messages: int = 0, *,
                         persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all); persisted_only leaves out persist=False rows."""
        return self.store.get_chat_history(self.key(role_id), max_messages, persisted_only=persisted_only)

    def clear_chat_history(self, role_id: str) -> None:
        """Delete the role's chat history, transcript and rolling summary; memory stays."""
        key = self._key_to_write(role_id)
        self.store.clear_chat_history(key)
        self.summaries.clear_summary(key)

    def append_transcript(self, role_id: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append transcript rows to the role's history."""
        self.store.append_transcript(self._key_to_write(role_id), entries, persist)

    def get_transcript(self, role_id: str, max_entries: int = 0, *,
                       persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all); persisted_only leaves out persist=False rows."""
        return self.store.get_transcript(self.key(role_id), max_entries, persisted_only=persisted_only)

    def history_status(self, role_id: str) -> HistoryStatus:
        """Unreadable lines of the role's history file and where a damaged one was kept (no files: clean)."""
        status = getattr(self.store, "history_status", None)
        return status(self.key(role_id)) if callable(status) else HistoryStatus()

    # -- rolling summary --------------------------------------------------

    def load_summary(self, role_id: str, *, persisted_only: bool = False) -> str | None:
        """The role's rolling summary, None if there is none (persisted_only: not a session-only one)."""
        return self.summaries.load_summary(self.key(role_id), persisted_only=persisted_only)

    def save_summary(self, role_id: str, summary: str, persist: bool = True) -> None:
        """Replace the role's rolling summary (persist=False, for session-only chat: this process only)."""
        self.summaries.save_summary(self._key_to_write(role_id), summary, persist=persist)

    def clear_summary(self, role_id: str) -> None:
        """Delete the role's rolling summary."""
        self.summaries.clear_summary(self._key_to_write(role_id))
