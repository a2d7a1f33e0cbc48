"""The order counter of one key's history, shared by every store instance and process on a data folder.

A history row's order (`o`) is unique per key and grows in append order. Persisted rows carry theirs in
the history file, but a session-only row (persist=False) lives in one process only, so the file cannot
tell a peer that its order is taken, nor tell that process that a peer cleared the history after it.
The counter can: `.locks/<folder>/<digest of stem>.order` holds `{"o": the highest order handed out,
"c": rows up to this order were cleared}`, next to the key's lock file, never with the saves.

It is read and written under the key's file lock, replaced atomically but not fsynced (the session-only
rows it orders do not outlive the processes either), and it holds no content. A missing or unreadable
counter counts as 0/0: persisted rows are then still ordered by the history file, as before it existed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import CoreAIError
from pyruntime.stores import fileio

logger = logging.getLogger(__name__)

COUNTER_SUFFIX = ".order"
_MAX_BYTES = 128
_MAX_ORDER = 2**53  # what every JSON reader (and a C# double) keeps exact


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
        data = fileio.read_bytes(path, root=root, limit=_MAX_BYTES, what="order counter")
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
    except (ValueError, KeyError, TypeError):
        logger.warning("A history order counter is damaged and counts as empty")
        return OrderCounter()
    return OrderCounter(last, cleared)


def write_counter(path: Path, root: Path, counter: OrderCounter) -> None:
    """Replace the counter at path (best effort: a failure is logged, and only cross-instance order suffers)."""
    data = json.dumps({"o": counter.last, "c": counter.cleared}, separators=(",", ":")).encode("ascii")
    try:
        fileio.atomic_write(path, data, root=root, limit=_MAX_BYTES, durable=False)
    except (CoreAIError, OSError) as exc:
        logger.warning("A history order counter could not be written (%s); session-only rows of this store "
                       "may be ordered after later rows of other store instances", type(exc).__name__)
