"""Restart-warm NPCs: the slots' states saved by llama-server at a graceful stop, restored at the next start.

llama-server writes and reads the files itself (`POST /slots/N?action=save|restore`, under
`--slot-save-path`); this module decides what may be loaded. Its index (`slots.json`) records, for
each file it asked llama-server to write, the conversation's digest, the file's size and SHA-256 and
the identity of the model and engine that wrote it. A file is restored only when it is a regular file
(not a link), of the recorded size and hash, written for this model, this context size and this
llama-server binary: nothing another process put in the folder is loaded blindly. Files of ours
that fail a check are removed; anything else in the folder is left alone. An index that is not
exactly what this module writes (unreadable, nested, mistyped, out of range) is ignored with a
warning: it costs the restored states, never the start.

Pure file I/O; the HTTP calls are `warm_slots.py`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

log = logging.getLogger("pyruntime.model")

FORMAT = 1
INDEX_NAME = "slots.json"
_SUFFIX = ".slot"
_NAME = re.compile(r"^[0-9a-f]{64}\.slot$")
_HEADER_BYTES = 1 << 20  # how much of the model file its identity hashes
MAX_INDEX_BYTES = 1 << 20
_MAX_STATE_BYTES = 1 << 50  # far beyond any state llama-server writes; larger numbers are not ours


def engine_identity(model_path: Path, n_ctx: int, binary: Path) -> str:
    """A digest that differs whenever a saved state could not be loaded into this model as it runs now."""
    model, engine = model_path.stat(), binary.stat()
    digest = hashlib.sha256()
    digest.update(f"{FORMAT}|{model.st_size}|{model.st_mtime_ns}|{n_ctx}|{engine.st_size}|{engine.st_mtime_ns}|"
                  .encode())
    with model_path.open("rb") as file:
        digest.update(file.read(_HEADER_BYTES))
    return digest.hexdigest()


@dataclass(frozen=True)
class SavedSlot:
    """One state file the index vouches for."""

    conversation: str
    file: str
    bytes: int
    sha256: str
    saved_at: float


_Hex64 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class _IndexEntry(BaseModel):
    """One entry of `slots.json`, exactly as `_write_index` writes it."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    conversation: _Hex64
    file: str
    bytes: Annotated[int, Field(ge=0, le=_MAX_STATE_BYTES)]
    sha256: _Hex64
    saved_at: Annotated[float, Field(ge=0, allow_inf_nan=False)]

    @model_validator(mode="after")
    def _file_of_its_conversation(self) -> _IndexEntry:
        if self.file != self.conversation + _SUFFIX:
            raise ValueError("the file is not the conversation's")
        return self


class _Index(BaseModel):
    """`slots.json`: parsed by pydantic's own JSON parser (bounded nesting, no RecursionError)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    format: Literal[1]
    identity: str
    entries: list[_IndexEntry]


def _first_problem(error: ValidationError) -> str:
    """Where and what, without the offending value (an index names no player, but a planted one may say anything)."""
    first = error.errors(include_url=False, include_input=False, include_context=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "the file"
    return f"{where}: {first['type']}"


def _digest(path: Path) -> tuple[int, str] | None:
    """(size, SHA-256) of a regular file that is not a link; None otherwise."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return None
        digest = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        return info.st_size, digest.hexdigest()
    except OSError:
        return None


class SlotStateStore:
    """The slot state files of one engine identity in `folder`."""

    def __init__(self, folder: Path, identity: str) -> None:
        """Use `folder` (created 0700 if missing) for states of `identity` (`engine_identity`)."""
        self.folder = Path(folder)
        self.identity = identity
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.name == "posix":
            os.chmod(self.folder, 0o700)

    @staticmethod
    def file_name(conversation: str) -> str:
        """The file a conversation's state is saved as (the conversation is named by its 64-hex digest)."""
        if not re.fullmatch(r"[0-9a-f]{64}", conversation):
            raise ValueError("a conversation is named by its 64-hex digest")
        return conversation + _SUFFIX

    def prepare(self, conversation: str) -> str:
        """Before llama-server saves a state: remove what is at its name (a link would be written through)."""
        name = self.file_name(conversation)
        try:
            (self.folder / name).unlink()
        except FileNotFoundError:
            pass
        return name

    def record(self, conversations: list[str]) -> list[SavedSlot]:
        """After llama-server saved them: index the states of `conversations` (most recent first); files of
        ours that are not among them are removed. Returns what was indexed."""
        saved = []
        for conversation in conversations:
            name = self.file_name(conversation)
            digest = _digest(self.folder / name)
            if digest is not None:
                saved.append(SavedSlot(conversation, name, digest[0], digest[1], time.time()))
        self._write_index(saved)
        keep = {s.file for s in saved}
        self._remove_ours(lambda name: name not in keep)
        return saved

    def restorable(self, limit: int) -> list[SavedSlot]:
        """Up to `limit` states that pass every check, most recent first; files of ours that fail are removed."""
        entries = self._read_index()
        good: list[SavedSlot] = []
        for entry in entries:
            if len(good) >= limit:
                break
            digest = _digest(self.folder / entry.file)
            if digest != (entry.bytes, entry.sha256):
                log.warning("slot state: a file does not match what was saved; not loaded")
                continue
            good.append(entry)
        keep = {s.file for s in good}
        self._remove_ours(lambda name: name not in keep)
        if len(good) != len(entries):
            self._write_index(good)
        return good

    def erase(self, conversations: list[str]) -> None:
        """Remove the saved states of `conversations` (their data was deleted): files and index entries. An index
        of another identity vouches for nothing and is rewritten empty."""
        doomed = {self.file_name(c) for c in conversations}
        self._remove_ours(lambda name: name in doomed)
        if (self.folder / INDEX_NAME).exists():
            self._write_index([e for e in self._read_index() if e.file not in doomed])

    def forget(self, entry: SavedSlot) -> None:
        """llama-server refused the file: remove it and its entry."""
        self._remove_ours(lambda name: name == entry.file)
        self._write_index([e for e in self._read_index() if e.file != entry.file])

    # -- internals ------------------------------------------------------------------------

    def _read_index(self) -> list[SavedSlot]:
        data = self._read_index_bytes()
        if data is None:
            return []
        try:
            index = _Index.model_validate_json(data)
        except ValidationError as exc:
            log.warning("slot state: the index %s is not one this runtime wrote (%s); it is ignored, no saved state "
                        "is loaded", INDEX_NAME, _first_problem(exc))
            return []
        if index.identity != self.identity:
            return []  # another model, context size or engine: its files are removed as unknown
        return [SavedSlot(e.conversation, e.file, e.bytes, e.sha256, e.saved_at) for e in index.entries]

    def _read_index_bytes(self) -> bytes | None:
        """The index file's bytes; None when there is none or it is not a small regular file (logged)."""
        path = self.folder / INDEX_NAME
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link (ELOOP), a folder, no permission
            log.warning("slot state: the index %s cannot be opened (%s); it is ignored", INDEX_NAME,
                        type(exc).__name__)
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
                log.warning("slot state: the index %s is not a regular file of at most %d bytes; it is ignored",
                            INDEX_NAME, MAX_INDEX_BYTES)
                return None
            return os.read(fd, MAX_INDEX_BYTES + 1)
        finally:
            os.close(fd)

    def _write_index(self, entries: list[SavedSlot]) -> None:
        path = self.folder / INDEX_NAME
        temporary = path.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
        body = json.dumps({"format": FORMAT, "identity": self.identity, "entries": [asdict(e) for e in entries]})
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(body)
        os.replace(temporary, path)

    def _remove_ours(self, doomed: object) -> None:
        try:
            names = [p.name for p in self.folder.iterdir()]
        except OSError:
            return
        for name in names:
            if _NAME.match(name) and doomed(name):  # type: ignore[operator]
                try:
                    (self.folder / name).unlink()
                except OSError:
                    pass
