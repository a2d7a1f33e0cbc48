"""The PostgreSQL database the stores share: its connection pool, failures as the stores' errors, row locks.

A write takes the key's row lock first (`lock_save`: `SELECT … FOR UPDATE`), so concurrent writers
of one key, threads or runtimes on other machines, run one after the other. Errors: a lock held past
lock_timeout is StoreLockedError; an unreachable database, a statement past statement_timeout or any
other database failure is PersistenceError (UNAVAILABLE). Messages never carry the URL, keys or content.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyruntime.errors import DiskFullError, InvalidArgumentError, PersistenceError, StoreLockedError
from pyruntime.stores import postgres_schema
from pyruntime.stores.admission import SaveBusy
from pyruntime.stores.admission import current as current_admission

try:  # the `server` extra; the frozen game runtime leaves it out
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - exercised only in builds without the extra
    psycopg = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

URL_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_POOL_SIZE = 16  # the service's worker threads (pyruntime.service.executor.DEFAULT_WORKERS)
DEFAULT_LOCK_TIMEOUT = 10.0  # seconds a write waits for a key's row lock (the file store's lock timeout)
DEFAULT_STATEMENT_TIMEOUT = 30.0  # seconds any one statement may run
DEFAULT_CONNECT_TIMEOUT = 10.0


def is_database_url(value: object) -> bool:
    """True for a `postgresql://` (or `postgres://`) URL."""
    return isinstance(value, str) and value.startswith(URL_SCHEMES)


class PostgresDatabase:
    """A connection pool on one database whose schema is migrated; shared by the memory and summary stores."""

    def __init__(self, url: str, *, pool_size: int = DEFAULT_POOL_SIZE, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        if psycopg is None:
            raise PersistenceError("this build has no PostgreSQL driver: install coreai-runtime[server] (psycopg)")
        if not is_database_url(url):
            raise InvalidArgumentError("the store URL must start with postgresql://")
        if pool_size < 1 or lock_timeout <= 0 or statement_timeout <= 0 or connect_timeout <= 0:
            raise InvalidArgumentError("pool_size and the timeouts must be positive")
        self.lock_timeout = lock_timeout
        self.statement_timeout = statement_timeout
        self._connect_timeout = connect_timeout
        self._url = url
        options = f"-c statement_timeout={int(statement_timeout * 1000)} -c lock_timeout={int(lock_timeout * 1000)}"
        self._options = options
        self.pool = ConnectionPool(
            # check: a connection the server dropped (a restart, a failover) is replaced before a call gets it.
            url, min_size=1, max_size=pool_size, open=False, name="coreai-store", timeout=connect_timeout,
            check=ConnectionPool.check_connection,
            kwargs={"autocommit": True, "options": options, "connect_timeout": max(1, int(connect_timeout)),
                    "application_name": "coreai-runtime"})
        try:
            self.pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout:
            self.pool.close()
            raise PersistenceError(
                f"cannot reach the database within {connect_timeout:g} s (check the URL, the server and its "
                "authentication)") from None
        try:
            with self.connection() as conn:
                self.schema_version = postgres_schema.migrate(conn)
        except BaseException:
            self.pool.close()
            raise

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit); database failures become the store's errors."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise PersistenceError(
                f"no database connection free within {self._connect_timeout:g} s (the database is unreachable "
                "or every pooled connection is busy); nothing was done") from None
        except pg_errors.LockNotAvailable:
            raise StoreLockedError(
                f"the save is locked by another runtime (waited {self.lock_timeout:g} s); nothing was done, "
                "try again once it lets go of it") from None
        except pg_errors.QueryCanceled:
            raise PersistenceError(
                f"the database did not answer within {self.statement_timeout:g} s; nothing was done") from None
        except pg_errors.DiskFull:
            raise DiskFullError() from None
        except psycopg.Error as exc:
            # sqlstate only: the message may quote a value (a key) or the server's address.
            raise PersistenceError(f"the database failed ({type(exc).__name__}, sqlstate {exc.sqlstate or '-'}); "
                                   "the call was rolled back") from None

    @contextmanager
    def listener(self) -> Iterator[psycopg.Connection]:
        """A connection of its own, outside the pool, for LISTEN (it is held for as long as the caller listens)."""
        with psycopg.connect(self._url, autocommit=True, options=self._options,
                             connect_timeout=max(1, int(self._connect_timeout)),
                             application_name="coreai-runtime-listener") as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One transaction: committed when the block ends, rolled back (nothing written) when it raises."""
        with self.connection() as conn:
            with conn.transaction():
                yield conn


def lock_save(conn: psycopg.Connection, key: str, lock_timeout: float) -> tuple[bytes | None, int] | None:
    """Take key's row lock; (document, last_order), or None when the key has no row.

    Under an admission (service worker pool) a busy row turns the call away (SaveBusy) without
    waiting, before anything was written, so a save held by another runtime costs no worker.
    """
    admission = current_admission()
    if admission is None or not admission.may_bounce:
        row = conn.execute("SELECT document, last_order FROM coreai_saves WHERE key = %s FOR UPDATE",
                           (key,)).fetchone()
        return None if row is None else (row[0], row[1])
    try:
        with conn.transaction():  # a savepoint: NOWAIT's failure must not abort the caller's transaction
            row = conn.execute("SELECT document, last_order FROM coreai_saves WHERE key = %s FOR UPDATE NOWAIT",
                               (key,)).fetchone()
    except pg_errors.LockNotAvailable:
        admission.saw_other_process = True
        if time.monotonic() < admission.deadline(lock_timeout):
            raise SaveBusy("the save is busy") from None
        raise
    admission.may_bounce = False
    return None if row is None else (row[0], row[1])
