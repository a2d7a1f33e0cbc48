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
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pyruntime.errors import DiskFullError, PersistenceError
from pyruntime.stores import confined
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


def check_path(path: Path) -> None:
    """On Windows, a clear PathTooLongError for a path (or its temp file) beyond MAX_PATH."""
    if IS_WINDOWS:
        check_windows_path_length(str(path.absolute()))


def _sharing_message(exc: OSError, what: str) -> str:
    if isinstance(exc, PermissionError):
        return (f"{what} failed: the file stayed locked or read-only (another program may keep it open, "
                "e.g. a reader or an antivirus scan); nothing was changed, try again")
    return f"{what} did not become durable ({describe_os_error(exc)})"


_DISK_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def describe_os_error(exc: OSError) -> str:
    """An OS error in words (never a path: OS messages may carry one)."""
    code = errno.errorcode.get(exc.errno, "") if isinstance(exc.errno, int) else ""
    return exc.strerror or code or type(exc).__name__


def persistence_error(exc: OSError, message: str) -> PersistenceError:
    """A PersistenceError saying message, carrying exc's errno; a full disk is DiskFullError, whatever the step."""
    error = DiskFullError() if exc.errno in _DISK_FULL_ERRNOS else PersistenceError(message)
    error.errno = exc.errno
    return error


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_durably(fd: int, data: bytes) -> None:
    """Write all of data to a new file's descriptor, fsync it and close it (closed whatever happens)."""
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


DEFAULT_READ_LIMIT = 64 * 1024 * 1024
"""Bytes a file read through this module may have unless its caller names another limit."""


def read_bytes(path: Path, *, root: Path | None = None, limit: int = DEFAULT_READ_LIMIT,
               what: str = "save file") -> bytes | None:
    """The file's bytes, None when it does not exist; a link, folder, FIFO, device or a file over limit
    bytes is UnsafeSaveError (a MemoryUnreadableError) and is never opened or read whole.

    root: the data folder path is inside; no link below it is followed (`confined`).
    """
    path = Path(path)
    try:
        with confined.open_folder(path.parent, root) as folder:
            return folder.read(path.name, limit, what)
    except FileNotFoundError:
        return None


def _temp_file(folder: confined.Folder) -> tuple[int, str]:
    """A new hidden temp file in folder. Its name does not grow with the target's, so any name that
    fits the file system also fits its temp file (a long stem used to fail only at write time)."""
    return folder.create_temp()


_READ_IT = object()  # atomic_write reads the previous content itself
UNRESTORABLE = object()
"""`previous` of a file that cannot be put back (a link, a FIFO, a file over its limit): a write replaces it."""


def _previous(folder: confined.Folder, name: str, limit: int) -> bytes | None | object:
    try:
        return folder.read(name, limit, "save file")
    except confined.UnsafeSaveError:
        entry = folder.lstat(name)
        if entry is not None and stat.S_ISDIR(entry.st_mode):
            raise  # a rename cannot replace a folder: say so rather than fail the write obscurely
        return UNRESTORABLE


@contextlib.contextmanager
def _folder_for_write(folder: Path, root: Path | None) -> Iterator[confined.Folder]:
    """The folder opened (created when missing) for a write; an OS failure is a PersistenceError."""
    with contextlib.ExitStack() as stack:
        try:
            opened = stack.enter_context(confined.open_folder(folder, root, create=True))
        except OSError as exc:
            raise persistence_error(exc, f"could not create the save folder ({describe_os_error(exc)})") from exc
        yield opened


def atomic_write(path: Path, data: bytes, *, previous: bytes | None | object = _READ_IT,
                 root: Path | None = None, limit: int = DEFAULT_READ_LIMIT) -> None:
    """Replace path with data: temp file in the same folder, flush + fsync, rename over, fsync the folder.

    `previous` is the file's current content (None: it does not exist; UNRESTORABLE: not a regular
    file), when the caller has already read it. On any failure the old content (or its absence) is
    back in place and PersistenceError is raised. root: the data folder (no link below it is
    followed; a link in path's place is replaced, never written through). limit: the largest
    previous content read back for that restore.
    """
    path = Path(path)
    check_path(path)
    with _folder_for_write(path.parent, root) as folder:
        if previous is _READ_IT:
            previous = _previous(folder, path.name, limit)
        try:
            fd, tmp = _temp_file(folder)
        except OSError as exc:
            raise persistence_error(exc, f"could not create a temporary file ({describe_os_error(exc)})") from exc
        replaced = False
        try:
            _write_durably(fd, data)
            _retry_sharing(lambda: folder.replace(tmp, path.name))
            replaced = True
            fsync_dir(folder.path)
        except BaseException as exc:
            _unlink_quietly(folder, tmp)
            if replaced:
                # The rename is visible but not known durable: put the old content back.
                _restore(folder, path.name, previous)
            if isinstance(exc, OSError) and not isinstance(exc, PersistenceError):
                raise persistence_error(exc, _sharing_message(exc, "write")) from exc
            raise


def _restore(folder: confined.Folder, name: str, previous: bytes | None | object) -> None:
    if previous is UNRESTORABLE:
        return
    if previous is None:
        _unlink_quietly(folder, name)
        return
    try:
        fd, tmp = _temp_file(folder)
        try:
            _write_all(fd, previous)  # type: ignore[arg-type]
        finally:
            os.close(fd)
        _retry_sharing(lambda: folder.replace(tmp, name))
    except OSError:
        pass


def _unlink_quietly(folder: confined.Folder, name: str) -> None:
    try:
        _retry_sharing(lambda: folder.unlink(name))
    except OSError:
        pass


def append(path: Path, data: bytes, *, root: Path | None = None, what: str = "chat history file") -> os.stat_result:
    """Append data and fsync; all or nothing (a failed append is truncated back). Returns the new stat.

    The file is created when missing, never opened through a link, and must be a regular file
    (UnsafeSaveError otherwise; a FIFO is never opened). root: the data folder.
    """
    path = Path(path)
    check_path(path)
    with _folder_for_write(path.parent, root) as folder:
        try:
            fd, created = folder.open_append(path.name, what)
        except OSError as exc:
            raise persistence_error(exc, f"could not open the history file ({describe_os_error(exc)})") from exc
        closed = False
        try:
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
                os.fsync(fd)
                if created:
                    fsync_dir(folder.path)
                return os.fstat(fd)
            except BaseException as exc:
                if created:
                    # Close before deleting: Windows cannot delete a file this process still has open.
                    os.close(fd)
                    closed = True
                    _unlink_quietly(folder, path.name)
                else:
                    _truncate_back(fd, start)
                if isinstance(exc, OSError) and not isinstance(exc, PersistenceError):
                    raise persistence_error(exc, f"append did not become durable ({describe_os_error(exc)})") from exc
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


def remove(path: Path, *, root: Path | None = None) -> bool:
    """Delete path durably (a link is removed, never its target); True when it existed."""
    path = Path(path)
    try:
        with confined.open_folder(path.parent, root) as folder:
            try:
                _retry_sharing(lambda: folder.unlink(path.name))
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise persistence_error(exc, _sharing_message(exc, "delete")) from exc
            try:
                fsync_dir(folder.path)
            except OSError as exc:
                raise persistence_error(exc, f"delete did not become durable ({describe_os_error(exc)})") from exc
    except FileNotFoundError:
        return False
    return True


def rename_within(folder_path: Path, source: str, target: str, *, root: Path | None = None) -> None:
    """Rename one entry of a folder to another name in it, durably (neither is followed through a link)."""
    try:
        with confined.open_folder(folder_path, root) as folder:
            _retry_sharing(lambda: folder.replace(source, target))
            fsync_dir(folder.path)
    except OSError as exc:
        raise persistence_error(exc, f"could not move a save to its new name ({describe_os_error(exc)})") from exc


def keep_aside(path: Path, data: bytes, *, root: Path, folder: str, suffix: str) -> str:
    """Write data durably to `root/folder/<path's name without suffix>.<UTC time>[.<n>]<suffix>`, a new file.

    Returns that file's path relative to root (with `/`). For bytes that must never be lost (an
    unreadable history before it is rewritten): the copy is durable before the caller rewrites.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    stem = path.name[: -len(suffix)] if suffix and path.name.endswith(suffix) else path.name
    with _folder_for_write(root / folder, root) as aside:
        for n in range(1, 1000):
            name = f"{stem}.{stamp}{suffix}" if n == 1 else f"{stem}.{stamp}.{n}{suffix}"
            check_path(root / folder / name)
            try:
                fd = aside.create_new(name)
            except FileExistsError:
                continue
            except OSError as exc:
                raise persistence_error(exc, f"could not keep a copy aside ({describe_os_error(exc)})") from exc
            try:
                _write_durably(fd, data)
                fsync_dir(aside.path)
            except OSError as exc:
                _unlink_quietly(aside, name)
                raise persistence_error(exc, f"could not keep a copy aside ({describe_os_error(exc)})") from exc
            return f"{folder}/{name}"
    raise PersistenceError("could not keep a copy aside (no free name)")
