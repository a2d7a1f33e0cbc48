"""Which identity (role, scope, actor) each storage key belongs to, so an export can find every save.

Storage keys of scoped and actor identities are one-way hashes (`scope-v1-…`, `actor-v1-…`), so
the files alone cannot say whose they are. `ScopedAgentMemoryStore.key()` notes the identity of each
key it derives (in memory, bounded); a store records the noted identity durably right before its
first write of that key. On disk: `CoreAI/Identities/<stem>.json` = `{"key", "role", "tenant",
"user", "session", "topic", "actor"}` (one small file per key: written once, no shared file to lock).
A save written before the index existed (or by another writer) is "unattributed": an export that
cannot attribute a save of its scope fails and says how many, rather than leaving it out silently.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import MemoryUnreadableError
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import confined, fileio
from pyruntime.stores.file_layout import (
    HISTORY_SUFFIX,
    MEMORY_SUFFIX,
    DocumentError,
    KeyCollisionError,
    file_stem,
    strict_json_loads,
)
from pyruntime.stores.save_files import SaveFiles, SaveKind

logger = logging.getLogger(__name__)

IDENTITIES_DIR = "Identities"
MAX_NOTED = 4096
"""Identities remembered between a key's derivation and its write (one turn or call apart)."""
_HASHED_PREFIXES = ("scope-v1-", "actor-v1-")


@dataclass(frozen=True)
class Identity:
    """One save's owner: role, scope and actor (None = no actor)."""

    role_id: str
    scope: AgentMemoryScope
    actor: str | None

    @property
    def key(self) -> str:
        """The storage key of this identity."""
        return storage_key(self.role_id, self.scope, self.actor)

    def to_json(self, key: str) -> bytes:
        """The index file's bytes."""
        tenant, user, session, topic = self.scope.parts()
        return json.dumps({"key": key, "role": self.role_id, "tenant": tenant, "user": user, "session": session,
                           "topic": topic, "actor": self.actor or ""}, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> tuple[str, Identity]:
        """(key, identity) of an index file; DocumentError when it is not one."""
        value = strict_json_loads(data.decode("utf-8", "replace"), "identity index file")
        if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in
                                                  ("key", "role", "tenant", "user", "session", "topic", "actor")):
            raise DocumentError("identity index file is not an identity")
        scope = AgentMemoryScope(*(value[k] or None for k in ("tenant", "user", "session", "topic")))
        return value["key"], cls(value["role"], scope, value["actor"] or None)


class IdentityIndex:
    """Key -> identity, kept under `root/Identities` (or only in memory when root is None)."""

    def __init__(self, root: Path | None) -> None:
        self._folder = None if root is None else Path(root) / IDENTITIES_DIR
        self._root = None if root is None else Path(root)
        self._files = None if root is None else SaveFiles(Path(root))
        self._guard = threading.Lock()
        self._noted: OrderedDict[str, Identity] = OrderedDict()
        self._recorded: OrderedDict[str, None] = OrderedDict()  # keys known to be on disk (bounded cache)
        self._verified: OrderedDict[str, None] = OrderedDict()  # keys checked against a collision (bounded)
        self._memory: dict[str, Identity] = {}  # root None: the index itself

    def note(self, key: str, identity: Identity) -> None:
        """Remember key's identity until a store records it (bounded: the oldest notes go first)."""
        with self._guard:
            self._noted[key] = identity
            self._noted.move_to_end(key)
            while len(self._noted) > MAX_NOTED:
                self._noted.popitem(last=False)

    def record(self, key: str) -> None:
        """Make the noted identity of key durable (stores call this before writing key); idempotent."""
        with self._guard:
            if key in self._recorded:
                self._recorded.move_to_end(key)
                return
            identity = self._noted.get(key)
        if identity is None:
            return  # written through the bare key API: nothing known to record
        if self._folder is None:
            with self._guard:
                self._memory[key] = identity
            return
        path = self._folder / (file_stem(key) + MEMORY_SUFFIX)
        assert self._files is not None
        previous: bytes | None | object
        try:
            previous = self._files.read(path, SaveKind.IDENTITY)
        except MemoryUnreadableError:
            previous = fileio.UNRESTORABLE  # a link, FIFO or oversized file in its place: replaced, not written through
        if previous is None or previous is fileio.UNRESTORABLE:
            self._files.write(path, identity.to_json(key), SaveKind.IDENTITY, previous=previous)
        with self._guard:
            self._recorded[key] = None
            while len(self._recorded) > MAX_NOTED:
                self._recorded.popitem(last=False)

    def forget(self, key: str) -> None:
        """Remove key's identity (its saves were erased): the index file, and every note of it in this process."""
        with self._guard:
            for cache in (self._noted, self._recorded, self._verified):
                cache.pop(key, None)
            self._memory.pop(key, None)
        if self._folder is not None:
            assert self._files is not None
            self._files.remove(self._folder / (file_stem(key) + MEMORY_SUFFIX))

    def verify(self, key: str, stem: str) -> None:
        """Refuse key when its stem's index file records a different key (KeyCollisionError); idempotent.

        On a case-insensitive file system (NTFS, APFS) `teacher` opens the files of `Teacher`: the
        index file of the stem then names `Teacher`, and sharing its save is refused. Mixed-case ids
        keep their names (they are the layout's ordinary names), so this check is the guard. Saves
        written before the index existed carry no index file and cannot be checked.
        """
        if self._folder is None:
            return
        with self._guard:
            if key in self._verified:
                self._verified.move_to_end(key)
                return
        assert self._files is not None
        try:
            data = self._files.read(self._folder / (stem + MEMORY_SUFFIX), SaveKind.IDENTITY)
        except MemoryUnreadableError:
            data = None  # a folder, link or FIFO in its place: not an identity, nothing to compare
        if data is not None:
            try:
                other, _ = Identity.from_json(data)
            except DocumentError:
                other = key  # unreadable: identities() reports it; no evidence of a collision
            if other != key:
                raise KeyCollisionError(
                    "this id's save files would be those of another id that differs only in case (or in a "
                    "replaced character); case-insensitive file systems (Windows, macOS) would mix the two "
                    "saves, so use one spelling")
        with self._guard:
            self._verified[key] = None
            while len(self._verified) > MAX_NOTED:
                self._verified.popitem(last=False)

    def identities(self) -> dict[str, Identity]:
        """Every recorded key with its identity."""
        if self._folder is None:
            with self._guard:
                return dict(self._memory)
        found: dict[str, Identity] = {}
        assert self._files is not None and self._root is not None
        for name in _names(self._folder, self._root):
            if not name.endswith(MEMORY_SUFFIX):
                continue
            path = self._folder / name
            try:
                data = self._files.read(path, SaveKind.IDENTITY)
                if data is None:
                    continue
                key, identity = Identity.from_json(data)
            except (DocumentError, MemoryUnreadableError, OSError):
                logger.warning("Skipping an unreadable identity index file")
                continue
            found[key] = identity
        return found

    def stored_stems(self, folders: Iterable[str]) -> set[str]:
        """Stems of every save file under root's data folders (empty for an in-memory index)."""
        stems: set[str] = set()
        if self._root is None:
            return stems
        for name in folders:
            for file_name in _names(self._root / name, self._root):
                if file_name.startswith("."):
                    continue
                for suffix in (HISTORY_SUFFIX, MEMORY_SUFFIX):
                    if file_name.endswith(suffix):
                        stems.add(file_name[: -len(suffix)])
                        break
        return stems


def _names(folder: Path, root: Path) -> list[str]:
    """The entries of a data folder, [] when it does not exist; a link in its place is refused (UnsafeSaveError)."""
    try:
        with confined.open_folder(folder, root) as opened:
            return opened.names()
    except FileNotFoundError:
        return []


def is_hashed_stem(stem: str) -> bool:
    """True for the stem of a scoped or actor key (a one-way hash)."""
    return stem.startswith(_HASHED_PREFIXES)
