"""The persistent file stores (contract §3.1): memory documents, chat history/transcripts, summaries.

Layout under `root` (= `<persistentDataPath>/CoreAI`):
`AgentMemory/<stem>.json`, `AgentMemory/<stem>.history.jsonl`, `ConversationSummaries/<stem>.json`,
and the inter-process lock files in `.locks/<folder>/<digest of stem>.lock`, away from the data folders.

Every operation on a key runs under that key's in-process lock and its inter-process file lock,
so threads and processes sharing a data folder never lose each other's writes. The persisted
rows of a key are cached in-process; before each operation a `stat` tells whether another process
changed the file, and only the bytes it appended are read.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from pyruntime.errors import (
    InvalidArgumentError,
    MemoryUnreadableError,
    PersistenceError,
    StoreLockedError,
)
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores import confined, fileio
from pyruntime.stores.admission import Admission, SaveBusy
from pyruntime.stores.admission import current as current_admission
from pyruntime.stores.base import (
    ChatMessage,
    HistoryStatus,
    LoadResult,
    Mutation,
    SessionSummaries,
    TranscriptEntry,
    TranscriptKind,
    chat_row,
)
from pyruntime.stores.confined import DEFAULT_LIMITS, SaveLimits
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.save_files import QUARANTINE_DIR, SaveFiles, SaveKind
from pyruntime.stores.file_layout import (
    AGENT_MEMORY_DIR,
    SUMMARIES_DIR,
    HISTORY_SUFFIX,
    MEMORY_SUFFIX,
    DocumentError,
    decode_memory_document,
    decode_summary,
    encode_history_rows,
    encode_memory_document,
    encode_summary,
    file_stem,
    legacy_conversation_rows,
    normalize_timestamp,
    parse_history,
    pre_escape_stem,
    retained_mask,
)

logger = logging.getLogger(__name__)

LOCKS_DIR = ".locks"
DEFAULT_CHAT_CAP = 500
DEFAULT_TRANSCRIPT_CAP = 2000
_TAIL_BYTES = 64  # bytes compared to make sure a grown file is still the file we cached


@dataclass(frozen=True)
class TrimEvent:
    """A history file was rewritten without the rows that had left both windows."""

    rows_before: int
    rows_after: int
    chat_cap: int
    transcript_cap: int

    @property
    def dropped(self) -> int:
        """Rows removed from the file."""
        return self.rows_before - self.rows_after


@dataclass
class FileStoreStats:
    """Counters of what the store did (for tests, diagnostics and benchmarks)."""

    history_appends: int = 0
    history_rewrites: int = 0
    trims: int = 0
    rows_dropped: int = 0
    skipped_lines: int = 0
    legacy_migrations: int = 0


def _now() -> int:
    return int(time.time())


def _require_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidArgumentError("key must be a string")
    return file_stem(key)


def _signature(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class _History:
    """The persisted rows of one key as last read, and how the file looked then."""

    rows: list[TranscriptEntry] = field(default_factory=list)
    chat_prefix: list[int] = field(default_factory=lambda: [0])  # chat rows among rows[:i]
    signature: tuple[int, int, int] | None = None
    size: int = 0
    tail: bytes = b""
    dirty: bool = False  # unreadable lines or a torn tail: rewrite clean on the next write
    unreadable: int = 0  # unreadable lines in the file: it is kept aside before that rewrite
    max_order: int = 0

    def extend(self, rows: Sequence[TranscriptEntry]) -> None:
        """Add rows read from or appended to the file."""
        for row in rows:
            self.rows.append(row)
            self.chat_prefix.append(self.chat_prefix[-1] + row.is_chat_message)
            self.max_order = max(self.max_order, row.order)

    def stale_after(self, new: Sequence[TranscriptEntry], chat_cap: int, transcript_cap: int) -> int:
        """Rows outside both windows once new is appended; O(len(new))."""
        n = len(self.rows) + len(new)
        n_chat = self.chat_prefix[-1] + sum(r.is_chat_message for r in new)
        cut = max(0, n - transcript_cap)
        if cut <= len(self.rows):
            chat_before_cut = self.chat_prefix[cut]
        else:
            chat_before_cut = self.chat_prefix[-1] + sum(r.is_chat_message for r in new[: cut - len(self.rows)])
        chat_out = max(0, n_chat - chat_cap)
        return cut - max(0, chat_before_cut - chat_out)


DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds a call waits for a save's lock before failing with StoreLockedError (only that save's call)."""
MAX_WAITERS_PER_KEY = 6
"""Calls that may wait for one save's lock once its holder looks stuck (has held it over STUCK_AFTER_S);
more fail at once, so one stuck save (a paused process holding its file lock) can never take every
worker thread from the other saves. Busy but moving saves queue without this cap."""
STUCK_AFTER_S = 0.5  # a healthy holder keeps a save for milliseconds (one fsynced write)
_WAITER_POLL_S = 0.02  # how often an admitted waiter checks whether it should give its worker back
DEFAULT_MAX_CACHED_KEYS = 1024
"""Per-key state (locks, cached history rows) kept for this many recently used saves, per folder."""


@dataclass
class _KeyState:
    lock: threading.Lock
    lock_path: Path
    file_lock: FileLock | None = None
    file_held: bool = False
    held_since: float | None = None  # monotonic time the current holder took the in-process lock
    file_waiting: bool = False  # the holder waits for the file lock (another process has it)
    process_held: bool = False  # the last admitted try found the file lock held by another process
    users: int = 0  # calls holding or waiting for this state; evictable at 0
    history: _History | None = None
    overlay: list[TranscriptEntry] = field(default_factory=list)  # persist=False rows, this process only
    legacy_checked: bool = False
    quarantined: str = ""  # where this process last kept an unreadable history aside (relative to root)


class _KeyedFolder:
    """Per-stem in-process and inter-process locks for one data folder, with a bounded per-stem cache.

    Writes hold both locks; reads hold only the in-process one (every write replaces files atomically
    or appends whole lines, so a read never sees half a write) and so create no lock file. State of
    the least recently used stems is dropped past `max_cached`, except for session-only rows: a stem
    with unpersisted rows is kept, since those rows exist nowhere else.
    """

    def __init__(self, root: Path, folder: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 max_cached: int = DEFAULT_MAX_CACHED_KEYS) -> None:
        if lock_timeout <= 0 or max_cached < 1:
            raise InvalidArgumentError("lock_timeout must be positive and max_cached at least 1")
        self.folder = root / folder
        self._root = root
        self._lock_folder = root / LOCKS_DIR / folder
        self._states: OrderedDict[str, _KeyState] = OrderedDict()
        self._moved: set[str] = set()  # device-named stems whose pre-escape files were looked for
        self._guard = threading.Lock()
        self.lock_timeout = lock_timeout
        self.max_cached = max_cached

    def __len__(self) -> int:
        return len(self._states)

    def _checkout(self, stem: str, admission: Admission | None = None) -> _KeyState:
        with self._guard:
            ks = self._states.get(stem)
            if ks is None:
                # filelock logs lock paths at DEBUG; a digest keeps the stem (personal data) out of logs.
                name = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:32]
                ks = _KeyState(threading.Lock(), self._lock_folder / f"{name}.lock")
                self._states[stem] = ks
                self._evict()
            else:
                self._states.move_to_end(stem)
            if admission is not None and (ks.users >= 2 or (ks.users >= 1 and ks.file_waiting)):
                # Admitted: one holder and one waiter per save at most; the rest wait off the pool.
                self._turn_away(admission, ks)
            held = ks.held_since
            stuck = held is not None and time.monotonic() - held > min(STUCK_AFTER_S, self.lock_timeout / 2)
            if stuck and ks.users > MAX_WAITERS_PER_KEY:
                raise StoreLockedError(
                    f"the save is busy: {ks.users} calls already hold or wait for its lock; try again later")
            ks.users += 1
            return ks

    def move_pre_escape_files(self, key: str, stem: str, suffixes: Sequence[str]) -> None:
        """Move the files a device-named key (`CON`) was saved under before the escape to its stem, once."""
        old = pre_escape_stem(key)
        if old is None or old == stem or stem in self._moved:
            return
        if any(confined.is_regular(self.folder / (old + s), self._root) for s in suffixes):
            with self.locked(stem) as ks:
                for suffix in suffixes:
                    if (confined.is_regular(self.folder / (old + suffix), self._root)
                            and confined.entry(self.folder / (stem + suffix), self._root) is None):
                        fileio.rename_within(self.folder, old + suffix, stem + suffix, root=self._root)
                        logger.info("Moved a save with a Windows device name to its escaped name")
                ks.history = None  # read again from its new name
        with self._guard:
            self._moved.add(stem)

    @staticmethod
    def _release(ks: _KeyState) -> None:
        """Give up what a holder took: the file lock if it had it, then the in-process lock."""
        ks.held_since = None
        if ks.file_held:
            ks.file_held = False
            ks.file_lock.release()  # type: ignore[union-attr]
        ks.lock.release()

    def _checkin(self, ks: _KeyState) -> None:
        with self._guard:
            ks.users -= 1
            self._evict()

    def _evict(self) -> None:
        excess = len(self._states) - self.max_cached
        if excess <= 0:
            return
        victims = []
        for stem, ks in self._states.items():  # least recently used first
            if ks.users == 0 and not ks.overlay:
                victims.append(stem)
                if len(victims) == excess:
                    break
        for stem in victims:
            del self._states[stem]

    def _locked_by_another_process(self) -> StoreLockedError:
        return StoreLockedError(
            f"the save is locked by another process (waited {self.lock_timeout:g} s); nothing was done, "
            "try again once that process lets go of it")

    def _turn_away(self, admission: Admission, ks: _KeyState) -> None:
        """Raise SaveBusy (wait off the pool and try again), or the clear error once the wait is over."""
        if ks.process_held or ks.file_waiting:
            admission.saw_other_process = True
        if time.monotonic() < admission.deadline(self.lock_timeout):
            raise SaveBusy("the save is busy")
        if admission.saw_other_process:
            raise self._locked_by_another_process()
        raise StoreLockedError(
            f"the save is busy: other calls kept it for {self.lock_timeout:g} s; nothing was done, try again later")

    def _file_lock(self, ks: _KeyState) -> FileLock:
        if ks.file_lock is None:
            fileio.check_path(ks.lock_path)
            try:
                with confined.open_folder(self._lock_folder, self._root, create=True) as folder:
                    entry = folder.lstat(ks.lock_path.name)  # filelock opens it itself: no link, no FIFO
            except OSError as exc:
                raise PersistenceError(f"could not create the lock folder ({exc.strerror})") from exc
            if entry is not None and not stat.S_ISREG(entry.st_mode):
                raise confined.refuse("save's lock file", entry)
            ks.file_lock = FileLock(ks.lock_path, thread_local=False)
        return ks.file_lock

    def acquire_file(self, ks: _KeyState, deadline: float) -> None:
        """Take the stem's inter-process lock (the caller holds its in-process lock)."""
        if ks.file_held:
            return
        lock = self._file_lock(ks)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            ks.file_waiting = True  # admitted calls for this save now wait off the pool
            try:
                lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
            except Timeout:
                raise self._locked_by_another_process() from None
            finally:
                ks.file_waiting = False
        ks.file_held = True

    def _try_file(self, ks: _KeyState, admission: Admission) -> None:
        """Take the stem's inter-process lock without waiting, or turn the admitted call away."""
        if ks.file_held:
            return
        try:
            self._file_lock(ks).acquire(timeout=0)
        except Timeout:
            ks.process_held = True
            self._turn_away(admission, ks)
        ks.process_held = False
        ks.file_held = True

    @contextmanager
    def locked(self, stem: str, *, write: bool = True) -> Iterator[_KeyState]:
        """Hold the stem's in-process lock, and its file lock for a write, waiting at most lock_timeout.

        Under an admission (`pyruntime.stores.admission`) the call's first lock is taken without
        waiting on a busy save: the call is turned away (SaveBusy) to wait off the worker pool.
        """
        admission = current_admission()
        if admission is not None and admission.may_bounce:
            with self._admitted(stem, write, admission) as ks:
                yield ks
            return
        deadline = time.monotonic() + self.lock_timeout
        ks = self._checkout(stem)
        try:
            if not ks.lock.acquire(timeout=self.lock_timeout):
                raise StoreLockedError(
                    f"the save is busy: another call has held it for over {self.lock_timeout:g} s "
                    "(it waits for a lock held by another process); nothing was done")
            ks.held_since = time.monotonic()
            try:
                if write:
                    self.acquire_file(ks, deadline)
                yield ks
            finally:
                self._release(ks)
        finally:
            self._checkin(ks)

    @contextmanager
    def _admitted(self, stem: str, write: bool, admission: Admission) -> Iterator[_KeyState]:
        ks = self._checkout(stem, admission)
        try:
            # The one waiter a save may have: it waits while the holder works, not while it is stuck.
            while not ks.lock.acquire(timeout=_WAITER_POLL_S):
                if ks.file_waiting or time.monotonic() >= admission.deadline(self.lock_timeout):
                    self._turn_away(admission, ks)
            ks.held_since = time.monotonic()
            try:
                if write:
                    self._try_file(ks, admission)
                admission.may_bounce = False  # from here on the call may have changed something
                yield ks
            finally:
                self._release(ks)
        finally:
            self._checkin(ks)


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
        self._keys = _KeyedFolder(self.root, AGENT_MEMORY_DIR, lock_timeout=lock_timeout,
                                  max_cached=max_cached_keys)

    @property
    def cached_keys(self) -> int:
        """How many keys' locks and rows this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        stem = _require_key(key)
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
                raise InvalidArgumentError("a transcript entry kind must be 0-3 (user, assistant, tool call, tool result)")
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
        """Oldest first, the newest max_messages (0 = all) of the chat window (persisted_only: without persist=False rows)."""
        stem = self._stem(key)
        limit = self._limit(max_messages, "max_messages")
        chat = [r for r in self._merged_rows(stem, persisted_only) if r.is_chat_message][-self.chat_cap :]
        if limit:
            chat = chat[-limit:]
        return [ChatMessage(role=r.name, content=r.content, timestamp=r.timestamp, order=r.order) for r in chat]

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all) of the transcript window (persisted_only: without persist=False rows)."""
        stem = self._stem(key)
        limit = self._limit(max_entries, "max_entries")
        rows = self._merged_rows(stem, persisted_only)[-self.transcript_cap :]
        if limit:
            rows = rows[-limit:]
        return rows

    def clear_chat_history(self, key: str) -> None:
        """Delete the history file and this process's unpersisted rows of key; memory stays."""
        stem = self._stem(key)
        with self._keys.locked(stem) as ks:
            # Migrating first also empties a legacy conversation still held in <stem>.json.
            self._migrate_legacy(ks, stem)
            self.files.remove(self._history_file(stem))
            ks.overlay = []
            ks.history = _History()
            ks.quarantined = ""

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
                ks.overlay = [r for r, keep in zip(ks.overlay, mask) if keep]
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
            history.signature = _signature(st)
            history.tail = (history.tail + data)[-_TAIL_BYTES:]
            self.stats.history_appends += 1

    def _rewrite(self, ks: _KeyState, path: Path, rows: list[TranscriptEntry]) -> None:
        """Atomically replace the history file with rows, less those outside both windows."""
        mask = retained_mask([r.is_chat_message for r in rows], self.chat_cap, self.transcript_cap)
        kept = [r for r, keep in zip(rows, mask) if keep]
        data = encode_history_rows(kept)
        self.files.check_size(len(data), SaveKind.HISTORY)
        if ks.history is not None and ks.history.unreadable:
            self._keep_aside(ks, path)
        self.files.write(path, data, SaveKind.HISTORY, read_previous=True)
        history = _History()
        history.extend(kept)
        st = os.stat(path, follow_symlinks=False)
        history.size = st.st_size
        history.signature = _signature(st)
        history.tail = data[-_TAIL_BYTES:]
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

    def _keep_aside(self, ks: _KeyState, path: Path) -> None:
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

    def _refresh(self, ks: _KeyState, stem: str) -> _History:
        """Bring the cached rows up to date with the file (another process may have written it)."""
        with self.files.opened(self._history_file(stem), SaveKind.HISTORY) as opened:
            if opened is None:
                ks.history = _History()
                return ks.history
            fd, st = opened
            cached = ks.history
            if cached is not None and cached.signature == _signature(st):
                return cached
            if (
                cached is not None
                and not cached.dirty
                and cached.signature is not None
                and cached.signature[0] == st.st_ino
                and st.st_size > cached.size
            ):
                start = cached.size - len(cached.tail)
                os.lseek(fd, start, os.SEEK_SET)
                chunk = self.files.read_from(fd, SaveKind.HISTORY, start)
                if chunk.startswith(cached.tail):
                    self._absorb(cached, chunk[len(cached.tail) :], start + len(chunk), chunk)
                    cached.signature = _signature(os.fstat(fd))
                    return cached
            os.lseek(fd, 0, os.SEEK_SET)
            data = self.files.read_from(fd, SaveKind.HISTORY)
            history = _History()
            self._absorb(history, data, len(data), data)
            history.signature = _signature(os.fstat(fd))
            ks.history = history
            return history

    def _absorb(self, history: _History, new_bytes: bytes, size: int, window: bytes) -> None:
        parsed = parse_history(new_bytes)
        history.extend(parsed.rows)
        history.size = size
        history.tail = window[-_TAIL_BYTES:]
        if parsed.skipped:
            self.stats.skipped_lines += parsed.skipped
            history.unreadable += parsed.skipped
            logger.warning(
                "History file: skipped %d unreadable line(s); on the next write the file is kept aside in %s/ "
                "and its readable rows are rewritten", parsed.skipped, QUARANTINE_DIR,
            )
        if parsed.skipped or parsed.torn_tail:
            history.dirty = True

    def _migrate_legacy(self, ks: _KeyState, stem: str) -> None:
        """Move a conversation an old `<stem>.json` still carries into the history file, once."""
        if ks.legacy_checked:
            return
        path = self._memory_file(stem)
        try:
            data = self.files.read(path, SaveKind.MEMORY)
        except MemoryUnreadableError:
            return  # a folder, link or FIFO in its place: the caller reports it; checked again on the next touch
        if data is None:
            ks.legacy_checked = True
            return
        try:
            document = decode_memory_document(data)
        except DocumentError:
            return  # unreadable: try_load reports it; checked again on the next touch
        if not document.has_legacy_conversation:
            ks.legacy_checked = True
            return
        if not ks.file_held:
            # A read found a legacy document: migrating writes, so take the file lock and look again.
            self._keys.acquire_file(ks, time.monotonic() + self._keys.lock_timeout)
            self._migrate_legacy(ks, stem)
            return
        try:
            legacy = legacy_conversation_rows(document)
        except DocumentError as exc:
            logger.warning("Legacy conversation in a memory document is unreadable and was not migrated: %s", exc)
            legacy = []
        history = self._refresh(ks, stem)
        # A crash between the two writes below leaves the rows already at the head: add them once.
        if legacy and history.rows[: len(legacy)] != legacy:
            self._rewrite(ks, self._history_file(stem), legacy + history.rows)
        self.files.write(path, encode_memory_document(document.state), SaveKind.MEMORY, previous=data)
        ks.legacy_checked = True
        self.stats.legacy_migrations += 1
        logger.info("Migrated %d legacy conversation row(s) into a history file", len(legacy))


class FileConversationSummaryStore:
    """Rolling summaries as `root/ConversationSummaries/<stem>.json` = `{"Summary":"..."}`."""

    def __init__(self, root: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 max_cached_keys: int = DEFAULT_MAX_CACHED_KEYS, identities: IdentityIndex | None = None,
                 limits: SaveLimits = DEFAULT_LIMITS) -> None:
        self.root = Path(root)
        self.files = SaveFiles(self.root, limits)
        self.identities = identities if identities is not None else IdentityIndex(self.root)
        self._keys = _KeyedFolder(self.root, SUMMARIES_DIR, lock_timeout=lock_timeout, max_cached=max_cached_keys)
        self._session = SessionSummaries()

    @property
    def cached_keys(self) -> int:
        """How many keys' locks this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        stem = _require_key(key)
        self.identities.verify(key, stem)
        self._keys.move_pre_escape_files(key, stem, (MEMORY_SUFFIX,))
        return stem

    def summary_path(self, key: str) -> Path:
        """`ConversationSummaries/<stem>.json` of key."""
        return self._keys.folder / (file_stem(key) + MEMORY_SUFFIX)

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """The stored summary, None if there is none; an unreadable one is MemoryUnreadableError (never "none").

        A summary saved with persist=False (of session-only chat) comes first; persisted_only skips it.
        """
        stem = self._stem(key)
        if not persisted_only and (session := self._session.get(key)) is not None:
            return session
        with self._keys.locked(stem, write=False):
            data = self.files.read(self._keys.folder / (stem + MEMORY_SUFFIX), SaveKind.SUMMARY)
        if data is None:
            return None
        try:
            return decode_summary(data)
        except DocumentError as exc:
            raise MemoryUnreadableError(f"the conversation summary cannot be read: {exc}") from None

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Replace the summary of key (durable before return).

        persist=False (the summary of session-only chat) keeps it in this process only: no file is
        written, and it is never exported, like the chat it summarises.
        """
        stem = self._stem(key)
        if not isinstance(summary, str):
            raise InvalidArgumentError("summary must be a string")
        if not persist:
            self._session.put(key, summary)
            return
        data = encode_summary(summary)
        self.files.check_size(len(data), SaveKind.SUMMARY)
        self.identities.record(key)
        with self._keys.locked(stem):
            self.files.write(self._keys.folder / (stem + MEMORY_SUFFIX), data, SaveKind.SUMMARY, read_previous=True)
            self._session.discard(key)  # the persisted summary is the newer one

    def clear_summary(self, key: str) -> None:
        """Delete the summary of key (its file and a session-only one)."""
        stem = self._stem(key)
        with self._keys.locked(stem):
            self._session.discard(key)
            self.files.remove(self._keys.folder / (stem + MEMORY_SUFFIX))
