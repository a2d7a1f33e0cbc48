"""The save files of one data folder, read and written confined to it and within each kind's limit.

A store holds one `SaveFiles`: every read, write, append and delete of its saves goes through it, so
no save is opened through a link below the data folder, no FIFO or device is opened, no file larger
than its kind's limit is read (`confined`), and no write makes a file its own store could not read
back (LimitExceededError, nothing written).
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import LimitExceededError
from pyruntime.stores import confined, fileio
from pyruntime.stores.confined import DEFAULT_LIMITS, SaveLimits

QUARANTINE_DIR = "Quarantine"
"""`CoreAI/Quarantine/`: copies of unreadable saves, kept before anything rewrites them (never read as saves)."""


class SaveKind(enum.Enum):
    """A kind of save file: how errors name it and which limit applies."""

    MEMORY = ("memory document", "memory_document", "shorten the memory or keep fewer versions (max_memory_versions)")
    HISTORY = ("chat history file", "history", "clear old chat history or lower the history caps")
    SUMMARY = ("summary file", "summary", "shorten the summary")
    IDENTITY = ("identity index file", "identity", "use shorter ids")

    @property
    def what(self) -> str:
        """The kind in words, for messages."""
        return self.value[0]

    def limit(self, limits: SaveLimits) -> int:
        """This kind's byte limit."""
        return int(getattr(limits, self.value[1]))


@dataclass(frozen=True)
class SaveFiles:
    """Confined, bounded file operations on the saves under root (`<data-dir>/CoreAI`)."""

    root: Path
    limits: SaveLimits = DEFAULT_LIMITS

    def read(self, path: Path, kind: SaveKind) -> bytes | None:
        """The file's bytes, None when missing; UnsafeSaveError for a link, special file or one over the limit."""
        return fileio.read_bytes(path, root=self.root, limit=kind.limit(self.limits), what=kind.what)

    @contextlib.contextmanager
    def opened(self, path: Path, kind: SaveKind) -> Iterator[tuple[int, os.stat_result] | None]:
        """(descriptor, stat) of the regular file for reading, None when missing; its size is within the limit."""
        try:
            with confined.open_folder(path.parent, self.root) as folder:
                opened = folder.open_regular(path.name, os.O_RDONLY, kind.what)
                if opened is None:
                    yield None
                    return
                fd, st = opened
                try:
                    if st.st_size > kind.limit(self.limits):
                        raise confined.too_large(kind.what, st.st_size, kind.limit(self.limits))
                    yield fd, st
                finally:
                    os.close(fd)
        except FileNotFoundError:
            yield None

    def read_from(self, fd: int, kind: SaveKind, already: int = 0) -> bytes:
        """The rest of an opened file, refused once the whole file would pass the limit."""
        return confined.read_bounded(fd, kind.limit(self.limits), kind.what, already)

    def check_size(self, size: int, kind: SaveKind) -> None:
        """LimitExceededError when a file of size bytes would be over its kind's limit (nothing is written)."""
        limit = kind.limit(self.limits)
        if size > limit:
            raise LimitExceededError(f"the {kind.what} would be {size} bytes, over its limit of {limit} bytes; "
                                     f"nothing was written ({kind.value[2]})")

    def write(self, path: Path, data: bytes, kind: SaveKind, *, previous: bytes | None | object = None,
              read_previous: bool = False) -> None:
        """Replace the file atomically (a link or special file in its place is replaced, never written through)."""
        self.check_size(len(data), kind)
        if read_previous:
            fileio.atomic_write(path, data, root=self.root, limit=kind.limit(self.limits))
        else:
            fileio.atomic_write(path, data, previous=previous, root=self.root)

    def append(self, path: Path, data: bytes, kind: SaveKind) -> os.stat_result:
        """Append all or nothing to the regular file (created when missing); the new stat."""
        return fileio.append(path, data, root=self.root, what=kind.what)

    def remove(self, path: Path) -> bool:
        """Delete the entry (a link itself, never its target); True when it existed."""
        return fileio.remove(path, root=self.root)

    def remove_kept_aside(self, stem: str, suffix: str) -> int:
        """Delete the copies `keep_aside` made of the save `stem` + `suffix` (its data was erased); how many."""
        copy = re.compile(re.escape(stem) + r"\.\d{8}T\d{6}Z(?:\.\d+)?" + re.escape(suffix))
        try:
            with confined.open_folder(self.root / QUARANTINE_DIR, self.root) as folder:
                names = [n for n in folder.names() if copy.fullmatch(n)]
        except FileNotFoundError:
            return 0
        return sum(self.remove(self.root / QUARANTINE_DIR / name) for name in names)

    def keep_aside(self, path: Path, data: bytes, suffix: str) -> str:
        """A durable copy of data in `Quarantine/`; its path relative to root."""
        return fileio.keep_aside(path, data, root=self.root, folder=QUARANTINE_DIR, suffix=suffix)
