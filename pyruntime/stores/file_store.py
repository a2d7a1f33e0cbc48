"""The persistent memory store (contract §3.1): memory documents, chat history and transcripts as files.

Layout under `root` (= `<persistentDataPath>/CoreAI`):
`AgentMemory/<stem>.json`, `AgentMemory/<stem>.history.jsonl`, `ConversationSummaries/<stem>.json`,
and the inter-process lock files in `.locks/<folder>/<digest of stem>.lock`, away from the data folders.

The rooms: per-key locks in `key_locks`, the incremental history cache in `history_cache`, legacy formats
in `file_legacy`, the summary store in `file_summaries`; this module is the memory store, and the import
path of both file stores.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores import confined, history_cache
from pyruntime.stores.base import (
    ChatMessage,
    HistoryStatus,
    LoadResult,
    Mutation,
    TranscriptEntry,
    TranscriptKind,
    chat_row,
)
from pyruntime.stores.confined import DEFAULT_LIMITS, SaveLimits
from pyruntime.stores.file_layout import (
    AGENT_MEMORY_DIR,
    HISTORY_SUFFIX,
    MEMORY_SUFFIX,
    DocumentError,
    decode_memory_document,
    encode_history_rows,
    encode_memory_document,
    file_stem,
    normalize_timestamp,
    retained_mask,
)
from pyruntime.stores.file_legacy import migrate_legacy_conversation
from pyruntime.stores.file_summaries import FileConversationSummaryStore
from pyruntime.stores.history_cache import TAIL_BYTES, CachedHistory, FileStoreStats, TrimEvent, signature
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.key_locks import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_CACHED_KEYS,
    LOCKS_DIR,
    MAX_WAITERS_PER_KEY,
    STUCK_AFTER_S,
    KeyedFolder,
    KeyState,
    require_key,
)
from pyruntime.stores.save_files import QUARANTINE_DIR, SaveFiles, SaveKind

__all__ = [
    "DEFAULT_CHAT_CAP",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MAX_CACHED_KEYS",
    "DEFAULT_TRANSCRIPT_CAP",
    "LOCKS_DIR",
    "MAX_WAITERS_PER_KEY",
    "STUCK_AFTER_S",
    "FileAgentMemoryStore",
    "FileConversationSummaryStore",
    "FileStoreStats",
    "TrimEvent",
]

logger = logging.getLogger(__name__)

DEFAULT_CHAT_CAP = 500
DEFAULT_TRANSCRIPT_CAP = 2000


def _now() -> int:
    return int(time.time())


class FileAgentMemoryStore:
    """Memory documents, chat history and transcripts as files under `root/AgentMemory/`."""

    def __init__(
        self,
        root: Path,
        *,
        chat_cap: int = DEFAULT_CHAT_CAP,
        transcript_cap: int = DEFAULT_TRANSCRIPT_CAP,
        on_trim: Callable[[TrimEvent], None] | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        max_cached_keys: int = DEFAULT_MAX_CACHED_KEYS,
        identities: IdentityIndex | None = None,
        limits: SaveLimits = DEFAULT_LIMITS,
    ) -> None:
        if chat_cap < 1 or transcript_cap < 1:
            raise InvalidArgumentError("chat_cap and transcript_cap must be at least 1")
        self.root = Path(root)
        self.files = SaveFiles(self.root, limits)
        self.chat_cap = chat_cap
        self.transcript_cap = transcript_cap
        self.rewrite_threshold = max(16, transcript_cap // 8)
        self.on_trim = on_trim
        self.stats = FileStoreStats()
        self.identities = identities if identities is not None else IdentityIndex(self.root)
        self._keys = KeyedFolder(self.root, AGENT_MEMORY_DIR, lock_timeout=lock_timeout,
                                  max_cached=max_cached_keys)

    @property
    def cached_keys(self) -> int:
        """How many keys' locks and rows this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        stem = require_key(key)
        self.identities.verify(key, stem)
        self._keys.move_pre_escape_files(key, stem, (MEMORY_SUFFIX, HISTORY_SUFFIX))
        return stem

    @property
    def folder(self) -> Path:
        """`root/AgentMemory`."""
        return self._keys.folder

    def memory_path(self, key: str) -> Path:
        """`AgentMemory/<stem>.json` of key."""
        return self.folder / (file_stem(key) + MEMORY_SUFFIX)

    def history_path(self, key: str) -> Path:
        """`AgentMemory/<stem>.history.jsonl` of key."""
        return self.folder / (file_stem(key) + HISTORY_SUFFIX)

    # --- memory document ----------------------------------------------------------------------

    def try_load(self, key: str) -> LoadResult:
        """Loaded | NotFound | Failed(reason)."""
        stem = self._stem(key)
        with self._keys.locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem)
            try:
                data = self.files.read(self._memory_file(stem), SaveKind.MEMORY)
            except MemoryUnreadableError as exc:
                return LoadResult.failed(str(exc))
            if data is None:
                return LoadResult.not_found()
            try:
                return LoadResult.loaded(decode_memory_document(data).state)
            except DocumentError as exc:
                return LoadResult.failed(str(exc))

    def save(self, key: str, state: AgentMemoryState) -> None:
        """Replace the state of key (heals an unreadable document)."""
        stem = self._stem(key)
        if not isinstance(state, AgentMemoryState):
            raise InvalidArgumentError("state must be an AgentMemoryState")
        data = encode_memory_document(state)
        self.files.check_size(len(data), SaveKind.MEMORY)
        with self._keys.locked(stem) as ks:
            self._migrate_legacy(ks, stem)
            self.identities.record(key)
            # Heals an unreadable document; a link or FIFO in its place is replaced, never written through.
            self.files.write(self._memory_file(stem), data, SaveKind.MEMORY, read_previous=True)

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's locks; durable before return."""
        stem = self._stem(key)
        with self._keys.locked(stem) as ks:
            self._migrate_legacy(ks, stem)
            data = self.files.read(self._memory_file(stem), SaveKind.MEMORY)
            if data is None:
                current = AgentMemoryState()
            else:
                try:
                    current = decode_memory_document(data).state
                except DocumentError as exc:
                    raise MemoryUnreadableError(f"the memory document cannot be read: {exc}") from None
            changed = fn(current)
            if changed is None:
                return current
            if not isinstance(changed, AgentMemoryState):
                raise InvalidArgumentError("a mutation must return an AgentMemoryState or None")
            encoded = encode_memory_document(changed)
            self.files.check_size(len(encoded), SaveKind.MEMORY)
            self.identities.record(key)
            self.files.write(self._memory_file(stem), encoded, SaveKind.MEMORY, previous=data)
            return changed

    def clear(self, key: str) -> None:
        """Delete the memory document, its versions and snapshot; chat history stays."""
        stem = self._stem(key)
        with self._keys.locked(stem) as ks:
            self._migrate_legacy(ks, stem)
            path = self._memory_file(stem)
            try:
                data = self.files.read(path, SaveKind.MEMORY)
            except confined.UnsafeSaveError as exc:
                if not exc.removable:
                    raise
                data = b""
                logger.warning("Removing a memory document that cannot be read (%s)", exc)
            else:
                if data is None:
                    return
                try:
                    decode_memory_document(data)
                except DocumentError:
                    logger.warning("Removing an unreadable memory document (%d bytes)", len(data))
            self.files.remove(path)

    # --- chat history and transcript ----------------------------------------------------------

    def append_chat_message(self, key: str, role: str, content: str, persist: bool = True) -> None:
        """Append one chat message (one line; `<stem>.json` untouched); persist=False keeps it in this process."""
        stem = self._stem(key)
        row = chat_row(role, content)
        if persist:
            self.identities.record(key)
        self._append(stem, [row], persist)

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append transcript rows (tool calls, tool results, ...) in one all-or-nothing write."""
        stem = self._stem(key)
        rows = []
        for entry in entries:
            if not isinstance(entry, TranscriptEntry):
                raise InvalidArgumentError("entries must be TranscriptEntry objects")
            if not isinstance(entry.content, str) or not isinstance(entry.name, str):
                raise InvalidArgumentError("a transcript entry needs a string name and content")
            if entry.kind not in TranscriptKind._value2member_map_:
                raise InvalidArgumentError(
                    "a transcript entry kind must be 0-3 (user, assistant, tool call, tool result)")
            rows.append(
                TranscriptEntry(
                    kind=TranscriptKind(entry.kind),
                    name=entry.name,
                    content=entry.content,
                    call_id=entry.call_id or None,
                    timestamp=normalize_timestamp(entry.timestamp),
                    is_chat_message=entry.is_chat_message,
                )
            )
        if rows:
            if persist:
                self.identities.record(key)
            self._append(stem, rows, persist)

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all) of the chat window (persisted_only: no session rows)."""
        stem = self._stem(key)
        limit = self._limit(max_messages, "max_messages")
        chat = [r for r in self._merged_rows(stem, persisted_only) if r.is_chat_message][-self.chat_cap :]
        if limit:
            chat = chat[-limit:]
        return [ChatMessage(role=r.name, content=r.content, timestamp=r.timestamp, order=r.order) for r in chat]

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all) of the transcript window (persisted_only: no session rows)."""
        stem = self._stem(key)
        limit = self._limit(max_entries, "max_entries")
        rows = self._merged_rows(stem, persisted_only)[-self.transcript_cap :]
        if limit:
            rows = rows[-limit:]
        return rows

    def clear_chat_history(self, key: str) -> None:
        """Delete the history file (and the copies quarantine kept of it) and this process's unpersisted rows of key;
        memory stays."""
        stem = self._stem(key)
        with self._keys.locked(stem) as ks:
            # Migrating first also empties a legacy conversation still held in <stem>.json.
            self._migrate_legacy(ks, stem)
            self.files.remove(self._history_file(stem))
            self.files.remove_kept_aside(stem, HISTORY_SUFFIX)  # copies of its unreadable lines: history too
            ks.overlay = []
            ks.history = CachedHistory()
            ks.quarantined = ""

    def remove_leftovers(self, key: str) -> None:
        """After the key's data was erased for good: its lock file and identity index entry go too."""
        stem = self._stem(key)
        self._keys.remove_lock_file(stem)
        self.identities.forget(key)

    # --- internals ----------------------------------------------------------------------------

    def _memory_file(self, stem: str) -> Path:
        return self.folder / (stem + MEMORY_SUFFIX)

    def _history_file(self, stem: str) -> Path:
        return self.folder / (stem + HISTORY_SUFFIX)

    @staticmethod
    def _limit(value: int, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name} must be a non-negative integer (0 = all)")
        return value

    def _merged_rows(self, stem: str, persisted_only: bool = False) -> list[TranscriptEntry]:
        with self._keys.locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem)
            history = self._refresh(ks, stem)
            if not ks.overlay or persisted_only:
                return list(history.rows)
            # Legacy rows (order 0) sort first; equal orders keep persisted rows first.
            return list(heapq.merge(history.rows, ks.overlay, key=lambda r: r.order))

    def _append(self, stem: str, rows: list[TranscriptEntry], persist: bool) -> None:
        with self._keys.locked(stem) as ks:
            self._migrate_legacy(ks, stem)
            history = self._refresh(ks, stem)
            order = max(history.max_order, max((r.order for r in ks.overlay), default=0))
            now = _now()
            stamped = []
            for row in rows:
                order += 1
                stamped.append(
                    TranscriptEntry(
                        kind=row.kind,
                        name=row.name,
                        content=row.content,
                        call_id=row.call_id,
                        timestamp=row.timestamp or now,
                        order=order,
                        is_chat_message=row.is_chat_message,
                    )
                )
            if not persist:
                ks.overlay.extend(stamped)
                mask = retained_mask([r.is_chat_message for r in ks.overlay], self.chat_cap, self.transcript_cap)
                ks.overlay = [r for r, keep in zip(ks.overlay, mask, strict=True) if keep]
                return
            path = self._history_file(stem)
            stale = history.stale_after(stamped, self.chat_cap, self.transcript_cap)
            data = encode_history_rows(stamped)
            full = history.size + len(data) > self.files.limits.history  # a rewrite drops stale rows first
            if history.dirty or stale >= self.rewrite_threshold or full:
                self._rewrite(ks, path, history.rows + stamped)
                return
            st = self.files.append(path, data, SaveKind.HISTORY)
            history.extend(stamped)
            history.size = st.st_size
            history.signature = signature(st)
            history.tail = (history.tail + data)[-TAIL_BYTES:]
            self.stats.history_appends += 1

    def _rewrite(self, ks: KeyState, path: Path, rows: list[TranscriptEntry]) -> None:
        """Atomically replace the history file with rows, less those outside both windows."""
        mask = retained_mask([r.is_chat_message for r in rows], self.chat_cap, self.transcript_cap)
        kept = [r for r, keep in zip(rows, mask, strict=True) if keep]
        data = encode_history_rows(kept)
        self.files.check_size(len(data), SaveKind.HISTORY)
        if ks.history is not None and ks.history.unreadable:
            self._keep_aside(ks, path)
        self.files.write(path, data, SaveKind.HISTORY, read_previous=True)
        history = CachedHistory()
        history.extend(kept)
        st = os.stat(path, follow_symlinks=False)
        history.size = st.st_size
        history.signature = signature(st)
        history.tail = data[-TAIL_BYTES:]
        ks.history = history
        self.stats.history_rewrites += 1
        if len(kept) < len(rows):
            event = TrimEvent(len(rows), len(kept), self.chat_cap, self.transcript_cap)
            self.stats.trims += 1
            self.stats.rows_dropped += event.dropped
            logger.warning(
                "History trimmed: %d row(s) outside both windows dropped, %d kept (chat cap %d, transcript cap %d)",
                event.dropped,
                event.rows_after,
                self.chat_cap,
                self.transcript_cap,
            )
            if self.on_trim is not None:
                self.on_trim(event)

    def _keep_aside(self, ks: KeyState, path: Path) -> None:
        """Copy the history file, unreadable lines and all, to Quarantine/ before it is rewritten."""
        data = self.files.read(path, SaveKind.HISTORY)
        if data:
            ks.quarantined = self.files.keep_aside(path, data, HISTORY_SUFFIX)
            logger.warning("History file with %d unreadable line(s) kept aside in %s/ before its readable rows "
                           "were rewritten", ks.history.unreadable if ks.history else 0, QUARANTINE_DIR)

    def history_status(self, key: str) -> HistoryStatus:
        """Unreadable lines in key's history file now, and where this process last kept a damaged one aside."""
        stem = self._stem(key)
        with self._keys.locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem)
            history = self._refresh(ks, stem)
            return HistoryStatus(history.unreadable, ks.quarantined)

    def _refresh(self, ks: KeyState, stem: str) -> CachedHistory:
        """Bring the cached rows up to date with the file (another process may have written it)."""
        ks.history = history_cache.refresh(self.files, self._history_file(stem), ks.history, self.stats)
        return ks.history

    def _migrate_legacy(self, ks: KeyState, stem: str) -> None:
        """Move a conversation an old `<stem>.json` still carries into the history file, once."""
        migrate_legacy_conversation(ks, files=self.files, keys=self._keys, memory_file=self._memory_file(stem),
                                    history_file=self._history_file(stem), rewrite=self._rewrite, stats=self.stats)

