"""Role configs shared by every runtime on one PostgreSQL database (`coreai_roles`), and the thread that follows them.

A role configured on one runtime (the ConfigureRole RPC, which a load balancer sends to any runtime) must hold on
all of them, and on a runtime that starts later. The table keeps each role's config as the contract's
`RoleMemoryConfig` message bytes (this module stores bytes; the service encodes them). A write notifies the
`coreai_roles` channel in its transaction, so every runtime hears of it once it is committed; `RoleFollower`
LISTENs on its own connection, reads the row it was told of and hands it on. After a lost connection it reads
every row again (notifications sent meanwhile are gone), so a runtime converges on the table whatever it missed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pyruntime.stores.postgres_db import PostgresDatabase

try:  # the `server` extra
    import psycopg
except ImportError:  # pragma: no cover - exercised only in builds without the extra
    psycopg = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

CHANNEL = "coreai_roles"
RECONNECT_S = (0.5, 1.0, 2.0, 5.0)  # waits between attempts after a lost listening connection (the last repeats)

RoleRows = dict[str, bytes]
"""role id -> the role's config as stored."""


class PostgresRoleTable:
    """The `coreai_roles` rows of one database."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def save(self, role_id: str, config: bytes) -> None:
        """Store a role's config and tell every runtime, in one transaction (PersistenceError: nothing stored)."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO coreai_roles (role_id, config) VALUES (%s, %s) "
                         "ON CONFLICT (role_id) DO UPDATE SET config = EXCLUDED.config", (role_id, config))
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, role_id))

    def load_all(self) -> RoleRows:
        """Every stored role."""
        with self.db.connection() as conn:
            return {role: bytes(data) for role, data in conn.execute("SELECT role_id, config FROM coreai_roles")}


class RoleFollower:
    """A daemon thread that hands every stored role to `apply` at start, then each role as it changes."""

    def __init__(self, db: PostgresDatabase, apply: Callable[[str, bytes], None]) -> None:
        self._db = db
        self._apply = apply
        self._stop = threading.Event()
        self._loaded = threading.Event()
        self._conn: psycopg.Connection | None = None
        self._thread = threading.Thread(target=self._run, name="coreai-role-follower", daemon=True)

    def start(self, timeout: float) -> None:
        """Start following; returns once the stored roles were applied (or after timeout: they come when they can)."""
        self._thread.start()
        if not self._loaded.wait(timeout):
            logger.warning("Shared role configs not read within %g s; they apply once the database answers", timeout)

    def close(self) -> None:
        """Stop following (the listening connection is closed)."""
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                with self._db.listener() as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    # After LISTEN: a change committed from here on is either read now or notified next.
                    for role, data in PostgresRoleTable(self._db).load_all().items():
                        self._apply(role, data)
                    self._loaded.set()
                    attempt = 0
                    while not self._stop.is_set():
                        # One at a time: the connection runs no query while notifies() holds it.
                        for notice in list(conn.notifies(timeout=0.5, stop_after=1)):
                            self._apply_one(conn, notice.payload)
            except Exception as exc:  # noqa: BLE001 - a lost connection: retry; the type only (messages hold the URL)
                if self._stop.is_set():
                    return
                wait = RECONNECT_S[min(attempt, len(RECONNECT_S) - 1)]
                attempt += 1
                logger.warning("Following shared role configs failed (%s); retrying in %g s", type(exc).__name__, wait)
                self._stop.wait(wait)

    def _apply_one(self, conn: psycopg.Connection, role: str) -> None:
        # The row as it is now, not as it was when notified: every runtime ends on the last committed config.
        row = conn.execute("SELECT config FROM coreai_roles WHERE role_id = %s", (role,)).fetchone()
        if row is not None:
            self._apply(role, bytes(row[0]))
