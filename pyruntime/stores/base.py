"""The store contract shared by the memory tool, chat history, transcripts and summaries (contract §3).

Stores are keyed by storage keys (see `pyruntime.scopes.storage_key`); callers reach them
through `ScopedAgentMemoryStore`, which turns (role, scope, actor) into the key.
Every method is thread-safe; mutations are durable before they return. The memory tool's part of it (a
document's load result, a mutation) is the memory package's own (`pyruntime/memory/documents.py`), named here too.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.documents import LoadResult as LoadResult
from pyruntime.memory.documents import LoadStatus as LoadStatus
from pyruntime.memory.documents import Mutation as Mutation
from pyruntime.memory.state import AgentMemoryState


class TranscriptKind(enum.IntEnum):
    """The `k` field of a history row."""

    USER = 0
    ASSISTANT = 1
    TOOL_CALL = 2
    TOOL_RESULT = 3


@dataclass(frozen=True)
class TranscriptEntry:
    """One row of a key's transcript; chat messages are rows with `is_chat_message`."""

    kind: TranscriptKind
    name: str  # chat role, or tool name
    content: str
    call_id: str | None = None
    timestamp: int = 0  # Unix seconds, UTC
    order: int = 0  # monotonic per key; 0 for legacy rows
    is_chat_message: bool = False


@dataclass(frozen=True)
class ChatMessage:
    """One message of the chat history window."""

    role: str
    content: str
    timestamp: int = 0
    order: int = 0


@dataclass(frozen=True)
class HistoryStatus:
    """Whether a save's chat history file had unreadable lines (file stores; the others are always clean)."""

    unreadable_lines: int = 0
    """Lines of the history file that cannot be read now: left out of every answer, never dropped from disk."""
    quarantine_file: str = ""
    """Where this process kept a damaged history file aside before rewriting its readable rows (relative to
    the data folder, e.g. `Quarantine/Teacher.20250101T120000Z.history.jsonl`); "" when it has not."""


def chat_kind(role: str) -> TranscriptKind:
    """A chat message whose role is not `assistant` is a user row (contract §3.1)."""
    return TranscriptKind.ASSISTANT if role.strip().lower() == "assistant" else TranscriptKind.USER


def chat_row(role: object, content: object) -> TranscriptEntry:
    """The transcript row of one chat message, as every store's `append_chat_message` checks and writes it."""
    if not isinstance(role, str) or not role.strip():
        raise InvalidArgumentError("role is required and must not be blank")
    if not isinstance(content, str):
        raise InvalidArgumentError("content must be a string")
    return TranscriptEntry(kind=chat_kind(role), name=role, content=content, is_chat_message=True)


"""Receives the current state (a fresh one when none exists); returns the new state, or None for no change."""


@runtime_checkable
class AgentMemoryStore(Protocol):
    """Memory documents, chat history and transcripts of storage keys."""

    def try_load(self, key: str) -> LoadResult:
        """Loaded | NotFound | Failed(reason)."""
        ...

    def save(self, key: str, state: AgentMemoryState) -> None:
        """Replace the state of key (heals an unreadable document)."""
        ...

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's lock; durable before return.

        Returns the state after the call (unchanged when fn returned None).
        Raises MemoryUnreadableError when the document exists but cannot be read.
        """
        ...

    def clear(self, key: str) -> None:
        """Delete the memory document, its versions and snapshot; chat history stays."""
        ...

    def append_chat_message(self, key: str, role: str, content: str, persist: bool = True) -> None:
        """Append one chat message; persist=False keeps it in this process only."""
        ...

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all); persisted_only leaves out persist=False rows."""
        ...

    def clear_chat_history(self, key: str) -> None:
        """Delete chat history and transcript of key (the scoped decorator also clears the summary)."""
        ...

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append transcript rows (tool calls, tool results, ...)."""
        ...

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all); persisted_only leaves out persist=False rows."""
        ...


class SessionSummaries:
    """Summaries of session-only chat (saved with persist=False): this process only, never written or exported.

    Kept like the rows they summarise, which exist nowhere else (never evicted). A persisted save or a
    clear drops the key's entry: the persisted summary is the newer one.
    """

    def __init__(self) -> None:
        """None yet."""
        self._summaries: dict[str, str] = {}
        self._guard = threading.Lock()

    def get(self, key: str) -> str | None:
        """The session-only summary of key, None if there is none."""
        with self._guard:
            return self._summaries.get(key)

    def put(self, key: str, summary: str) -> None:
        """Keep summary as key's session-only summary."""
        with self._guard:
            self._summaries[key] = summary

    def discard(self, key: str) -> None:
        """Forget key's session-only summary, if any."""
        with self._guard:
            self._summaries.pop(key, None)


@runtime_checkable
class ConversationSummaryStore(Protocol):
    """The rolling summary of each key."""

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """The stored summary, None if there is none (persisted_only: not a persist=False one)."""
        ...

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Replace the summary of key (durable before return; persist=False: this process only)."""
        ...

    def clear_summary(self, key: str) -> None:
        """Delete the summary of key."""
        ...


@runtime_checkable
class ChecksImports(Protocol):
    """A store that can refuse an identity's imported data before anything is written (the file stores: their
    file limits and the id's index). An import asks every role first, so a refusal writes no role at all."""

    def check_import(self, key: str, state: AgentMemoryState | None, history: Sequence[TranscriptEntry],
                     summary: str | None) -> None:
        """Raise what writing these for key would raise; write nothing."""
        ...
