"""The persistent summary store (contract §3.1): rolling summaries as `ConversationSummaries/<stem>.json`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import SessionSummaries, TranscriptEntry
from pyruntime.stores.confined import DEFAULT_LIMITS, SaveLimits
from pyruntime.stores.file_layout import (
    MEMORY_SUFFIX,
    SUMMARIES_DIR,
    DocumentError,
    decode_summary,
    encode_summary,
    file_stem,
)
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.key_locks import DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_CACHED_KEYS, KeyedFolder, require_key
from pyruntime.stores.save_files import SaveFiles, SaveKind


class FileConversationSummaryStore:
    """Rolling summaries as `root/ConversationSummaries/<stem>.json` = `{"Summary":"..."}`."""

    def __init__(self, root: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 max_cached_keys: int = DEFAULT_MAX_CACHED_KEYS, identities: IdentityIndex | None = None,
                 limits: SaveLimits = DEFAULT_LIMITS) -> None:
        self.root = Path(root)
        self.files = SaveFiles(self.root, limits)
        self.identities = identities if identities is not None else IdentityIndex(self.root)
        self._keys = KeyedFolder(self.root, SUMMARIES_DIR, lock_timeout=lock_timeout, max_cached=max_cached_keys)
        self._session = SessionSummaries()

    @property
    def cached_keys(self) -> int:
        """How many keys' locks this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        stem = require_key(key)
        self.identities.verify(key, stem)
        self._keys.move_pre_escape_files(key, stem, (MEMORY_SUFFIX,))
        return stem

    def summary_path(self, key: str) -> Path:
        """`ConversationSummaries/<stem>.json` of key."""
        return self._keys.folder / (file_stem(key) + MEMORY_SUFFIX)

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """The stored summary, None if there is none; an unreadable one is MemoryUnreadableError (never "none").

        A summary saved with persist=False (of session-only chat) comes first; persisted_only skips it.
        """
        stem = self._stem(key)
        if not persisted_only and (session := self._session.get(key)) is not None:
            return session
        with self._keys.locked(stem, write=False):
            data = self.files.read(self._keys.folder / (stem + MEMORY_SUFFIX), SaveKind.SUMMARY)
        if data is None:
            return None
        try:
            return decode_summary(data)
        except DocumentError as exc:
            raise MemoryUnreadableError(f"the conversation summary cannot be read: {exc}") from None

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Replace the summary of key (durable before return).

        persist=False (the summary of session-only chat) keeps it in this process only: no file is
        written, and it is never exported, like the chat it summarises.
        """
        stem = self._stem(key)
        if not isinstance(summary, str):
            raise InvalidArgumentError("summary must be a string")
        if not persist:
            self._session.put(key, summary)
            return
        data = encode_summary(summary)
        self.files.check_size(len(data), SaveKind.SUMMARY)
        self.identities.record(key)
        with self._keys.locked(stem):
            self.files.write(self._keys.folder / (stem + MEMORY_SUFFIX), data, SaveKind.SUMMARY, read_previous=True)
            self._session.discard(key)  # the persisted summary is the newer one

    def remove_leftovers(self, key: str) -> None:
        """After the key's summary was erased for good: its lock file goes too."""
        self._keys.remove_lock_file(self._stem(key))

    def check_import(self, key: str, state: AgentMemoryState | None, history: Sequence[TranscriptEntry],
                     summary: str | None) -> None:
        """Raise what saving summary for key would raise (its id, the file limit), writing nothing (see the memory
        store's `check_import`)."""
        stem = require_key(key)
        self.identities.verify(key, stem)
        if summary is not None:
            if not isinstance(summary, str):
                raise InvalidArgumentError("summary must be a string")
            self.files.check_size(len(encode_summary(summary)), SaveKind.SUMMARY)

    def clear_summary(self, key: str) -> None:
        """Delete the summary of key (its file and a session-only one)."""
        stem = self._stem(key)
        with self._keys.locked(stem):
            self._session.discard(key)
            self.files.remove(self._keys.folder / (stem + MEMORY_SUFFIX))
