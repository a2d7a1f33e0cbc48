"""The persistent summary store (contract §3.1): rolling summaries as `ConversationSummaries/<stem>.json`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import TranscriptEntry
from pyruntime.stores.confined import DEFAULT_LIMITS, SaveLimits
from pyruntime.stores.file_layout import (
    MEMORY_SUFFIX,
    SUMMARIES_DIR,
    encode_summary,
    file_stem,
)
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.key_locks import DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_CACHED_KEYS, KeyedFolder, verified_stem
from pyruntime.stores.save_files import SaveFiles, SaveKind
from pyruntime.stores.summary_rules import PersistentSummaryStore


class FileConversationSummaryStore(PersistentSummaryStore):
    """Rolling summaries as `root/ConversationSummaries/<stem>.json` = `{"Summary":"..."}`."""

    identities: IdentityIndex

    def __init__(self, root: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 max_cached_keys: int = DEFAULT_MAX_CACHED_KEYS, identities: IdentityIndex | None = None,
                 limits: SaveLimits = DEFAULT_LIMITS) -> None:
        self.root = Path(root)
        self.files = SaveFiles(self.root, limits)
        self.identities = identities if identities is not None else IdentityIndex(self.root)
        self._keys = KeyedFolder(self.root, SUMMARIES_DIR, lock_timeout=lock_timeout, max_cached=max_cached_keys)
        super().__init__()

    @property
    def cached_keys(self) -> int:
        """How many keys' locks this process holds now (bounded by max_cached_keys)."""
        return len(self._keys)

    def _stem(self, key: str) -> str:
        return self._keys.checked_stem(key, self.identities, (MEMORY_SUFFIX,))

    def summary_path(self, key: str) -> Path:
        """`ConversationSummaries/<stem>.json` of key."""
        return self._keys.folder / (file_stem(key) + MEMORY_SUFFIX)

    def _locate(self, key: str) -> str:
        return self._stem(key)

    def _read(self, where: str) -> bytes | None:
        with self._keys.locked(where, write=False):
            return self.files.read(self._keys.folder / (where + MEMORY_SUFFIX), SaveKind.SUMMARY)

    def _check_size(self, size: int) -> None:
        self.files.check_size(size, SaveKind.SUMMARY)

    def _write(self, where: str, data: bytes) -> None:
        with self._keys.locked(where):
            self.files.write(self._keys.folder / (where + MEMORY_SUFFIX), data, SaveKind.SUMMARY, read_previous=True)

    def _delete(self, where: str) -> None:
        with self._keys.locked(where):
            self.files.remove(self._keys.folder / (where + MEMORY_SUFFIX))

    def remove_leftovers(self, key: str) -> None:
        """After the key's summary was erased for good: its lock file goes too."""
        self._keys.remove_lock_file(self._stem(key))

    def check_import(self, key: str, state: AgentMemoryState | None, history: Sequence[TranscriptEntry],
                     summary: str | None) -> None:
        """Raise what saving summary for key would raise (its id, the file limit), writing nothing (see the memory
        store's `check_import`)."""
        verified_stem(key, self.identities)
        if summary is not None:
            if not isinstance(summary, str):
                raise InvalidArgumentError("summary must be a string")
            self.files.check_size(len(encode_summary(summary)), SaveKind.SUMMARY)
