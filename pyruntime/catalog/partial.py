"""A download's files in the cache's `.partial/` folder, where nothing is followed out of the cache.

For a file `<name>`: `<name>.partial` (the bytes so far), `<name>.partial.json` (which file they are: the
URL's digest and what the server said of the file, its length and its ETag / Last-Modified, so that a resume
continues the same file or starts over) and `<name>.partial.lock` (held while a download or a removal works
on them, deleted when it ends: `lockfile`). Bytes without a record are never resumed.

The folder is opened without following a link (a link or file in its place is removed first) and every
file in it by name relative to it, never through a link: a link, FIFO or folder planted at one of these
names is removed, never written through, and what a link points to is never touched. Files only; the HTTP
is `download.py`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pyruntime.catalog import lockfile
from pyruntime.errors import MemoryUnreadableError
from pyruntime.stores import confined, fileio

log = logging.getLogger("pyruntime.catalog")

FOLDER = ".partial"
PARTIAL_SUFFIX = ".partial"
RECORD_SUFFIX = ".partial.json"
LOCK_SUFFIX = ".partial.lock"
MAX_RECORD_BYTES = 4096
_HASH_BLOCK = 1 << 20


def url_digest(url: str) -> str:
    """What a record keeps of the URL: its sha256 (a signed URL's token is not written to disk)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


class RemoteFile(BaseModel):
    """The file the bytes come from, as the server described it when the download began."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    version: Literal[1] = 1
    url_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    length: Annotated[int, Field(ge=1, le=1 << 62)]
    etag: Annotated[str, Field(max_length=512)] | None = None
    last_modified: Annotated[str, Field(max_length=128)] | None = None

    def if_range(self) -> str | None:
        """The validator a range request sends (If-Range takes a strong ETag, else the Last-Modified date)."""
        if self.etag is not None and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified

    def continues(self, now: RemoteFile) -> bool:
        """True when `now` (what the server says today) is this same file: same URL and length, and the same
        ETag and Last-Modified wherever this one had them."""
        return (now.url_sha256 == self.url_sha256 and now.length == self.length
                and (self.etag is None or now.etag == self.etag)
                and (self.last_modified is None or now.last_modified == self.last_modified))


class PartialFiles:
    """The partial download of `<name>` in `<root>/.partial/`, its lock held (`PartialFiles.locked`)."""

    def __init__(self, root: Path, folder: confined.Folder, name: str) -> None:
        self.root = root
        self.folder = folder
        self.name = name
        self.bytes_name = name + PARTIAL_SUFFIX
        self.record_name = name + RECORD_SUFFIX

    @classmethod
    @contextlib.contextmanager
    def locked(cls, root: Path, name: str) -> Iterator[PartialFiles]:
        """The partial files of `name` with their lock held for the block (lockfile.LockBusy when another process
        holds it); the lock file is deleted when the block ends, however it ends."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        _clear_the_way(root / FOLDER)
        with confined.open_folder(root / FOLDER, root, create=True) as folder, \
                lockfile.held(folder, name + LOCK_SUFFIX):
            yield cls(root, folder, name)

    @property
    def path(self) -> Path:
        """The bytes' path (for messages and tests)."""
        return self.folder.path / self.bytes_name

    def size(self) -> int:
        """How many bytes are kept (0: none)."""
        entry = self.folder.lstat(self.bytes_name)
        return entry.st_size if entry is not None and stat.S_ISREG(entry.st_mode) else 0

    def remote(self) -> RemoteFile | None:
        """The record of the kept bytes; None when there is none or it is not one this runtime wrote."""
        try:
            data = fileio.read_bytes(self.folder.path / self.record_name, root=self.root, limit=MAX_RECORD_BYTES,
                                     what="partial download's record")
        except MemoryUnreadableError:  # a link, FIFO or huge file: not ours
            return None
        if data is None:
            return None
        try:
            return RemoteFile.model_validate_json(data)
        except ValidationError:
            return None

    def begin(self, remote: RemoteFile | None) -> None:
        """Start over: no bytes kept, and `remote` recorded (None: the bytes will not be resumable)."""
        self.discard()
        if remote is not None:
            fileio.atomic_write(self.folder.path / self.record_name, remote.model_dump_json().encode("utf-8"),
                                previous=None, root=self.root)

    @contextlib.contextmanager
    def appending(self) -> Iterator[IO[bytes]]:
        """The bytes' file opened for appending (created when missing), flushed and synced at the end."""
        _clear_the_way_in(self.folder, self.bytes_name)
        fd, _created = self.folder.open_append(self.bytes_name, "partial download")
        with os.fdopen(fd, "ab") as file:
            try:
                yield file
            finally:
                file.flush()
                with contextlib.suppress(OSError):
                    os.fsync(file.fileno())

    def hash_into(self, hasher: hashlib._Hash) -> None:
        """Feed the kept bytes to hasher."""
        opened = self.folder.open_regular(self.bytes_name, os.O_RDONLY, "partial download")
        if opened is None:
            return
        with os.fdopen(opened[0], "rb") as file:
            while block := file.read(_HASH_BLOCK):
                hasher.update(block)

    def discard(self) -> None:
        """Delete the kept bytes and their record (links themselves, never their targets)."""
        for name in (self.bytes_name, self.record_name):
            with contextlib.suppress(FileNotFoundError):
                self.folder.unlink(name)

    def move_to(self, dest: Path) -> None:
        """Move the bytes onto dest (in the cache folder) with one rename, durably; the record goes."""
        with confined.open_folder(dest.parent, None) as target:
            if self.folder.fd is not None and target.fd is not None:
                os.replace(self.bytes_name, dest.name, src_dir_fd=self.folder.fd, dst_dir_fd=target.fd)
            else:
                os.replace(self.path, dest)
        fileio.fsync_dir(dest.parent)  # the rename survives a crash only once the folder is synced
        with contextlib.suppress(FileNotFoundError):
            self.folder.unlink(self.record_name)


def _clear_the_way(folder: Path) -> None:
    """Remove a link or file that another process put where the folder belongs (a link's target stays)."""
    try:
        entry = os.lstat(folder)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(entry.st_mode):
        os.unlink(folder)
        log.warning("removed %s where the cache's %s folder belongs (what it pointed to is untouched)",
                    confined.kind_of(entry.st_mode), folder.name)


def _clear_the_way_in(folder: confined.Folder, name: str) -> None:
    """Remove anything but a regular file at name in folder (a link, not its target; a FIFO; a device)."""
    entry = folder.lstat(name)
    if entry is not None and not stat.S_ISREG(entry.st_mode):
        if stat.S_ISDIR(entry.st_mode):
            raise IsADirectoryError(f"a folder is where the partial download {name} belongs; remove it")
        folder.unlink(name)
        log.warning("removed %s where a partial download belongs (what it pointed to is untouched)",
                    confined.kind_of(entry.st_mode))
