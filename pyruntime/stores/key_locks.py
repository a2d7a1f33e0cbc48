"""Per-key locks of one save folder: an in-process lock and an inter-process file lock per stem.

Every operation on a key runs under that key's in-process lock, and a write also under its
inter-process file lock in `.locks/<folder>/<digest of stem>.lock` (away from the data folders), so
threads and processes sharing a data folder never lose each other's writes. The per-key state (the
locks and the cached rows the store keeps with them) is bounded to the most recently used keys.
"""

from __future__ import annotations

import hashlib
import logging
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from pyruntime.errors import InvalidArgumentError, PersistenceError, StoreLockedError
from pyruntime.stores import confined, fileio
from pyruntime.stores.admission import Admission, SaveBusy
from pyruntime.stores.admission import current as current_admission
from pyruntime.stores.base import TranscriptEntry
from pyruntime.stores.file_layout import file_stem, pre_escape_stem

if TYPE_CHECKING:
    from pyruntime.stores.history_cache import CachedHistory
    from pyruntime.stores.identity_index import IdentityIndex

logger = logging.getLogger(__name__)

LOCKS_DIR = ".locks"
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


def require_key(key: object) -> str:
    """The file stem of key, which must be a string."""
    if not isinstance(key, str):
        raise InvalidArgumentError("key must be a string")
    return file_stem(key)


def verified_stem(key: str, identities: IdentityIndex) -> str:
    """The file stem of key once the identity index agrees it is key's; touches no file (a check before writing)."""
    stem = require_key(key)
    identities.verify(key, stem)
    return stem


@dataclass
class KeyState:
    lock: threading.Lock
    lock_path: Path
    file_lock: FileLock | None = None
    file_held: bool = False
    held_since: float | None = None  # monotonic time the current holder took the in-process lock
    file_waiting: bool = False  # the holder waits for the file lock (another process has it)
    process_held: bool = False  # the last admitted try found the file lock held by another process
    users: int = 0  # calls holding or waiting for this state; evictable at 0
    history: CachedHistory | None = None
    overlay: list[TranscriptEntry] = field(default_factory=list)  # persist=False rows, this process only
    legacy_checked: bool = False
    trim_logged: bool = False  # this key's first trim was logged as a warning; later ones are info lines
    quarantined: str = ""  # where this process last kept an unreadable history aside (relative to root)


class KeyedFolder:
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
        self._states: OrderedDict[str, KeyState] = OrderedDict()
        self._moved: set[str] = set()  # device-named stems whose pre-escape files were looked for
        self._guard = threading.Lock()
        self.lock_timeout = lock_timeout
        self.max_cached = max_cached

    def __len__(self) -> int:
        return len(self._states)

    def _checkout(self, stem: str, admission: Admission | None = None) -> KeyState:
        with self._guard:
            ks = self._states.get(stem)
            if ks is None:
                # filelock logs lock paths at DEBUG; a digest keeps the stem (personal data) out of logs.
                name = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:32]
                ks = KeyState(threading.Lock(), self._lock_folder / f"{name}.lock")
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

    def checked_stem(self, key: str, identities: IdentityIndex, suffixes: Sequence[str]) -> str:
        """The file stem of key, once the identity index agrees it is key's and files saved under its pre-escape
        name moved to it (`move_pre_escape_files`)."""
        stem = verified_stem(key, identities)
        self.move_pre_escape_files(key, stem, suffixes)
        return stem

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

    def remove_lock_file(self, stem: str) -> None:
        """Remove the stem's lock file and what is kept beside it under the same name (its order counter), its save
        being erased for good. Named by a hash of the stem, they would still say the save existed. Removed right
        after the locks are released (Windows cannot remove an open file); a process that takes the lock at that
        instant keeps the removed file's (a deletion is a rare, final act)."""
        with self.locked(stem) as ks:
            prefix = ks.lock_path.stem + "."
        try:
            with confined.open_folder(self._lock_folder, self._root) as folder:
                for name in folder.names():
                    if name.startswith(prefix):
                        try:
                            folder.unlink(name)
                        except OSError as exc:
                            logger.warning("a lock file of an erased save could not be removed (%s)",
                                           type(exc).__name__)
        except FileNotFoundError:
            pass
        with self._guard:
            state = self._states.get(stem)
            if state is not None and state.users == 0:
                del self._states[stem]

    @staticmethod
    def _release(ks: KeyState) -> None:
        """Give up what a holder took: the file lock if it had it, then the in-process lock."""
        ks.held_since = None
        if ks.file_held:
            ks.file_held = False
            ks.file_lock.release()  # type: ignore[union-attr]
        ks.lock.release()

    def _checkin(self, ks: KeyState) -> None:
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

    def _turn_away(self, admission: Admission, ks: KeyState) -> None:
        """Raise SaveBusy (wait off the pool and try again), or the clear error once the wait is over."""
        if ks.process_held or ks.file_waiting:
            admission.saw_other_process = True
        if time.monotonic() < admission.deadline(self.lock_timeout):
            raise SaveBusy("the save is busy")
        if admission.saw_other_process:
            raise self._locked_by_another_process()
        raise StoreLockedError(
            f"the save is busy: other calls kept it for {self.lock_timeout:g} s; nothing was done, try again later")

    def _file_lock(self, ks: KeyState) -> FileLock:
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

    def acquire_file(self, ks: KeyState, deadline: float) -> None:
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

    def _try_file(self, ks: KeyState, admission: Admission) -> None:
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
    def locked(self, stem: str, *, write: bool = True) -> Iterator[KeyState]:
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
    def _admitted(self, stem: str, write: bool, admission: Admission) -> Iterator[KeyState]:
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

