"""Durable file primitives: atomic replace, all-or-nothing append, delete; each fsynced.

Every failure is raised as `PersistenceError` and leaves the file as it was. Paths only, no
content, would appear in OS error messages, so messages here say what failed, never which file.

Windows: a rename over, or a delete of, a file that another handle has open (a reader in another
process, an antivirus scan) fails with PermissionError for as long as that handle is open, so
renames and deletes retry PermissionError a few times with backoff (~0.6 s in all) before failing;
no file is deleted or renamed while this process still has it open; and a path beyond MAX_PATH is
refused up front with a clear error (`file_layout.check_windows_path_length`).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pyruntime.errors import MemoryUnreadableError, PersistenceError
from pyruntime.stores.file_layout import check_windows_path_length

# Filesystems (and platforms) that cannot fsync a directory answer with one of these.
_DIR_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EACCES, errno.EISDIR}


class _DirSyncBatch:
    """Folders whose directory fsync is owed at the end of a batch (shared by the batch's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.folders: set[Path] = set()


_BATCH: contextvars.ContextVar[_DirSyncBatch | None] = contextvars.ContextVar("coreai_dir_sync_batch", default=None)


@contextlib.contextmanager
def batched_directory_sync() -> Iterator[None]:
    """Within the block, each folder's fsync is done once at its end instead of after every rename.

    Every file is still fsynced before it is renamed into place, so a crash leaves each file old or
    new, never torn; only which renames survive a crash is settled at the end. Used by bulk imports
    (thousands of files). Threads started for the batch must run in a copy of this context.
    """
    batch = _DirSyncBatch()
    token = _BATCH.set(batch)
    try:
        yield
    finally:
        _BATCH.reset(token)
    for folder in sorted(batch.folders):
        try:
            _fsync_dir_now(folder)
        except OSError as exc:
            raise PersistenceError(f"writes did not become durable ({exc.strerror or exc})") from exc


def fsync_dir(folder: Path) -> None:
    """Make a rename, create or delete in folder durable (a no-op where the platform cannot; deferred in a batch)."""
    batch = _BATCH.get()
    if batch is not None:
        with batch.lock:
            batch.folders.add(folder)
        return
    _fsync_dir_now(folder)


def _fsync_dir_now(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        if exc.errno in _DIR_FSYNC_UNSUPPORTED or os.name == "nt":
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


SHARING_RETRY_DELAYS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
"""Waits between tries of a rename or delete that failed with PermissionError (Windows: the file is open)."""
IS_WINDOWS = os.name == "nt"


def _retry_sharing(op: Callable[[], None]) -> None:
    """op(), retried on PermissionError with backoff on Windows; the last PermissionError is raised as is."""
    # Elsewhere PermissionError is a real permission problem that waiting does not cure.
    for delay in SHARING_RETRY_DELAYS if IS_WINDOWS else ():
        try:
            op()
            return
        except PermissionError:
            time.sleep(delay)
    op()


def replace_file(src: Path | str, dst: Path | str) -> None:
    """os.replace, retried while another handle keeps dst open (Windows); OSError when it still fails."""
    _retry_sharing(lambda: os.replace(src, dst))


def unlink_file(path: Path | str) -> None:
    """os.unlink, retried while another handle keeps the file open (Windows); OSError when it still fails."""
    _retry_sharing(lambda: os.unlink(path))


def check_path(path: Path) -> None:
    """On Windows, a clear PathTooLongError for a path (or its temp file) beyond MAX_PATH."""
    if IS_WINDOWS:
        check_windows_path_length(str(path.absolute()))


def _sharing_message(exc: OSError, what: str) -> str:
    if isinstance(exc, PermissionError):
        return (f"{what} failed: the file stayed locked or read-only (another program may keep it open, "
                "e.g. a reader or an antivirus scan); nothing was changed, try again")
    return f"{what} did not become durable ({exc.strerror or exc})"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; a folder in its place is MemoryUnreadableError."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, PermissionError, NotADirectoryError) as exc:
        # Windows answers a folder with PermissionError; a real permission problem stays an OSError.
        if isinstance(exc, IsADirectoryError) or path.is_dir():
            raise MemoryUnreadableError("the save file is a folder, not a file") from None
        raise


def _temp_file(folder: Path) -> tuple[int, str]:
    """A new hidden temp file in folder. Its name does not grow with the target's, so any name that
    fits the file system also fits its temp file (a long stem used to fail only at write time)."""
    return tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")


_READ_IT = object()  # atomic_write reads the previous content itself


def atomic_write(path: Path, data: bytes, *, previous: bytes | None | object = _READ_IT) -> None:
    """Replace path with data: temp file in the same folder, flush + fsync, rename over, fsync the folder.

    `previous` is the file's current content (None: it does not exist), when the caller has
    already read it. On any failure the old content (or its absence) is back in place and
    PersistenceError is raised.
    """
    folder = path.parent
    check_path(path)
    if previous is _READ_IT:
        previous = read_bytes(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = _temp_file(folder)
    except OSError as exc:
        raise PersistenceError(f"could not create a temporary file ({exc.strerror})") from exc
    tmp = Path(tmp_name)
    replaced = False
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        replace_file(tmp, path)
        replaced = True
        fsync_dir(folder)
    except BaseException as exc:
        _unlink_quietly(tmp)
        if replaced:
            # The rename is visible but not known durable: put the old content back.
            _restore(path, previous)  # type: ignore[arg-type]
        if isinstance(exc, OSError):
            raise PersistenceError(_sharing_message(exc, "write")) from exc
        raise


def _restore(path: Path, previous: bytes | None) -> None:
    if previous is None:
        _unlink_quietly(path)
        return
    try:
        fd, tmp_name = _temp_file(path.parent)
        try:
            _write_all(fd, previous)
        finally:
            os.close(fd)
        replace_file(tmp_name, path)
    except OSError:
        pass


def _unlink_quietly(path: Path) -> None:
    try:
        unlink_file(path)
    except OSError:
        pass


def append(path: Path, data: bytes) -> os.stat_result:
    """Append data and fsync; all or nothing (a failed append is truncated back). Returns the new stat."""
    folder = path.parent
    check_path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PersistenceError(f"could not open the history file ({exc.strerror})") from exc
    closed = False
    try:
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            os.fsync(fd)
            if created:
                fsync_dir(folder)
            return os.fstat(fd)
        except BaseException as exc:
            if created:
                # Close before deleting: Windows cannot delete a file this process still has open.
                os.close(fd)
                closed = True
                _unlink_quietly(path)
            else:
                _truncate_back(fd, start)
            if isinstance(exc, OSError):
                raise PersistenceError(f"append did not become durable ({exc.strerror or exc})") from exc
            raise
    finally:
        if not closed:
            os.close(fd)


def _truncate_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass


def remove(path: Path) -> bool:
    """Delete path durably; True when it existed."""
    try:
        unlink_file(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise PersistenceError(_sharing_message(exc, "delete")) from exc
    try:
        fsync_dir(path.parent)
    except OSError as exc:
        raise PersistenceError(f"delete did not become durable ({exc.strerror})") from exc
    return True
