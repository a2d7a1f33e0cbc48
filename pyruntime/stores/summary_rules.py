"""The rules every persistent summary store keeps, whatever holds the bytes (files, PostgreSQL).

A summary saved with persist=False (of session-only chat) stays in this process and comes first when read; a
persisted save or a clear drops it (the persisted one is newer). A summary must be a string, is stored as the
layout's `{"Summary": ...}` bytes, and one that cannot be decoded is `MemoryUnreadableError`, never "none". A
subclass says only where the bytes go: `_locate` (check the key: its file stem or its row key), `_read`,
`_write`, `_delete`, and `_check_size` where the storage bounds a save.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.stores.base import SessionSummaries
from pyruntime.stores.file_layout import DocumentError, decode_summary, encode_summary


class _RecordsIdentities(Protocol):
    def record(self, key: str) -> None: ...


class PersistentSummaryStore(ABC):
    """`load_summary`, `save_summary` and `clear_summary` over the storage a subclass names."""

    identities: _RecordsIdentities

    def __init__(self) -> None:
        """No session-only summary yet."""
        self._session = SessionSummaries()

    def load_summary(self, key: str, *, persisted_only: bool = False) -> str | None:
        """The stored summary, None if there is none; an unreadable one is MemoryUnreadableError (never "none").

        A summary saved with persist=False (of session-only chat) comes first; persisted_only skips it.
        """
        where = self._locate(key)
        if not persisted_only and (session := self._session.get(key)) is not None:
            return session
        data = self._read(where)
        if data is None:
            return None
        try:
            return decode_summary(data)
        except DocumentError as exc:
            raise MemoryUnreadableError(f"the conversation summary cannot be read: {exc}") from None

    def save_summary(self, key: str, summary: str, persist: bool = True) -> None:
        """Replace the summary of key (durable before return).

        persist=False (the summary of session-only chat) keeps it in this process only: nothing is written,
        and it is never exported, like the chat it summarises.
        """
        where = self._locate(key)
        if not isinstance(summary, str):
            raise InvalidArgumentError("summary must be a string")
        if not persist:
            self._session.put(key, summary)
            return
        data = encode_summary(summary)
        self._check_size(len(data))
        self.identities.record(key)
        self._write(where, data)
        self._session.discard(key)  # the persisted summary is the newer one

    def clear_summary(self, key: str) -> None:
        """Delete the summary of key (the stored one and a session-only one)."""
        where = self._locate(key)
        self._session.discard(key)
        self._delete(where)

    @abstractmethod
    def _locate(self, key: str) -> str:
        """Check key (InvalidArgumentError) and name where its summary is stored."""

    @abstractmethod
    def _read(self, where: str) -> bytes | None:
        """The stored bytes, None when there are none."""

    @abstractmethod
    def _write(self, where: str, data: bytes) -> None:
        """Store the bytes, durably."""

    @abstractmethod
    def _delete(self, where: str) -> None:
        """Remove the stored bytes, if any."""

    def _check_size(self, size: int) -> None:  # noqa: B027 - an optional hook: most storage takes any size
        """Refuse a save of `size` bytes the storage would not take (no bound by default)."""
