"""The order counter of one key's history, shared by every store instance and process on a data folder.

A history row's order (`o`) is unique per key and grows in append order. Persisted rows carry theirs in
the history file, but a session-only row (persist=False) lives in one process only, so the file cannot
tell a peer that its order is taken, nor tell that process that a peer cleared the history after it.
The counter can: `.locks/<folder>/<digest of stem>.order` holds `{"o": the highest order handed out,
"c": rows up to this order were cleared}`, next to the key's lock file, never with the saves.

It is written under the key's file lock, in place: one 64-byte record, never a new file per write
(a rename per append costs milliseconds on ext4 and a virus scan on Windows), not fsynced (the
session-only rows it orders do not outlive the processes either), with a checksum, so a reader without
the lock that meets a half-written record sees it as unreadable rather than as other numbers. It holds no
content. A missing or unreadable counter counts as 0/0 (a warning): persisted rows are then still
ordered by the history file, as before the counter existed.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import CoreAIError
from pyruntime.stores import confined, fileio

logger = logging.getLogger(__name__)

COUNTER_SUFFIX = ".order"
_RECORD_BYTES = 64  # every record is padded to this size, so a write always covers the whole file
_MAX_ORDER = 2**53  # what every JSON reader (and a C# double) keeps exact


def _checksum(last: int, cleared: int) -> int:
    return zlib.crc32(f"{last},{cleared}".encode("ascii"))


@dataclass(frozen=True)
class OrderCounter:
    """The highest order handed out for a key, and the order up to which its rows were cleared."""

    last: int = 0
    cleared: int = 0

    def next_after(self, *orders: int) -> int:
        """The order the next appended row gets: above this counter and every order already seen."""
        return max(self.last, *orders) + 1


def counter_path(lock_path: Path) -> Path:
    """The counter file that goes with a key's lock file."""
    return lock_path.with_suffix(COUNTER_SUFFIX)


def read_counter(path: Path, root: Path) -> OrderCounter:
    """The counter at path; 0/0 when it is missing or cannot be read (logged, never raised)."""
    try:
        data = fileio.read_bytes(path, root=root, limit=2 * _RECORD_BYTES, what="order counter")
    except (CoreAIError, OSError) as exc:
        logger.warning("A history order counter cannot be read (%s); session-only rows of other store "
                       "instances may be ordered after later rows", type(exc).__name__)
        return OrderCounter()
    if data is None:
        return OrderCounter()
    try:
        fields = json.loads(data)
        last, cleared = fields["o"], fields["c"]
        if not all(type(v) is int and 0 <= v < _MAX_ORDER for v in (last, cleared)) or cleared > last:
            raise ValueError("out of range")
        if fields["k"] != _checksum(last, cleared):
            raise ValueError("checksum")
    except (ValueError, KeyError, TypeError):
        logger.warning("A history order counter is damaged (or was read half-written) and counts as empty")
        return OrderCounter()
    return OrderCounter(last, cleared)


def write_counter(path: Path, root: Path, counter: OrderCounter) -> None:
    """Write the counter at path in place (the caller holds the key's file lock); a failure is logged, since
    only the order of other instances' session-only rows suffers."""
    record = json.dumps({"o": counter.last, "c": counter.cleared, "k": _checksum(counter.last, counter.cleared)},
                        separators=(",", ":")).encode("ascii")
    data = record.ljust(_RECORD_BYTES - 1) + b"\n"
    try:
        with confined.open_folder(path.parent, root, create=True) as folder:
            opened = folder.open_regular(path.name, os.O_WRONLY, "order counter")
            fd = opened[0] if opened is not None else folder.create_new(path.name)
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if opened is not None and opened[1].st_size != _RECORD_BYTES:
                    os.ftruncate(fd, _RECORD_BYTES)
            finally:
                os.close(fd)
    except (CoreAIError, OSError) as exc:
        logger.warning("A history order counter could not be written (%s); session-only rows of this store "
                       "may be ordered after later rows of other store instances", type(exc).__name__)
