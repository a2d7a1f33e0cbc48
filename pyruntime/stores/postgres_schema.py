"""The PostgreSQL store's schema: ordered migrations the runtime applies itself, once, under a lock.

Each save (storage key) is one `coreai_saves` row: its memory document (the file layout's exact
`<stem>.json` bytes, so the same validation reads both) and `last_order`, the key's transcript
counter. That row is also the key's lock: every write takes it with `SELECT … FOR UPDATE` (or the
upsert that creates it), so runtimes sharing the database serialise per key, as the file store's
file locks do. Transcript rows keep the layout's JSON line (`row`), with the columns the windows
need (`ord`, `is_chat`). Summaries and the identity index (key -> role, scope, actor) have a table each, and
`coreai_roles` holds the role configs every runtime on the database shares (`postgres_roles`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, LiteralString

from pyruntime.errors import PersistenceError

if TYPE_CHECKING:
    from psycopg import Connection  # the server extra's driver; only postgres.py imports it at run time

logger = logging.getLogger(__name__)

MIGRATIONS_TABLE = "coreai_schema_migrations"
_MIGRATION_LOCK = 0x636F7265616931  # pg_advisory_xact_lock id ("coreai1"): runtimes starting together take turns

# (version, what it does, SQL). Append only: a released migration is never edited.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "saves, transcript rows, summaries, identity index", """
        CREATE TABLE coreai_saves (
            key        text PRIMARY KEY,
            document   bytea,
            last_order bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE coreai_transcript (
            key     text    NOT NULL REFERENCES coreai_saves (key) ON DELETE CASCADE,
            ord     bigint  NOT NULL,
            is_chat boolean NOT NULL,
            row     bytea   NOT NULL,
            PRIMARY KEY (key, ord)
        );
        CREATE INDEX coreai_transcript_chat ON coreai_transcript (key, ord) WHERE is_chat;
        CREATE TABLE coreai_summaries (
            key     text PRIMARY KEY,
            summary bytea NOT NULL
        );
        CREATE TABLE coreai_identities (
            key      text PRIMARY KEY,
            identity bytea NOT NULL
        );
    """),
    (2, "role configs shared by every runtime", """
        CREATE TABLE coreai_roles (
            role_id text PRIMARY KEY,
            config  bytea NOT NULL
        );
    """),
)
LATEST_VERSION = MIGRATIONS[-1][0]


def scalar(conn: Connection, sql: LiteralString, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the one row a statement returns (an aggregate, a RETURNING upsert)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise PersistenceError("the database returned no row where one was expected")
    return row[0]


def applied_version(conn: Connection) -> int:
    """The highest migration applied to the database (0 for a fresh one)."""
    if not scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", (MIGRATIONS_TABLE,)):
        return 0
    return int(scalar(conn, f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}"))


def migrate(conn: Connection) -> int:
    """Apply every migration the database lacks, in order, in one transaction; returns the version now.

    A database migrated by a newer runtime (a version this one does not know) is refused rather than
    written with an older idea of the schema.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                     "version integer PRIMARY KEY, description text NOT NULL, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        current = applied_version(conn)
        if current > LATEST_VERSION:
            raise PersistenceError(
                f"the database schema is version {current}, newer than this runtime knows ({LATEST_VERSION}); "
                "upgrade the runtime")
        for version, description, sql in MIGRATIONS:
            if version <= current:
                continue
            conn.execute(sql)
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (version, description) VALUES (%s, %s)",
                         (version, description))
            logger.info("Database schema migrated to version %d (%s)", version, description)
    return max(current, LATEST_VERSION)
