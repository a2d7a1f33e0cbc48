"""The persistent memory store (contract §3.1): memory documents, chat history and transcripts as files.

Layout under `root` (= `<persistentDataPath>/CoreAI`):
`AgentMemory/<stem>.json`, `AgentMemory/<stem>.history.jsonl`, `ConversationSummaries/<stem>.json`,
and the inter-process lock files in `.locks/<folder>/<digest of stem>.lock`, away from the data folders.

The rooms: per-key locks in `key_locks`, the incremental history cache in `history_cache`, history file
writes in `history_file`, the shared order of rows in `order_counter`, trims in `trim_notices`, legacy
formats in `file_legacy`, the summary store in `file_summaries`; this module is the memory store, and the
import path of both file stores. Just over 400 lines as that one job: each public call is a few lines under the
key's locks, and the internals they share (merging session rows, appending, the legacy move) sit below them.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
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
from pyruntime.stores.history_cache import CachedHistory, FileStoreStats
from pyruntime.stores.history_file import HistoryFileWriter
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.in_memory import _checked_entry
from pyruntime.stores.key_locks import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_CACHED_KEYS,
    LOCKS_DIR,
    MAX_WAITERS_PER_KEY,
    STUCK_AFTER_S,
    KeyedFolder,
    KeyState,
    verified_stem,
)
from pyruntime.stores.order_counter import OrderCounter, counter_path, read_counter, write_counter
from pyruntime.stores.save_files import SaveFiles, SaveKind
from pyruntime.stores.trim_notices import TrimEvent, TrimNotices, trim_of_append

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


def _transcript_rows(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """Transcript entries as they are stored: the in-memory store's checks (same refusals, same messages), all rows
    before any is written, timestamps normalized."""
    return [replace(_checked_entry(entry), timestamp=normalize_timestamp(entry.timestamp)) for entry in entries]


def _stamped(rows: Sequence[TranscriptEntry], order: int, now: int) -> list[TranscriptEntry]:
    """rows numbered after order, the unstamped ones timed now: what one append writes."""
    return [replace(row, timestamp=row.timestamp or now, order=order + i) for i, row in enumerate(rows, 1)]


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
        self.stats = FileStoreStats()
        self._history = HistoryFileWriter(self.files, chat_cap, transcript_cap, self.stats)
        self._trims = TrimNotices(on_trim)
        self.identities = identities if identities is not None else IdentityIndex(self.root)
        self._keys = KeyedFolder(self.root, AGENT_MEMORY_DIR, lock_timeout=lock_timeout,
                                  max_cached=max_cached_keys)

    @property
    def rewrite_threshold(self) -> int:
        """Stale rows (outside both windows) a history file may gather before it is rewritten without them."""
        return self._history.rewrite_threshold

    @property
    def cached_keys(self) -> int:
        """How many keys' locks and rows this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        return self._keys.checked_stem(key, self.identities, (MEMORY_SUFFIX, HISTORY_SUFFIX))

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
        with self._locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem, key)
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
        with self._locked(stem) as ks:
            self._migrate_legacy(ks, stem, key)
            self.identities.record(key)
            # Heals an unreadable document; a link or FIFO in its place is replaced, never written through.
            self.files.write(self._memory_file(stem), data, SaveKind.MEMORY, read_previous=True)

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's locks; durable before return."""
        stem = self._stem(key)
        with self._locked(stem) as ks:
            self._migrate_legacy(ks, stem, key)
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
        with self._locked(stem) as ks:
            self._migrate_legacy(ks, stem, key)
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
        self._append(key, stem, [row], persist)

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append transcript rows (tool calls, tool results, ...) in one all-or-nothing write."""
        stem = self._stem(key)
        rows = _transcript_rows(entries)
        if rows:
            if persist:
                self.identities.record(key)
            self._append(key, stem, rows, persist)

    def check_import(self, key: str, state: AgentMemoryState | None, history: Sequence[TranscriptEntry],
                     summary: str | None) -> None:
        """Raise what replacing key's memory and history with these would raise (its id, the file limits), writing
        nothing: an import checks every role this way before it writes the first."""
        verified_stem(key, self.identities)
        if state is not None:
            if not isinstance(state, AgentMemoryState):
                raise InvalidArgumentError("state must be an AgentMemoryState")
            self.files.check_size(len(encode_memory_document(state)), SaveKind.MEMORY)
        rows = _stamped(_transcript_rows(history), 0, _now())  # what `_append` writes after a clear
        if rows:
            mask = retained_mask([r.is_chat_message for r in rows], self.chat_cap, self.transcript_cap)
            kept = [r for r, keep in zip(rows, mask, strict=True) if keep]  # a full file is rewritten to these
            self.files.check_size(len(encode_history_rows(kept)), SaveKind.HISTORY)

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all) of the chat window (persisted_only: no session rows)."""
        stem = self._stem(key)
        limit = self._limit(max_messages, "max_messages")
        chat = [r for r in self._merged_rows(key, stem, persisted_only) if r.is_chat_message][-self.chat_cap :]
        if limit:
            chat = chat[-limit:]
        return [ChatMessage(role=r.name, content=r.content, timestamp=r.timestamp, order=r.order) for r in chat]

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all) of the transcript window (persisted_only: no session rows)."""
        stem = self._stem(key)
        limit = self._limit(max_entries, "max_entries")
        rows = self._merged_rows(key, stem, persisted_only)[-self.transcript_cap :]
        if limit:
            rows = rows[-limit:]
        return rows

    def clear_chat_history(self, key: str) -> None:
        """Delete the history file (and the copies quarantine kept of it) and the unpersisted rows of key, this
        process's and other instances' alike."""
        stem = self._stem(key)
        with self._locked(stem) as ks:
            # Migrating first also empties a legacy conversation still held in <stem>.json.
            self._migrate_legacy(ks, stem, key)
            try:
                known = self._refresh(ks, stem).max_order
            except MemoryUnreadableError:  # a link, FIFO or oversized file in its place: removed all the same
                known = 0
            counter_file = counter_path(ks.lock_path)
            counter = read_counter(counter_file, self.root)
            self.files.remove(self._history_file(stem))
            self.files.remove_kept_aside(stem, HISTORY_SUFFIX)  # copies of its unreadable lines: history too
            # Every session-only row any instance holds has an order up to the counter's: they go too. Orders
            # go on from there, so no order of a cleared row is handed out again.
            last = counter.next_after(known, ks.overlay[-1].order if ks.overlay else 0) - 1
            write_counter(counter_file, self.root, OrderCounter(last, last))
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

    @contextmanager
    def _locked(self, stem: str, *, write: bool = True) -> Iterator[KeyState]:
        """The key's locks (`KeyedFolder.locked`); trim callbacks queued meanwhile run once they are released."""
        try:
            with self._keys.locked(stem, write=write) as ks:
                yield ks
        finally:
            self._trims.deliver()

    def _session_rows(self, ks: KeyState, counter: OrderCounter | None = None) -> list[TranscriptEntry]:
        """This process's unpersisted rows of the key, less those another instance's clear removed."""
        if ks.overlay:
            cleared = (counter or read_counter(counter_path(ks.lock_path), self.root)).cleared
            ks.overlay = [r for r in ks.overlay if r.order > cleared]
        return ks.overlay

    def _merged_rows(self, key: str, stem: str, persisted_only: bool = False) -> list[TranscriptEntry]:
        with self._locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem, key)
            history = self._refresh(ks, stem)
            if persisted_only or not self._session_rows(ks):
                return list(history.rows)
            # Legacy rows (order 0) sort first; orders are unique per key (`order_counter`).
            return list(heapq.merge(history.rows, ks.overlay, key=lambda r: r.order))

    def _append(self, key: str, stem: str, rows: list[TranscriptEntry], persist: bool) -> None:
        with self._locked(stem) as ks:
            self._migrate_legacy(ks, stem, key)
            history = self._refresh(ks, stem)
            counter_file = counter_path(ks.lock_path)
            counter = read_counter(counter_file, self.root)
            session = self._session_rows(ks, counter)
            first = counter.next_after(history.max_order, session[-1].order if session else 0)  # session: by order
            stamped = _stamped(rows, first - 1, _now())
            trim = trim_of_append(key, history.chat_prefix[-1] + sum(r.is_chat_message for r in session),
                                  len(history.rows) + len(session), sum(r.is_chat_message for r in stamped),
                                  len(stamped), self.chat_cap, self.transcript_cap, session_only=not persist)
            if persist:
                self._history.write(ks, self._history_file(stem), history, stamped)
            else:
                # A peer's later persisted row must sort after these: the shared counter hands out their orders.
                write_counter(counter_file, self.root, OrderCounter(stamped[-1].order, counter.cleared))
                ks.overlay = session + stamped
                mask = retained_mask([r.is_chat_message for r in ks.overlay], self.chat_cap, self.transcript_cap)
                ks.overlay = [r for r, keep in zip(ks.overlay, mask, strict=True) if keep]
            if trim is not None:
                self._report_trim(ks, trim)

    def _report_trim(self, ks: KeyState, event: TrimEvent) -> None:
        self.stats.trims += 1
        self._trims.add(event, first_for_key=not ks.trim_logged)
        ks.trim_logged = True

    def history_status(self, key: str) -> HistoryStatus:
        """Unreadable lines in key's history file now, and where this process last kept a damaged one aside."""
        stem = self._stem(key)
        with self._locked(stem, write=False) as ks:
            self._migrate_legacy(ks, stem, key)
            history = self._refresh(ks, stem)
            return HistoryStatus(history.unreadable, ks.quarantined)

    def _refresh(self, ks: KeyState, stem: str) -> CachedHistory:
        """Bring the cached rows up to date with the file (another process may have written it)."""
        ks.history = history_cache.refresh(self.files, self._history_file(stem), ks.history, self.stats)
        return ks.history

    def _migrate_legacy(self, ks: KeyState, stem: str, key: str) -> None:
        """Move a conversation an old `<stem>.json` still carries into the history file, once."""

        def rewrite(ks: KeyState, path: Path, rows: list[TranscriptEntry]) -> None:
            self._history.rewrite(ks, path, rows)
            # Rows of a save kept under larger caps than this store's leave the history here.
            trim = trim_of_append(key, 0, 0, sum(r.is_chat_message for r in rows), len(rows), self.chat_cap,
                                  self.transcript_cap)
            if trim is not None:
                self._report_trim(ks, trim)

        migrate_legacy_conversation(ks, files=self.files, keys=self._keys, memory_file=self._memory_file(stem),
                                    history_file=self._history_file(stem), rewrite=rewrite, stats=self.stats)

