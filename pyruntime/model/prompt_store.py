"""Prompt states on disk (issue 13): the prompt cache's entries survive a restart of the model server.

One file per cached prompt under `<dir>/<model identity>/`, written to a temporary name and renamed,
so a crash leaves either the old file or the new one. A file is a fixed header, the cache key (token
ids), the state's token ids, one logits row, the llama.cpp state bytes, and a CRC-32 of all of it.
Nothing is unpickled (llama-cpp-python's `LlamaDiskCache` pickles through `diskcache`: a file planted
in the folder would run code, and its lookup removes the entry it returns). A file that is truncated,
corrupt, of another format or of another model is removed when it is met and never reaches llama.cpp.

The model identity hashes what makes a state loadable: the model file (size, mtime, its first MiB),
the context size and the llama-cpp-python version. Folders of other identities are removed at start,
so the disk holds one model's states, bounded by the cache's budget. Only names this module writes
are ever removed (a user pointing the cache at a busy folder loses nothing else).

Pure file I/O and numpy; imported by the model child's prompt cache only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"CoreAIPS"
FORMAT = 1
# magic, format, identity (32 bytes), key length, state token ids, logits row length, state size, n_tokens, seed
_HEADER = struct.Struct("<8sI32sIIIQIQ")
_CRC = struct.Struct("<I")
_SUFFIX = ".state"
_NAME = re.compile(r"^[0-9a-f]{40}\.state(\.[0-9]+\.tmp)?$")
_FOLDER = re.compile(r"^[0-9a-f]{16}$")
_HEADER_BYTES = 1 << 20  # how much of the model file its identity hashes


def model_identity(model_path: Path, n_ctx: int, library_version: str) -> bytes:
    """32 bytes that differ whenever a saved state could not be loaded into this model as it runs now."""
    stat = model_path.stat()
    digest = hashlib.sha256()
    digest.update(f"{FORMAT}|{stat.st_size}|{stat.st_mtime_ns}|{n_ctx}|{library_version}|".encode())
    with model_path.open("rb") as file:
        digest.update(file.read(_HEADER_BYTES))
    return digest.digest()


@dataclass(frozen=True)
class StoredState:
    """One prompt state as saved: what `llama_cpp.LlamaState` holds, and the cache key it was saved under."""

    key: tuple[int, ...]
    input_ids: np.ndarray  # intc
    scores: np.ndarray  # single, shape (1, n_vocab) or (0, 0)
    n_tokens: int
    llama_state: bytes
    seed: int


@dataclass(frozen=True)
class IndexEntry:
    """A state file found on disk whose header and length are sound (its checksum is checked on read).

    The prompt cache holds it in place of the state until a prompt needs it: `llama_state_size` is the
    name llama-cpp-python's cache sums to count its bytes.
    """

    key: tuple[int, ...]
    llama_state_size: int
    path: Path


class PromptStateStore:
    """The files of one model's prompt states in `root/<identity>/`."""

    def __init__(self, root: Path, identity: bytes) -> None:
        """Use `root` (created if missing) for the model of `identity` (see `model_identity`)."""
        if len(identity) != 32:
            raise ValueError("identity must be 32 bytes")
        self.identity = identity
        self.root = Path(root)
        self.folder = self.root / identity.hex()[:16]
        self.folder.mkdir(parents=True, exist_ok=True)

    def path_of(self, key: Sequence[int]) -> Path:
        """The file of the state saved under `key`."""
        digest = hashlib.sha1(np.asarray(key, dtype=np.int32).tobytes()).hexdigest()  # a name, not security
        return self.folder / f"{digest}{_SUFFIX}"

    def index(self) -> list[IndexEntry]:
        """The sound state files, least recently written first; everything of ours that is not is removed."""
        self._remove_foreign_folders()
        found: list[tuple[int, IndexEntry]] = []
        for path in self.folder.iterdir():
            if not _NAME.match(path.name):
                continue  # not ours: left alone
            if path.name.endswith(".tmp"):
                _remove(path, "an unfinished write")
                continue
            entry = self._read_index_entry(path)
            if entry is None:
                continue
            try:
                found.append((path.stat().st_mtime_ns, entry))
            except OSError:
                continue
        found.sort(key=lambda item: item[0])
        return [entry for _, entry in found]

    def read(self, path: Path, key: Sequence[int]) -> StoredState | None:
        """The state in `path` saved under `key`, or None (and the file removed) when it is not sound."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        state = self._decode(data)
        if state is None or state.key != tuple(key):
            _remove(path, "a corrupt or foreign state file")
            return None
        return state

    def write(self, key: Sequence[int], input_ids: np.ndarray, scores: np.ndarray, n_tokens: int,
              llama_state: bytes, seed: int) -> None:
        """Save a state under `key` (replacing the one there): a temporary file renamed into place."""
        key_ids = np.asarray(key, dtype=np.int32)
        ids = np.asarray(input_ids, dtype=np.int32)
        row = np.asarray(scores, dtype=np.float32).reshape(-1)
        header = _HEADER.pack(MAGIC, FORMAT, self.identity, len(key_ids), len(ids), len(row), len(llama_state),
                              int(n_tokens), int(seed) & 0xFFFFFFFFFFFFFFFF)
        parts = (header, key_ids.tobytes(), ids.tobytes(), row.tobytes(), llama_state)
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
        target = self.path_of(key)
        temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        with temporary.open("wb") as file:
            for part in parts:
                file.write(part)
            file.write(_CRC.pack(crc))
        os.replace(temporary, target)

    def remove(self, key: Sequence[int]) -> None:
        """Forget the state saved under `key` (nothing when there is none)."""
        self.path_of(key).unlink(missing_ok=True)

    # -- internals ------------------------------------------------------------------------

    def _remove_foreign_folders(self) -> None:
        """States of other models (or of this one at another context size or library version) can never load."""
        for folder in self.root.iterdir():
            if folder == self.folder or not folder.is_dir() or not _FOLDER.match(folder.name):
                continue
            if all(_NAME.match(p.name) for p in folder.iterdir()):
                shutil.rmtree(folder, ignore_errors=True)
                log.info("removed the prompt states of another model")

    def _read_index_entry(self, path: Path) -> IndexEntry | None:
        try:
            with path.open("rb") as file:
                head = file.read(_HEADER.size)
                fields = self._header(head)
                if fields is None:
                    _remove(path, "a corrupt or foreign state file")
                    return None
                n_key, n_ids, n_row, state_size = fields[3], fields[4], fields[5], fields[6]
                if path.stat().st_size != _length(n_key, n_ids, n_row, state_size):
                    _remove(path, "a truncated state file")
                    return None
                key = tuple(np.frombuffer(file.read(4 * n_key), dtype=np.int32).tolist())
        except OSError:
            return None
        if path != self.path_of(key):
            _remove(path, "a state file under another name")
            return None
        return IndexEntry(key, state_size, path)

    def _header(self, head: bytes) -> tuple | None:
        if len(head) != _HEADER.size:
            return None
        fields = _HEADER.unpack(head)
        magic, version, identity, n_key, n_ids, n_row, state_size, n_tokens, _ = fields
        if magic != MAGIC or version != FORMAT or identity != self.identity:
            return None
        if n_key == 0 or n_tokens > n_ids:
            return None
        return fields

    def _decode(self, data: bytes) -> StoredState | None:
        fields = self._header(data[:_HEADER.size])
        if fields is None:
            return None
        _, _, _, n_key, n_ids, n_row, state_size, n_tokens, seed = fields
        if len(data) != _length(n_key, n_ids, n_row, state_size):
            return None
        (crc,) = _CRC.unpack(data[-_CRC.size:])
        if zlib.crc32(data[:-_CRC.size]) != crc:
            return None
        at = _HEADER.size
        key = np.frombuffer(data, dtype=np.int32, count=n_key, offset=at)
        at += 4 * n_key
        ids = np.frombuffer(data, dtype=np.int32, count=n_ids, offset=at).astype(np.intc)
        at += 4 * n_ids
        row = np.frombuffer(data, dtype=np.float32, count=n_row, offset=at).copy()
        at += 4 * n_row
        scores = row.reshape(1, n_row) if n_row else np.zeros((0, 0), dtype=np.single)
        return StoredState(tuple(key.tolist()), ids, scores, n_tokens, data[at:at + state_size], seed)


def _length(n_key: int, n_ids: int, n_row: int, state_size: int) -> int:
    return _HEADER.size + 4 * (n_key + n_ids + n_row) + state_size + _CRC.size


def _remove(path: Path, why: str) -> None:
    path.unlink(missing_ok=True)
    log.warning("prompt cache: removed %s", why)  # never the path's tokens or content
