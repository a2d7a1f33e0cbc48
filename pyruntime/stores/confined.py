"""Save files opened inside the data folder only: no link followed, only regular files, bounded reads.

The data folder is the root the stores were given (`<data-dir>/CoreAI`); it is trusted as given, a
link the user made included. Below it nothing is followed:

- every folder below the root is opened one name at a time, with O_NOFOLLOW | O_DIRECTORY, relative
  to the folder above (`openat`): a link or a file in place of a folder is refused, and a folder
  swapped for a link during a call cannot redirect it;
- a file is looked at (`lstat`) before it is opened and only a regular file is opened (O_NOFOLLOW |
  O_NONBLOCK), then checked again on its descriptor (`fstat`: the same file, still regular). A
  FIFO, device or socket is never opened, so it can neither block a worker nor be read; a link is
  never read or written through;
- reads are bounded: a file larger than its limit is refused from its size and never read, and one
  that grows past its limit while it is read is refused too;
- new files are created with O_EXCL | O_NOFOLLOW and renames and deletes name files relative to the
  folder's descriptor: a rename over a link replaces the link, never its target.

Where the OS has no `*at` calls or O_NOFOLLOW (Windows), the same checks are made by path: each
folder and the file are lstat-ed (links and junctions refused) and the resolved path must stay below
the resolved root; there, a swap between the check and the open is not excluded.

Refusals are `UnsafeSaveError` (a `MemoryUnreadableError`: FAILED_PRECONDITION on the wire); their
messages name the kind of save and what is wrong, never a path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError, UnsafeKeyError

USE_DIR_FD = (os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")
              and hasattr(os, "O_DIRECTORY"))
"""POSIX: folders are walked by descriptor. False (Windows): the checks are made by path."""

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_REPARSE_POINT = getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0x400)
_READ_CHUNK = 1 << 20
_TEMP_TRIES = 100


class UnsafeSaveError(MemoryUnreadableError):
    """A save file is a link, not a regular file, or larger than its limit; nothing was read or written."""

    def __init__(self, message: str, *, removable: bool = True) -> None:
        super().__init__(message)
        self.removable = removable  # a delete can take the entry away (not a folder)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _is_link(st: os.stat_result) -> bool:
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0) & _REPARSE_POINT)


def refuse(what: str, st: os.stat_result) -> UnsafeSaveError:
    """The error for a save entry that is not a regular file."""
    if _is_link(st):
        return UnsafeSaveError(f"the {what} is a link; links are not followed out of the data folder "
                               "(nothing was read or written; clearing the save removes the link)")
    if stat.S_ISDIR(st.st_mode):
        return UnsafeSaveError(f"the {what} is a folder, not a file", removable=False)
    return UnsafeSaveError(f"the {what} is {kind_of(st.st_mode)}, not a regular file; it was not opened")


def too_large(what: str, size: int, limit: int) -> UnsafeSaveError:
    """The error for a save file over its read limit."""
    return UnsafeSaveError(f"the {what} is {size} bytes, over its limit of {limit} bytes; it was not read")


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class Folder:
    """One open folder: its files are named relative to it and never followed through a link."""

    def __init__(self, path: Path, fd: int | None, root: Path | None) -> None:
        self.path = path
        self.fd = fd
        self._root = root  # the resolved root, for the by-path checks (fd is None)

    def close(self) -> None:
        """Close the folder's descriptor."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _name(self, name: str) -> str | Path:
        return name if self.fd is not None else self.path / name

    def _at(self) -> dict[str, int]:
        return {"dir_fd": self.fd} if self.fd is not None else {}

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry's own stat (a link is not followed), None when there is none."""
        try:
            return os.stat(self._name(name), follow_symlinks=False, **self._at())
        except FileNotFoundError:
            return None

    def _check_folder(self) -> None:
        """By-path mode: the folder, resolved, must still be inside the resolved root."""
        if self.fd is not None or self._root is None:
            return
        real = Path(os.path.realpath(self.path))
        if real != self._root and self._root not in real.parents:
            raise UnsafeSaveError("a save folder resolves outside the data folder; nothing was read or written")

    def open_regular(self, name: str, flags: int, what: str) -> tuple[int, os.stat_result] | None:
        """(descriptor, stat) of an existing regular file, None when there is none; UnsafeSaveError otherwise."""
        before = self.lstat(name)
        if before is None:
            return None
        if not stat.S_ISREG(before.st_mode) or _is_link(before):
            raise refuse(what, before)
        self._check_folder()
        try:
            fd = os.open(self._name(name), flags | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY, **self._at())
        except FileNotFoundError:
            return None
        except OSError as exc:
            swapped = self.lstat(name)
            if swapped is not None and not stat.S_ISREG(swapped.st_mode):
                raise refuse(what, swapped) from None  # swapped for a link between the two looks (ELOOP)
            raise exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _same_file(st, before):
            os.close(fd)
            raise UnsafeSaveError(f"the {what} changed while it was opened; nothing was read or written, try again")
        return fd, st

    def read(self, name: str, limit: int, what: str) -> bytes | None:
        """The bytes of a regular file of at most limit bytes, None when there is none."""
        opened = self.open_regular(name, os.O_RDONLY, what)
        if opened is None:
            return None
        fd, st = opened
        try:
            if st.st_size > limit:
                raise too_large(what, st.st_size, limit)
            return read_bounded(fd, limit, what)
        finally:
            os.close(fd)

    def create_new(self, name: str, mode: int = 0o600) -> int:
        """A new file's descriptor (write only); FileExistsError when the name is taken, by anything."""
        self._check_folder()
        return os.open(self._name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY,
                       mode, **self._at())

    def create_temp(self) -> tuple[int, str]:
        """A new hidden temp file `.<8 random>.tmp` in the folder (its name does not grow with the target's)."""
        for _ in range(_TEMP_TRIES):
            name = f".{secrets.token_hex(4)}.tmp"
            try:
                return self.create_new(name), name
            except FileExistsError:
                continue
        raise FileExistsError("no free temporary file name")

    def open_append(self, name: str, what: str) -> tuple[int, bool]:
        """(descriptor, created) of a regular file opened for appending, created when missing."""
        try:
            fd = self.create_new(name, 0o644)
            return fd, True
        except FileExistsError:
            pass
        opened = self.open_regular(name, os.O_WRONLY | os.O_APPEND, what)
        if opened is None:
            raise FileNotFoundError("the file went away while it was opened")
        return opened[0], False

    def replace(self, src: str, dst: str) -> None:
        """Rename src over dst inside the folder (dst itself is replaced, a link too, never followed)."""
        if self.fd is not None:
            os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        else:
            self._check_folder()
            os.replace(self.path / src, self.path / dst)

    def unlink(self, name: str) -> None:
        """Delete the entry itself (a link is removed, not its target)."""
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)
        else:
            self._check_folder()
            os.unlink(self.path / name)

    def chmod(self, mode: int) -> None:
        """Set the folder's own permission bits (its descriptor: a link is never followed)."""
        if self.fd is None:
            os.chmod(self.path, mode)  # Windows: only the read-only bit; the user folder's ACL guards it
        elif hasattr(os, "fchmod"):
            os.fchmod(self.fd, mode)

    def names(self) -> list[str]:
        """The entries of the folder."""
        return os.listdir(self.fd if self.fd is not None else self.path)


def read_bounded(fd: int, limit: int, what: str, already: int = 0) -> bytes:
    """Everything from fd's position (already bytes into the file), refused once the file passes limit bytes."""
    chunks: list[bytes] = []
    total = already
    while True:
        chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise too_large(what, total, limit)


def _open_dir(name: str | Path, parent: int | None, *, follow: bool) -> int:
    flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | _O_NONBLOCK | (0 if follow else _O_NOFOLLOW)
    return os.open(name, flags, dir_fd=parent) if parent is not None else os.open(name, flags)


def _refuse_folder(part: str) -> UnsafeSaveError:
    return UnsafeSaveError(f"the save folder {part!r} is a link or not a folder; links are not followed out of "
                           "the data folder (nothing was read or written)", removable=False)


def _walk_by_fd(root: Path, parts: tuple[str, ...], create: bool) -> int:
    try:
        fd = _open_dir(root, None, follow=True)
    except FileNotFoundError:
        if not create:
            raise
        root.mkdir(parents=True, exist_ok=True)
        fd = _open_dir(root, None, follow=True)
    try:
        for part in parts:
            try:
                child = _open_dir(part, fd, follow=False)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_dir(part, fd, follow=False)
            except OSError as exc:
                entry = os.stat(part, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(entry.st_mode):
                    raise _refuse_folder(part) from None
                raise exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk_by_path(root: Path, parts: tuple[str, ...], create: bool) -> Path:
    if create:
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        raise FileNotFoundError("the data folder does not exist")
    here = root
    for part in parts:
        here = here / part
        try:
            entry = os.stat(here, follow_symlinks=False)
        except FileNotFoundError:
            if not create:
                raise
            here.mkdir(exist_ok=True)
            entry = os.stat(here, follow_symlinks=False)
        if _is_link(entry) or not stat.S_ISDIR(entry.st_mode):
            raise _refuse_folder(part)
    return here


@contextlib.contextmanager
def open_folder(folder: Path, root: Path | None, *, create: bool = False) -> Iterator[Folder]:
    """The folder, opened without following a link below root; FileNotFoundError when missing and not create.

    root None: the folder is opened as named (links followed): a file the user named on a command
    line. Its files are still never opened through a link.
    """
    folder = Path(folder)
    if root is None:
        parts: tuple[str, ...] = ()
        base = folder
    else:
        root = Path(root)
        try:
            parts = folder.relative_to(root).parts
        except ValueError:
            raise UnsafeKeyError("a save path is outside the data folder") from None
        if any(p in ("..", ".") for p in parts):
            raise UnsafeKeyError("a save path is outside the data folder")
        base = root
    if USE_DIR_FD:
        handle = Folder(folder, _walk_by_fd(base, parts, create), None)
    else:
        path = _walk_by_path(base, parts, create)
        handle = Folder(path, None, Path(os.path.realpath(base)) if root is not None else None)
    try:
        yield handle
    finally:
        handle.close()


def entry(path: Path, root: Path | None) -> os.stat_result | None:
    """The lstat of path (a link is not followed); None when it, or its folder, does not exist."""
    try:
        with open_folder(Path(path).parent, root) as folder:
            return folder.lstat(Path(path).name)
    except FileNotFoundError:
        return None


def is_regular(path: Path, root: Path | None) -> bool:
    """True when path is a regular file (not a link to one) below root."""
    found = entry(path, root)
    return found is not None and stat.S_ISREG(found.st_mode)


@dataclass(frozen=True)
class SaveLimits:
    """The largest file of each kind the stores read (a larger one is refused unread) or write (refused unwritten)."""

    memory_document: int = 64 * 1024 * 1024
    """`AgentMemory/<stem>.json`: the memory and its retained versions (16,000 chars x 31 copies is ~2 MB)."""
    history: int = 128 * 1024 * 1024
    """`AgentMemory/<stem>.history.jsonl`: up to the transcript cap's rows plus the stale ones before a rewrite."""
    summary: int = 16 * 1024 * 1024
    """`ConversationSummaries/<stem>.json`."""
    identity: int = 64 * 1024
    """`Identities/<stem>.json`: a few ids."""

    def __post_init__(self) -> None:
        if min(self.memory_document, self.history, self.summary, self.identity) < 1024:
            raise InvalidArgumentError("save limits must be at least 1024 bytes")


DEFAULT_LIMITS = SaveLimits()
