"""Stores of memory documents, chat history, transcripts and summaries (contract §3)."""

from __future__ import annotations

from pyruntime.stores.base import (
    AgentMemoryStore,
    ChatMessage,
    ConversationSummaryStore,
    LoadResult,
    LoadStatus,
    Mutation,
    TranscriptEntry,
    TranscriptKind,
)
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore
from pyruntime.stores.null import NullAgentMemoryStore, NullConversationSummaryStore
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.stores.snapshot import (
    RoleSnapshot,
    ScopeSnapshot,
    export_scope_snapshot,
    import_scope_snapshot,
    validate_scope_snapshot,
)

__all__ = [
    "AgentMemoryPersistenceMode",
    "AgentMemoryStore",
    "ChatMessage",
    "ConversationSummaryStore",
    "InMemoryAgentMemoryStore",
    "InMemoryConversationSummaryStore",
    "LoadResult",
    "LoadStatus",
    "Mutation",
    "NullAgentMemoryStore",
    "NullConversationSummaryStore",
    "RoleSnapshot",
    "ScopeSnapshot",
    "ScopedAgentMemoryStore",
    "StoreBundle",
    "TranscriptEntry",
    "TranscriptKind",
    "export_scope_snapshot",
    "import_scope_snapshot",
    "open_stores",
    "validate_scope_snapshot",
]
