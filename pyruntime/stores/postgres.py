"""The PostgreSQL stores (headless servers): the store contract on one database several runtimes share.

`open_postgres_stores("postgresql://…")` opens a connection pool (`postgres_db`), migrates the schema
(`postgres_schema`), and returns memory and summary stores sharing it. Every write is one
transaction that first takes the key's row lock (`SELECT … FOR UPDATE`, or the upsert that creates
the row), so concurrent writers of one key — threads or runtimes on other machines — run one after
the other and never lose an acknowledged write; a runtime that dies mid-transaction leaves nothing
(PostgreSQL rolls it back). Documents, rows and summaries are stored as the file layout's exact bytes
(`file_layout`), so both stores accept and refuse the same input, and saves move between them
through snapshots (`coreai-runtime migrate`).

Rows and summaries written with persist=False stay in this process, like the file store's (their
order numbers are still taken from the database, so they interleave with other runtimes' rows).
Errors: a lock held past lock_timeout is StoreLockedError; an unreachable database, a statement past
statement_timeout or any other database failure is PersistenceError (UNAVAILABLE). Messages never
carry the URL, keys or content.

Just over 400 lines as one job, the stores' SQL: the memory and summary stores share the key rules, the
identity index and the layout's codec; the pool and row locks (`postgres_db`), the schema and the summary rules
(`summary_rules`) are apart.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores import postgres_schema
from pyruntime.stores.admission import current as current_admission
from pyruntime.stores.base import ChatMessage, LoadResult, Mutation, TranscriptEntry, chat_row
from pyruntime.stores.file_layout import (
    DocumentError,
    decode_history_row,
    decode_memory_document,
    encode_history_row,
    encode_memory_document,
    file_stem,
    normalize_timestamp,
    retained_mask,
)
from pyruntime.stores.identity_index import Identity, IdentityIndex
from pyruntime.stores.in_memory import DEFAULT_CHAT_CAP, DEFAULT_TRANSCRIPT_CAP, _checked_entry, as_chat_message
from pyruntime.stores.postgres_db import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_STATEMENT_TIMEOUT,
    URL_SCHEMES,
    PostgresDatabase,
    is_database_url,
    lock_save,
)
from pyruntime.stores.summary_rules import PersistentSummaryStore

try:  # the `server` extra (PostgresDatabase refuses to open without it)
    import psycopg
except ImportError:  # pragma: no cover - exercised only in builds without the extra
    psycopg = None  # type: ignore[assignment]

# The database's names are part of this module's API too (they were defined here before the split).
__all__ = [
    "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_LOCK_TIMEOUT", "DEFAULT_POOL_SIZE", "DEFAULT_STATEMENT_TIMEOUT", "URL_SCHEMES",
    "PostgresAgentMemoryStore", "PostgresConversationSummaryStore", "PostgresDatabase", "PostgresIdentityIndex",
    "is_database_url", "open_postgres_stores",
]

logger = logging.getLogger(__name__)


def _check_key(key: object) -> str:
    # The file store's rules: a key a file store would refuse is refused here too, so saves can move both ways.
    file_stem(key)  # type: ignore[arg-type]
    return key  # type: ignore[return-value]


def _decode(data: bytes | memoryview) -> AgentMemoryState:
    try:
        return decode_memory_document(bytes(data)).state
    except DocumentError as exc:
        raise MemoryUnreadableError(f"the memory document cannot be read: {exc}") from None


def _checked_rows(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    rows = []
    for entry in entries:
        checked = _checked_entry(entry)  # the in-memory store's checks: same refusals, same messages
        if not isinstance(checked.timestamp, int) or isinstance(checked.timestamp, bool):
            raise InvalidArgumentError("a transcript entry timestamp must be an integer")
        rows.append(replace(checked, timestamp=normalize_timestamp(checked.timestamp), order=0))
    return rows


def _limit(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative integer (0 = all)")
    return value


class PostgresIdentityIndex(IdentityIndex):
    """The identity index in `coreai_identities`: the same notes and records, kept in the database."""

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(None)
        self._db = db
        self._written: set[str] = set()  # keys recorded by this process (bounded below)

    def record(self, key: str, conn: psycopg.Connection | None = None) -> None:
        """Make the noted identity of key durable (before the key's first write); idempotent.

        conn: the caller's transaction, when it holds one (a second pooled connection taken while
        holding one could wait forever once every thread does the same).
        """
        with self._guard:
            identity = self._noted.get(key)
            if identity is None or key in self._written:
                return
        statement = "INSERT INTO coreai_identities (key, identity) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
        if conn is not None:
            conn.execute(statement, (key, identity.to_json(key)))
        else:
            with self._db.connection() as own:
                own.execute(statement, (key, identity.to_json(key)))
        with self._guard:
            if len(self._written) > 4 * len(self._noted) + 4096:
                self._written.clear()
            self._written.add(key)

    def forget(self, key: str) -> None:
        """Remove key's identity row (its saves were erased), and this process's notes of it."""
        super().forget(key)
        self._written.discard(key)
        with self._db.connection() as conn:
            conn.execute("DELETE FROM coreai_identities WHERE key = %s", (key,))

    def verify(self, key: str, stem: str) -> None:
        """Nothing to check: database keys are exact, so ids differing only in case never share a save."""

    def identities(self) -> dict[str, Identity]:
        """Every recorded key with its identity."""
        found: dict[str, Identity] = {}
        with self._db.connection() as conn:
            for _key, data in conn.execute("SELECT key, identity FROM coreai_identities"):
                try:
                    recorded, identity = Identity.from_json(bytes(data))
                except DocumentError:
                    logger.warning("Skipping an unreadable identity index row")
                    continue
                found[recorded] = identity
        return found

    def stored_stems(self, folders: object = ()) -> set[str]:
        """File stems of the keys holding data that the index cannot attribute (the snapshot export's check)."""
        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT key FROM coreai_saves s WHERE (document IS NOT NULL OR EXISTS "
                "(SELECT 1 FROM coreai_transcript t WHERE t.key = s.key)) "
                "AND NOT EXISTS (SELECT 1 FROM coreai_identities i WHERE i.key = s.key) "
                "UNION SELECT key FROM coreai_summaries m "
                "WHERE NOT EXISTS (SELECT 1 FROM coreai_identities i WHERE i.key = m.key)").fetchall()
        return {file_stem(key) for (key,) in rows}


class PostgresAgentMemoryStore:
    """Memory documents, chat history and transcripts in PostgreSQL (one row per key, one row per transcript row)."""

    def __init__(self, db: PostgresDatabase, *, chat_cap: int = DEFAULT_CHAT_CAP,
                 transcript_cap: int = DEFAULT_TRANSCRIPT_CAP, identities: IdentityIndex | None = None) -> None:
        if chat_cap < 1 or transcript_cap < 1:
            raise InvalidArgumentError("chat_cap and transcript_cap must be at least 1")
        self.db = db
        self.chat_cap = chat_cap
        self.transcript_cap = transcript_cap
        self.trim_every = max(16, transcript_cap // 8)  # rows appended between trims (the file store's threshold)
        self.identities = identities if identities is not None else PostgresIdentityIndex(db)
        self._overlay: dict[str, list[TranscriptEntry]] = {}  # persist=False rows, this process only
        self._overlay_guard = threading.Lock()

    def close(self) -> None:
        """Close the database pool (shared with the summary store)."""
        self.db.close()

    # --- memory document ----------------------------------------------------------------------

    def try_load(self, key: str) -> LoadResult:
        """Loaded | NotFound | Failed(reason)."""
        _check_key(key)
        with self.db.connection() as conn:
            row = conn.execute("SELECT document FROM coreai_saves WHERE key = %s", (key,)).fetchone()
        if row is None or row[0] is None:
            return LoadResult.not_found()
        try:
            return LoadResult.loaded(decode_memory_document(bytes(row[0])).state)
        except DocumentError as exc:
            return LoadResult.failed(str(exc))

    def save(self, key: str, state: AgentMemoryState) -> None:
        """Replace the state of key (heals an unreadable document)."""
        _check_key(key)
        if not isinstance(state, AgentMemoryState):
            raise InvalidArgumentError("state must be an AgentMemoryState")
        data = encode_memory_document(state)
        self.identities.record(key)
        with self.db.transaction() as conn:
            if lock_save(conn, key, self.db.lock_timeout) is None:
                conn.execute("INSERT INTO coreai_saves (key, document) VALUES (%s, %s) "
                             "ON CONFLICT (key) DO UPDATE SET document = EXCLUDED.document", (key, data))
            else:
                conn.execute("UPDATE coreai_saves SET document = %s WHERE key = %s", (data, key))

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """Atomic read-modify-write under the key's row lock; committed before return."""
        _check_key(key)
        unchanged: AgentMemoryState | None = None
        with self.db.transaction() as conn:
            locked = lock_save(conn, key, self.db.lock_timeout)
            if locked is None:
                # No row yet: create it (a concurrent creator's insert waits on ours), then hold its lock.
                conn.execute("INSERT INTO coreai_saves (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (key,))
                locked = lock_save(conn, key, self.db.lock_timeout)
            document = locked[0] if locked is not None else None
            current = AgentMemoryState() if document is None else _decode(document)
            changed = fn(current)
            if changed is None:
                unchanged = current
                raise psycopg.Rollback()  # also undoes the row a missing key got: nothing written
            if not isinstance(changed, AgentMemoryState):
                raise InvalidArgumentError("a mutation must return an AgentMemoryState or None")
            encoded = encode_memory_document(changed)
            if isinstance(self.identities, PostgresIdentityIndex):
                self.identities.record(key, conn)  # in this transaction: never a second connection
            else:
                self.identities.record(key)
            conn.execute("UPDATE coreai_saves SET document = %s WHERE key = %s", (encoded, key))
        return changed if unchanged is None else unchanged

    def clear(self, key: str) -> None:
        """Delete the memory document, its versions and snapshot; chat history stays."""
        _check_key(key)
        with self.db.transaction() as conn:
            if lock_save(conn, key, self.db.lock_timeout) is not None:
                conn.execute("UPDATE coreai_saves SET document = NULL WHERE key = %s", (key,))

    # --- chat history and transcript ----------------------------------------------------------

    def append_chat_message(self, key: str, role: str, content: str, persist: bool = True) -> None:
        """Append one chat message (a transcript row flagged as chat); persist=False keeps it in this process."""
        _check_key(key)
        row = chat_row(role, content)
        self._append(key, [row], persist)

    def append_transcript(self, key: str, entries: Sequence[TranscriptEntry], persist: bool = True) -> None:
        """Append transcript rows in one all-or-nothing transaction."""
        _check_key(key)
        rows = _checked_rows(entries)  # every row is checked before any is written
        if rows:
            self._append(key, rows, persist)

    def get_chat_history(self, key: str, max_messages: int = 0, *, persisted_only: bool = False) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all) of the chat window (persisted_only: no session rows)."""
        _check_key(key)
        limit = _limit(max_messages, "max_messages")
        newest = min(limit, self.chat_cap) if limit else self.chat_cap
        rows = self._read(key, newest, chat_only=True, persisted_only=persisted_only)
        return [as_chat_message(r) for r in rows]

    def get_transcript(self, key: str, max_entries: int = 0, *, persisted_only: bool = False) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all) of the transcript (persisted_only: no session rows)."""
        _check_key(key)
        limit = _limit(max_entries, "max_entries")
        newest = min(limit, self.transcript_cap) if limit else self.transcript_cap
        return self._read(key, newest, chat_only=False, persisted_only=persisted_only)

    def clear_chat_history(self, key: str) -> None:
        """Delete the transcript rows of key (and this process's unpersisted ones); memory and order counter stay."""
        _check_key(key)
        with self.db.transaction() as conn:
            if lock_save(conn, key, self.db.lock_timeout) is not None:
                conn.execute("DELETE FROM coreai_transcript WHERE key = %s", (key,))
            with self._overlay_guard:
                self._overlay.pop(key, None)

    def remove_leftovers(self, key: str) -> None:
        """After the key's data was erased for good: its row (the order counter) and its identity go too."""
        _check_key(key)
        with self.db.transaction() as conn:
            if lock_save(conn, key, self.db.lock_timeout) is not None:
                conn.execute("DELETE FROM coreai_saves WHERE key = %s", (key,))
        self.identities.forget(key)

    # --- internals ----------------------------------------------------------------------------

    def _read(self, key: str, newest: int, *, chat_only: bool, persisted_only: bool) -> list[TranscriptEntry]:
        chat = " AND is_chat" if chat_only else ""
        with self.db.connection() as conn:
            lines = conn.execute(
                f"SELECT row, ord FROM coreai_transcript WHERE key = %s{chat} ORDER BY ord DESC LIMIT %s",
                (key, newest)).fetchall()
        rows = []
        for data, order in reversed(lines):
            try:
                rows.append(replace(decode_history_row(bytes(data)), order=order))
            except DocumentError as exc:
                raise MemoryUnreadableError(f"a chat history row cannot be read: {exc}") from None
        if persisted_only:
            return rows
        with self._overlay_guard:
            overlay = [r for r in self._overlay.get(key, ()) if r.is_chat_message or not chat_only]
        if not overlay:
            return rows
        return list(heapq.merge(rows, overlay, key=lambda r: r.order))[-newest:]

    def _append(self, key: str, rows: list[TranscriptEntry], persist: bool) -> None:
        if persist:
            self.identities.record(key)
        now = int(time.time())
        with self.db.transaction() as conn:
            # The upsert creates or locks the key's row and reserves len(rows) order numbers in one step.
            last = self._reserve_orders(conn, key, len(rows))
            first = last - len(rows) + 1
            stamped = [replace(row, order=first + i, timestamp=row.timestamp or now) for i, row in enumerate(rows)]
            if not persist:
                with self._overlay_guard:
                    overlay = self._overlay.setdefault(key, [])
                    overlay.extend(stamped)
                    mask = retained_mask([r.is_chat_message for r in overlay], self.chat_cap, self.transcript_cap)
                    self._overlay[key] = [r for r, keep in zip(overlay, mask, strict=True) if keep]
                return
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO coreai_transcript (key, ord, is_chat, row) VALUES (%s, %s, %s, %s)",
                                [(key, r.order, r.is_chat_message, encode_history_row(r)) for r in stamped])
            if (first - 1) // self.trim_every != last // self.trim_every:
                self._trim(conn, key)

    def _reserve_orders(self, conn: psycopg.Connection, key: str, count: int) -> int:
        """Create or lock key's row and reserve count order numbers; returns the last one reserved."""
        admission = current_admission()
        if admission is None or not admission.may_bounce:
            # One statement: the upsert takes the row lock (waiting for another writer) and counts on.
            return int(postgres_schema.scalar(
                conn, "INSERT INTO coreai_saves (key, last_order) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET last_order = coreai_saves.last_order + EXCLUDED.last_order RETURNING last_order",
                (key, count)))
        if lock_save(conn, key, self.db.lock_timeout) is None:  # admitted: turned away rather than waiting
            conn.execute("INSERT INTO coreai_saves (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (key,))
        return int(postgres_schema.scalar(
            conn, "UPDATE coreai_saves SET last_order = last_order + %s WHERE key = %s RETURNING last_order",
            (count, key)))

    def _trim(self, conn: psycopg.Connection, key: str) -> None:
        """Delete the rows that have left both windows (newest transcript_cap rows, newest chat_cap chats)."""
        deleted = conn.execute(
            "DELETE FROM coreai_transcript WHERE key = %(k)s "
            "AND ord < coalesce((SELECT min(ord) FROM (SELECT ord FROM coreai_transcript WHERE key = %(k)s "
            "                    ORDER BY ord DESC LIMIT %(t)s) w), 0) "
            "AND (NOT is_chat OR ord < coalesce((SELECT min(ord) FROM (SELECT ord FROM coreai_transcript "
            "     WHERE key = %(k)s AND is_chat ORDER BY ord DESC LIMIT %(c)s) w), 0))",
            {"k": key, "t": self.transcript_cap, "c": self.chat_cap}).rowcount
        if deleted:
            logger.debug("History trimmed: %d row(s) outside both windows dropped", deleted)


class PostgresConversationSummaryStore(PersistentSummaryStore):
    """Rolling summaries in `coreai_summaries` (the layout's `{"Summary":…}` bytes); each write is committed before
    it returns."""

    identities: IdentityIndex

    def __init__(self, db: PostgresDatabase, *, identities: IdentityIndex | None = None) -> None:
        self.db = db
        self.identities = identities if identities is not None else PostgresIdentityIndex(db)
        super().__init__()

    def _locate(self, key: str) -> str:
        return _check_key(key)

    def _read(self, where: str) -> bytes | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT summary FROM coreai_summaries WHERE key = %s", (where,)).fetchone()
        return None if row is None else bytes(row[0])

    def _write(self, where: str, data: bytes) -> None:
        with self.db.connection() as conn:
            conn.execute("INSERT INTO coreai_summaries (key, summary) VALUES (%s, %s) "
                         "ON CONFLICT (key) DO UPDATE SET summary = EXCLUDED.summary", (where, data))

    def _delete(self, where: str) -> None:
        with self.db.connection() as conn:
            conn.execute("DELETE FROM coreai_summaries WHERE key = %s", (where,))


def open_postgres_stores(url: str, *, chat_cap: int = DEFAULT_CHAT_CAP, transcript_cap: int = DEFAULT_TRANSCRIPT_CAP,
                         lock_timeout: float = DEFAULT_LOCK_TIMEOUT, pool_size: int = DEFAULT_POOL_SIZE,
                         statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT
                         ) -> tuple[PostgresAgentMemoryStore, PostgresConversationSummaryStore]:
    """Memory and summary stores on the database at url (migrated first), sharing one pool and identity index."""
    db = PostgresDatabase(url, pool_size=pool_size, lock_timeout=lock_timeout, statement_timeout=statement_timeout)
    index = PostgresIdentityIndex(db)
    return (PostgresAgentMemoryStore(db, chat_cap=chat_cap, transcript_cap=transcript_cap, identities=index),
            PostgresConversationSummaryStore(db, identities=index))
