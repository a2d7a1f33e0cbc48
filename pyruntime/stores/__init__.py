"""Stores of memory documents, chat history, transcripts and summaries (spec section 3)."""

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

__all__ = [
    "AgentMemoryStore",
    "ChatMessage",
    "ConversationSummaryStore",
    "InMemoryAgentMemoryStore",
    "InMemoryConversationSummaryStore",
    "LoadResult",
    "LoadStatus",
    "Mutation",
    "TranscriptEntry",
    "TranscriptKind",
]
