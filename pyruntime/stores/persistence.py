"""Persistence modes: file or PostgreSQL stores (Persistent) or process memory only (SessionOnly) (contract §3)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores.base import AgentMemoryStore, ConversationSummaryStore
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.in_memory import (
    DEFAULT_CHAT_CAP,
    DEFAULT_TRANSCRIPT_CAP,
    InMemoryAgentMemoryStore,
    InMemoryConversationSummaryStore,
)
from pyruntime.stores.scoped import ScopedAgentMemoryStore

DATA_FOLDER = "CoreAI"


class AgentMemoryPersistenceMode(enum.Enum):
    """Where memory, chat, transcripts and summaries live."""

    PERSISTENT = "persistent"
    SESSION_ONLY = "session_only"


@dataclass
class StoreBundle:
    """The memory store and summary store of one runtime, opened in one persistence mode."""

    memory: AgentMemoryStore
    summaries: ConversationSummaryStore
    mode: AgentMemoryPersistenceMode

    def scoped(self, scope: AgentMemoryScope = EMPTY_SCOPE, actor: str | None = None) -> ScopedAgentMemoryStore:
        """The decorator view of these stores for one scope and actor."""
        return ScopedAgentMemoryStore(self.memory, self.summaries, scope, actor)

    def close(self) -> None:
        """Release what the stores hold open (a database pool); file and memory stores hold nothing."""
        close = getattr(self.memory, "close", None)
        if callable(close):
            close()


def open_stores(
    mode: AgentMemoryPersistenceMode,
    data_dir: Path | None,
    *,
    chat_cap: int = DEFAULT_CHAT_CAP,
    transcript_cap: int = DEFAULT_TRANSCRIPT_CAP,
    lock_timeout: float | None = None,
    database_url: str | None = None,
) -> StoreBundle:
    """Stores for mode: file stores under `data_dir/CoreAI` (the game's persistentDataPath), or memory only.

    database_url (`postgresql://…`, PERSISTENT only): the PostgreSQL stores instead of files (headless servers).
    """
    if not isinstance(mode, AgentMemoryPersistenceMode):
        raise InvalidArgumentError("mode must be an AgentMemoryPersistenceMode")
    if mode is AgentMemoryPersistenceMode.SESSION_ONLY:
        # Session only touches no disk at all, not even data_dir.
        index = IdentityIndex(None)
        return StoreBundle(
            InMemoryAgentMemoryStore(chat_cap=chat_cap, transcript_cap=transcript_cap, identities=index),
            InMemoryConversationSummaryStore(identities=index),
            mode,
        )
    if database_url is not None:
        from pyruntime.stores.postgres import DEFAULT_LOCK_TIMEOUT as PG_LOCK_TIMEOUT
        from pyruntime.stores.postgres import open_postgres_stores

        memory, summaries = open_postgres_stores(
            database_url, chat_cap=chat_cap, transcript_cap=transcript_cap,
            lock_timeout=PG_LOCK_TIMEOUT if lock_timeout is None else lock_timeout)
        return StoreBundle(memory, summaries, mode)
    if data_dir is None:
        raise InvalidArgumentError("data_dir (the game's persistentDataPath) is required for PERSISTENT mode")
    # Imported here so this module works in hosts (and tests) that never open file stores.
    from pyruntime.stores.file_store import DEFAULT_LOCK_TIMEOUT, FileAgentMemoryStore, FileConversationSummaryStore

    root = Path(data_dir) / DATA_FOLDER
    index = IdentityIndex(root)
    timeout = DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout
    return StoreBundle(
        FileAgentMemoryStore(root, chat_cap=chat_cap, transcript_cap=transcript_cap, identities=index,
                             lock_timeout=timeout),
        FileConversationSummaryStore(root, identities=index, lock_timeout=timeout),
        mode,
    )
