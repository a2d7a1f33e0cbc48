"""A lock file that is gone once its holder is done, without ever letting two processes hold it.

filelock keeps its lock files on POSIX, and for a reason: deleting a lock file another process has opened
and is about to lock lets a third one create a fresh file under the name and lock that, while the second
locks the deleted one, and both go on. Here the holder deletes the file while it still holds the lock, and
whoever locks a file then checks that the name still leads to that very file (same device and inode); a
lock on a deleted file is let go and tried again. Nobody deletes a lock file it does not hold, so after
the check the lock is real.

The lock is only ever tried, never waited for (a second download of the same file is refused at once).
The file is opened without following a link and nothing is written to it; a link, FIFO or other special
file planted at its name is removed (what a link points to is never touched). On Windows a file another
process holds open cannot be deleted, so filelock's own lock, which deletes its file on release, is safe
there and is what is used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator

from pyruntime.stores import confined

log = logging.getLogger("pyruntime.catalog")

_TRIES = 8  # a holder that deletes the file between our open and our lock makes us try again


class LockBusy(Exception):
    """Another process holds the lock (or keeps replacing it faster than it can be taken)."""


@contextlib.contextmanager
def held(folder: confined.Folder, name: str) -> Iterator[None]:
    """Hold the lock file `name` in folder (created when missing) for the block, then delete it; LockBusy at once
    when another process holds it."""
    if not hasattr(os, "O_NOFOLLOW"):  # Windows
        yield from _held_by_filelock(folder, name)
        return
    fd = _acquire(folder, name)
    try:
        yield
    finally:
        try:
            folder.unlink(name)  # still holding it: anyone who opened this file sees it gone and tries again
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)  # releases the lock


def _acquire(folder: confined.Folder, name: str) -> int:
    import fcntl

    for _ in range(_TRIES):
        fd = _open(folder, name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockBusy from None
        except BaseException:
            os.close(fd)
            raise
        now = folder.lstat(name)
        if now is not None and os.path.samestat(now, os.fstat(fd)):
            return fd
        os.close(fd)  # its holder deleted it after we opened it: that file is nobody's lock any more
    raise LockBusy


def _open(folder: confined.Folder, name: str) -> int:
    """A descriptor of the regular file `name` (created when missing), never opened through a link."""
    for _ in range(_TRIES):
        entry = folder.lstat(name)
        if entry is None:
            try:
                return folder.create_new(name)
            except FileExistsError:
                continue
        if not stat.S_ISREG(entry.st_mode):
            if stat.S_ISDIR(entry.st_mode):
                raise IsADirectoryError("a folder is where a download's lock file belongs; remove it")
            folder.unlink(name)  # a link goes, what it points to stays
            log.warning("removed %s where a download's lock file belongs", confined.kind_of(entry.st_mode))
            continue
        try:
            opened = folder.open_regular(name, os.O_RDONLY, "download lock file")
        except confined.UnsafeSaveError:
            continue  # deleted and made again between the look and the open: look again
        if opened is not None:
            return opened[0]
    raise LockBusy


def _held_by_filelock(folder: confined.Folder, name: str) -> Iterator[None]:
    import filelock

    lock = filelock.FileLock(str(folder.path / name))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise LockBusy from None
    try:
        yield
    finally:
        lock.release()
