"""Legacy save formats: a conversation an old `<stem>.json` still carries moves into the history file, once."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pyruntime.errors import MemoryUnreadableError
from pyruntime.stores import history_cache
from pyruntime.stores.base import TranscriptEntry
from pyruntime.stores.file_layout import (
    DocumentError,
    decode_memory_document,
    encode_memory_document,
)
from pyruntime.stores.history_cache import FileStoreStats
from pyruntime.stores.key_locks import KeyedFolder, KeyState
from pyruntime.stores.legacy_layout import legacy_conversation_rows
from pyruntime.stores.save_files import SaveFiles, SaveKind

logger = logging.getLogger(__name__)

Rewrite = Callable[[KeyState, Path, list[TranscriptEntry]], None]
"""Atomically replaces a history file with rows (the store's rewrite, which trims and keeps aside)."""


def migrate_legacy_conversation(
    ks: KeyState,
    *,
    files: SaveFiles,
    keys: KeyedFolder,
    memory_file: Path,
    history_file: Path,
    rewrite: Rewrite,
    stats: FileStoreStats,
) -> None:
    """Move a conversation an old `<stem>.json` still carries into the history file, once (under ks's lock)."""
    if ks.legacy_checked:
        return
    try:
        data = files.read(memory_file, SaveKind.MEMORY)
    except MemoryUnreadableError:
        return  # a folder, link or FIFO in its place: the caller reports it; checked again on the next touch
    if data is None:
        ks.legacy_checked = True
        return
    try:
        document = decode_memory_document(data)
    except DocumentError:
        return  # unreadable: try_load reports it; checked again on the next touch
    if not document.has_legacy_conversation:
        ks.legacy_checked = True
        return
    if not ks.file_held:
        # A read found a legacy document: migrating writes, so take the file lock and look again.
        keys.acquire_file(ks, time.monotonic() + keys.lock_timeout)
        migrate_legacy_conversation(ks, files=files, keys=keys, memory_file=memory_file,
                                    history_file=history_file, rewrite=rewrite, stats=stats)
        return
    try:
        legacy = legacy_conversation_rows(document)
    except DocumentError as exc:
        logger.warning("Legacy conversation in a memory document is unreadable and was not migrated: %s", exc)
        legacy = []
    history = ks.history = history_cache.refresh(files, history_file, ks.history, stats)
    # A crash between the two writes below leaves the rows already at the head: add them once.
    if legacy and not _already_moved(legacy, history.rows):
        rewrite(ks, history_file, legacy + history.rows)
    files.write(memory_file, encode_memory_document(document.state), SaveKind.MEMORY, previous=data)
    ks.legacy_checked = True
    stats.legacy_migrations += 1
    logger.info("Migrated %d legacy conversation row(s) into a history file", len(legacy))


def _already_moved(legacy: list[TranscriptEntry], rows: list[TranscriptEntry]) -> bool:
    """Whether rows already begin with legacy's rows: an earlier migration stopped before `<stem>.json` was rewritten.

    That migration's rewrite kept only the rows inside the caps' windows, so the head of legacy rows (order 0)
    is legacy itself or a subsequence of it that ends with its newest row.
    """
    head = list(itertools.takewhile(lambda row: row.order == 0, rows))
    if not head or head[-1] != legacy[-1]:
        return False
    remaining = iter(legacy)
    return all(any(row == candidate for candidate in remaining) for row in head)
