"""The incremental cache of a history file: the persisted rows of a key as last read.

Before each operation a `stat` tells whether another process changed the file; when it only grew,
just the bytes appended since are read (after checking the cached tail is still there).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyruntime.stores.base import TranscriptEntry
from pyruntime.stores.file_layout import parse_history
from pyruntime.stores.save_files import QUARANTINE_DIR, SaveFiles, SaveKind

logger = logging.getLogger(__name__)

TAIL_BYTES = 64  # bytes compared to make sure a grown file is still the file we cached


@dataclass
class FileStoreStats:
    """Counters of what the store did (for tests, diagnostics and benchmarks)."""

    history_appends: int = 0
    history_rewrites: int = 0
    trims: int = 0  # appends that pushed rows out of a history window (`trim_notices`)
    rows_dropped: int = 0  # stale rows removed from history files by rewrites
    skipped_lines: int = 0
    legacy_migrations: int = 0


def signature(st: os.stat_result) -> tuple[int, int, int]:
    """What tells a changed file: inode, size and modification time."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class CachedHistory:
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



def refresh(files: SaveFiles, path: Path, cached: CachedHistory | None, stats: FileStoreStats) -> CachedHistory:
    """The cached rows brought up to date with the file at path (another process may have written it)."""
    with files.opened(path, SaveKind.HISTORY) as opened:
        if opened is None:
            return CachedHistory()
        fd, st = opened
        if cached is not None and cached.signature == signature(st):
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
            chunk = files.read_from(fd, SaveKind.HISTORY, start)
            if chunk.startswith(cached.tail):
                _absorb(cached, chunk[len(cached.tail) :], start + len(chunk), chunk, stats)
                cached.signature = signature(os.fstat(fd))
                return cached
        os.lseek(fd, 0, os.SEEK_SET)
        data = files.read_from(fd, SaveKind.HISTORY)
        history = CachedHistory()
        _absorb(history, data, len(data), data, stats)
        history.signature = signature(os.fstat(fd))
        return history


def _absorb(history: CachedHistory, new_bytes: bytes, size: int, window: bytes, stats: FileStoreStats) -> None:
    parsed = parse_history(new_bytes)
    history.extend(parsed.rows)
    history.size = size
    history.tail = window[-TAIL_BYTES:]
    if parsed.skipped:
        stats.skipped_lines += parsed.skipped
        history.unreadable += parsed.skipped
        logger.warning(
            "History file: skipped %d unreadable line(s); on the next write the file is kept aside in %s/ "
            "and its readable rows are rewritten", parsed.skipped, QUARANTINE_DIR,
        )
    if parsed.skipped or parsed.torn_tail:
        history.dirty = True
