"""Session-only stores: memory, chat history, transcripts and summaries kept in this process (contract §3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import ChatMessage, LoadResult, Mutation, TranscriptEntry, TranscriptKind, chat_row
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.trim_notices import TrimEvent, TrimNotices, trim_of_append

T = TypeVar("T")

DEFAULT_CHAT_CAP = 500
DEFAULT_TRANSCRIPT_CAP = 2000


def require_key(key: str) -> str:
    """The key itself; a blank key is an error, so nothing is ever stored under it."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidArgumentError("key is required and must not be blank")
    return key


def window(items: Sequence[T], newest: int) -> list[T]:
    """The newest `newest` items, oldest first (0 or less = all)."""
    return list(items[-newest:]) if newest > 0 else list(items)


def as_chat_message(row: TranscriptEntry) -> ChatMessage:
    """The chat-window view of a transcript row flagged as a chat message."""
    return ChatMessage(role=row.name, content=row.content, timestamp=row.timestamp, order=row.order)


@dataclass
class _KeyData:
    state: AgentMemoryState | None = None
    rows: list[TranscriptEntry] = field(default_factory=list)
    chat_rows: int = 0
    last_order: int = 0
    volatile: set[int] = field(default_factory=set)  # orders of rows appended with persist=False
    trim_logged: bool = False  # this key's first trim was logged as a warning; later ones are info lines

    def chat_window(self, cap: int, persisted_only: bool) -> list[ChatMessage]:
        """The newest `cap` chat messages (persisted_only: without the persist=False rows)."""
        chat = [as_chat_message(r) for r in self.rows
                if r.is_chat_message and not (persisted_only and r.order in self.volatile)]
        return window(chat, cap)

    def transcript_window(self, cap: int, persisted_only: bool) -> list[TranscriptEntry]:
        """The transcript's newest `cap` rows (persisted_only: then without the persist=False rows)."""
        rows = window(self.rows, cap)
        return [r for r in rows if r.order not in self.volatile] if persisted_only else rows


class _KeyLocks:
    """One lock per key while some call uses it, so work on different keys never waits on each other.

    A lock lives only while a call holds or waits for it (reference counted), so the table never
    grows with the number of players ever seen.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list[Any]] = {}  # key -> [RLock, users]

    def __len__(self) -> int:
        return len(self._locks)

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            entry = self._locks.get(key)
            if entry is None:
                entry = self._locks[key] = [threading.RLock(), 0]
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]


class InMemoryAgentMemoryStore:
    """AgentMemoryStore that keeps everything in process memory; nothing survives the process."""

    def __init__(self, *, chat_cap: int = DEFAULT_CHAT_CAP, transcript_cap: int = DEFAULT_TRANSCRIPT_CAP,
                 clock: Callable[[], float] = time.time, identities: IdentityIndex | None = None,
                 on_trim: Callable[[TrimEvent], None] | None = None) -> None:
        if chat_cap < 1 or transcript_cap < 1:
            raise InvalidArgumentError("chat_cap and transcript_cap must be positive")
        self.chat_cap: Final = chat_cap
        """Chat messages kept per key."""
        self.transcript_cap: Final = transcript_cap
        """Transcript rows kept per key."""
        self._trims = TrimNotices(on_trim)
        self._clock = clock
        self.identities = identities if identities is not None else IdentityIndex(None)
        self._locks = _KeyLocks()
        self._guard = threading.Lock()
        self._data: dict[str, _KeyData] = {}

    def _entry(self, key: str) -> _KeyData:
        with self._guard:
            return self._data.setdefault(key, _KeyData())

    def _peek(self, key: str) -> _KeyData | None:
        with self._guard:
            return self._data.get(key)

    # -- memory document -------------------------------------------------

    def try_load(self, key: str) -> LoadResult:
        """Loaded | NotFound (an in-memory document is never unreadable)."""
        require_key(key)
        with self._locks.hold(key):
            data = self._peek(key)
            if data is None or data.state is None:
                return LoadResult.not_found()
            return LoadResult.loaded(data.state)

    def save(self, key: str, state: AgentMemoryState) -> None:
        """Replace the state of key."""
        require_key(key)
        _require_state(state)
        with self._locks.hold(key):
            self.identities.record(key)
            self._entry(key).state = state

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's lock; fn returning None changes nothing."""
        require_key(key)
        with self._locks.hold(key):
            data = self._peek(key)
            current = data.state if data is not None and data.state is not None else AgentMemoryState()
            updated = fn(current)
            if updated is None:
                return current
            _require_state(updated)
            self.identities.record(key)
            self._entry(key).state = updated
            return updated

    def clear(self, key: str) -> None:
        """Delete the memory document and its versions; chat history stays."""
        require_key(key)
        with self._locks.hold(key):
            data = self._peek(key)
            if data is not None:
                data.state = None

    # -- chat history and transcript --------------------------------------

    def append_chat_message(self, key: str, role: str, content: str, persist: bool = True) -> None:
        """Append one chat message (a transcript row flagged as chat); persist=False rows are never exported."""
        require_key(key)
        row = chat_row(role, content)
        with self._locks.hold(key):
            self.identities.record(key)
            self._append_rows(key, self._entry(key), [row], persist)
        self._trims.deliver()  # trim callbacks run once the key is unlocked

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all) of the chat window.

        persisted_only: without the persist=False rows.
        """
        return self._newest(key, max_messages, "max_messages",
                            lambda data: data.chat_window(self.chat_cap, persisted_only))

    def clear_chat_history(self, key: str) -> None:
        """Delete chat history and transcript of key; memory stays."""
        require_key(key)
        with self._locks.hold(key):
            data = self._peek(key)
            if data is not None:
                data.rows = []
                data.chat_rows = 0
                data.volatile = set()

    def remove_leftovers(self, key: str) -> None:
        """After the key's data was erased for good: its identity goes too."""
        self.identities.forget(key)

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append rows; each gets the next order, and the current time unless it carries a timestamp."""
        require_key(key)
        rows = [_checked_entry(row) for row in entries]  # all rows are checked before any is appended
        with self._locks.hold(key):
            self.identities.record(key)
            self._append_rows(key, self._entry(key), rows, persist)
        self._trims.deliver()

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all) of the transcript window.

        persisted_only: without the persist=False rows.
        """
        return self._newest(key, max_entries, "max_entries",
                            lambda data: data.transcript_window(self.transcript_cap, persisted_only))

    def _newest(self, key: str, limit: int, limit_name: str, read: Callable[[_KeyData], list[T]]) -> list[T]:
        """The newest `limit` (0 = all) of what `read` takes from the key's data under its lock ([] without data)."""
        require_key(key)
        _require_limit(limit, limit_name)
        with self._locks.hold(key):
            data = self._peek(key)
            items = read(data) if data is not None else []
        return window(items, limit)

    def _append_rows(self, key: str, data: _KeyData, rows: list[TranscriptEntry], persist: bool = True) -> None:
        trim = trim_of_append(key, data.chat_rows, len(data.rows), sum(r.is_chat_message for r in rows), len(rows),
                              self.chat_cap, self.transcript_cap, session_only=not persist)
        if trim is not None:
            self._trims.add(trim, first_for_key=not data.trim_logged)
            data.trim_logged = True
        now = int(self._clock())
        for row in rows:
            data.last_order += 1
            data.rows.append(replace(row, order=data.last_order, timestamp=row.timestamp or now))
            data.chat_rows += row.is_chat_message
            if not persist:
                # Session-only mode keeps every row in memory, but persist=False rows are still never exported.
                data.volatile.add(data.last_order)
        # Compact only once the slack is large, so appends stay amortised O(1).
        if len(data.rows) > 2 * (self.transcript_cap + self.chat_cap):
            self._trim(data)

    def _trim(self, data: _KeyData) -> None:
        # A row goes only when it has left both windows (newest transcript_cap rows, newest chat_cap chats).
        first_in_transcript = len(data.rows) - self.transcript_cap
        chats_to_skip = data.chat_rows - self.chat_cap
        kept: list[TranscriptEntry] = []
        for index, row in enumerate(data.rows):
            in_chat = False
            if row.is_chat_message:
                in_chat = chats_to_skip <= 0
                chats_to_skip -= 1
            if index >= first_in_transcript or in_chat:
                kept.append(row)
        data.rows = kept
        data.chat_rows = sum(r.is_chat_message for r in kept)
        data.volatile = {r.order for r in kept if r.order in data.volatile}


class InMemoryConversationSummaryStore:
    """ConversationSummaryStore kept in process memory."""

    def __init__(self, *, identities: IdentityIndex | None = None) -> None:
        self._lock = threading.Lock()
        self._summaries: dict[str, str] = {}
        self._volatile: set[str] = set()  # keys whose summary was saved with persist=False
        self.identities = identities if identities is not None else IdentityIndex(None)

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """The stored summary, None if there is none (persisted_only: not a persist=False one)."""
        require_key(key)
        with self._lock:
            if persisted_only and key in self._volatile:
                return None
            return self._summaries.get(key)

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Replace the summary of key (persist=False: like session-only chat, never exported)."""
        require_key(key)
        if not isinstance(summary, str):
            raise InvalidArgumentError("summary must be a string")
        if persist:
            self.identities.record(key)
        with self._lock:
            self._summaries[key] = summary
            if persist:
                self._volatile.discard(key)
            else:
                self._volatile.add(key)

    def clear_summary(self, key: str) -> None:
        """Delete the summary of key."""
        require_key(key)
        with self._lock:
            self._summaries.pop(key, None)
            self._volatile.discard(key)


def _require_state(state: object) -> None:
    if not isinstance(state, AgentMemoryState):
        raise InvalidArgumentError("state must be an AgentMemoryState")


def _require_limit(value: object, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative integer (0 = all)")


def _checked_entry(row: object) -> TranscriptEntry:
    if not isinstance(row, TranscriptEntry):
        raise InvalidArgumentError("entries must be TranscriptEntry objects")
    if not isinstance(row.content, str) or not isinstance(row.name, str):
        raise InvalidArgumentError("a transcript entry needs a string name and content")
    if isinstance(row.kind, bool) or row.kind not in TranscriptKind._value2member_map_:
        raise InvalidArgumentError("a transcript entry kind must be 0-3 (user, assistant, tool call, tool result)")
    return replace(row, kind=TranscriptKind(row.kind), call_id=row.call_id or None)
