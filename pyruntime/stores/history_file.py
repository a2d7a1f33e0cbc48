"""Writing one key's history file: whole lines appended, or, once its stale rows pile up, an atomic rewrite
without them (a file with unreadable lines is first kept aside in `Quarantine/`, so no byte is lost).

A row is stale once it has left both windows (contract §3.1); leaving them was reported as a trim then, so a
rewrite only removes what nobody reads any more.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pyruntime.stores.base import TranscriptEntry
from pyruntime.stores.file_layout import HISTORY_SUFFIX, encode_history_rows, retained_mask
from pyruntime.stores.history_cache import TAIL_BYTES, CachedHistory, FileStoreStats, signature
from pyruntime.stores.key_locks import KeyState
from pyruntime.stores.save_files import QUARANTINE_DIR, SaveFiles, SaveKind

logger = logging.getLogger(__name__)


class HistoryFileWriter:
    """Appends to and compacts the history files of one store (the caller holds the key's locks)."""

    def __init__(self, files: SaveFiles, chat_cap: int, transcript_cap: int, stats: FileStoreStats) -> None:
        self.files = files
        self.chat_cap = chat_cap
        self.transcript_cap = transcript_cap
        self.rewrite_threshold = max(16, transcript_cap // 8)
        self.stats = stats

    def write(self, ks: KeyState, path: Path, history: CachedHistory, stamped: list[TranscriptEntry]) -> None:
        """Append stamped rows, or rewrite the file without its stale rows once they exceed the threshold."""
        stale = history.stale_after(stamped, self.chat_cap, self.transcript_cap)
        data = encode_history_rows(stamped)
        full = history.size + len(data) > self.files.limits.history  # a rewrite drops stale rows first
        if history.dirty or stale > self.rewrite_threshold or full:  # CoreAI compacts once stale rows exceed it
            self.rewrite(ks, path, history.rows + stamped)
            return
        st = self.files.append(path, data, SaveKind.HISTORY)
        history.extend(stamped)
        history.size = st.st_size
        history.signature = signature(st)
        history.tail = (history.tail + data)[-TAIL_BYTES:]
        self.stats.history_appends += 1

    def rewrite(self, ks: KeyState, path: Path, rows: list[TranscriptEntry]) -> None:
        """Atomically replace the history file with rows, less those outside both windows."""
        mask = retained_mask([r.is_chat_message for r in rows], self.chat_cap, self.transcript_cap)
        kept = [r for r, keep in zip(rows, mask, strict=True) if keep]
        data = encode_history_rows(kept)
        self.files.check_size(len(data), SaveKind.HISTORY)
        if ks.history is not None and ks.history.unreadable:
            self._keep_aside(ks, path)
        self.files.write(path, data, SaveKind.HISTORY, read_previous=True)
        history = CachedHistory()
        history.extend(kept)
        st = os.stat(path, follow_symlinks=False)
        history.size = st.st_size
        history.signature = signature(st)
        history.tail = data[-TAIL_BYTES:]
        ks.history = history
        self.stats.history_rewrites += 1
        self.stats.rows_dropped += len(rows) - len(kept)
        logger.debug("History file compacted: %d stale row(s) removed, %d kept", len(rows) - len(kept), len(kept))

    def _keep_aside(self, ks: KeyState, path: Path) -> None:
        """Copy the history file, unreadable lines and all, to Quarantine/ before it is rewritten."""
        data = self.files.read(path, SaveKind.HISTORY)
        if data:
            ks.quarantined = self.files.keep_aside(path, data, HISTORY_SUFFIX)
            logger.warning("History file with %d unreadable line(s) kept aside in %s/ before its readable rows "
                           "were rewritten", ks.history.unreadable if ks.history else 0, QUARANTINE_DIR)
