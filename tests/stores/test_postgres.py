"""What the PostgreSQL store does beyond the shared contract (test_contract.py runs that on it too):
schema migrations, the file store's refusals, unreadable rows, session-only rows, lock and
statement timeouts, admission, and the bundle / serve wiring. A real throwaway cluster, no doubles.
"""

from __future__ import annotations

import threading
from functools import partial

import psycopg
import pytest

from pyruntime.errors import (
    InvalidArgumentError,
    MemoryUnreadableError,
    PersistenceError,
    StoreLockedError,
    UnsafeKeyError,
)
from pyruntime.memory.state import AgentMemoryState
from pyruntime.memory.tool import MemoryTool
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import postgres_schema
from pyruntime.stores.admission import Admission, SaveBusy, admitted
from pyruntime.stores.base import LoadStatus, TranscriptEntry, TranscriptKind
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, open_stores
from pyruntime.stores.postgres import PostgresAgentMemoryStore, PostgresConversationSummaryStore, PostgresDatabase
from tests.support.loads import loaded

KEY = "Teacher"
ALEX = AgentMemoryScope("studio", "alex", "slot1", None)


def _with_line(line: str, state: AgentMemoryState) -> AgentMemoryState:
    return state.evolve(memory=f"{state.memory}\n{line}")


@pytest.fixture
def db(postgres_url):
    database = PostgresDatabase(postgres_url, lock_timeout=2.0)
    yield database
    database.close()


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


# -- schema ----------------------------------------------------------------------------------


def test_a_fresh_database_is_migrated_to_the_latest_version_once(postgres_url):
    first = PostgresDatabase(postgres_url)
    second = PostgresDatabase(postgres_url)  # a second runtime on a migrated database changes nothing
    try:
        assert first.schema_version == second.schema_version == postgres_schema.LATEST_VERSION
        with psycopg.connect(postgres_url) as conn:
            rows = conn.execute("SELECT version FROM coreai_schema_migrations ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [v for v, _, _ in postgres_schema.MIGRATIONS]
        assert {"coreai_saves", "coreai_transcript", "coreai_summaries", "coreai_identities",
                "coreai_roles"} <= _tables(postgres_url)
    finally:
        first.close()
        second.close()


def test_runtimes_starting_together_migrate_once(postgres_url):
    errors: list[BaseException] = []
    opened: list[PostgresDatabase] = []

    def start() -> None:
        try:
            opened.append(PostgresDatabase(postgres_url))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for database in opened:
        database.close()
    assert errors == [] and len(opened) == 4
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM coreai_schema_migrations").fetchone() == (
            len(postgres_schema.MIGRATIONS),)


def test_a_database_of_a_newer_runtime_is_refused(postgres_url):
    PostgresDatabase(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO coreai_schema_migrations (version, description) VALUES (%s, 'future')",
                     (postgres_schema.LATEST_VERSION + 1,))
    with pytest.raises(PersistenceError, match="newer than this runtime"):
        PostgresDatabase(postgres_url)


def test_an_unreachable_database_is_a_clear_error_without_the_url(postgres_cluster):
    url = postgres_cluster.url("no_such_database_here")
    with pytest.raises(PersistenceError, match="cannot reach the database") as caught:
        PostgresDatabase(url, connect_timeout=2.0)
    assert "no_such_database_here" not in str(caught.value)


def test_a_url_that_is_not_postgresql_is_refused():
    with pytest.raises(InvalidArgumentError, match="postgresql://"):
        PostgresDatabase("mysql://localhost/x")


# -- the file store's refusals ---------------------------------------------------------------


@pytest.mark.parametrize("key", [".", ".."])
def test_keys_a_file_store_refuses_are_refused_and_write_nothing(db, key):
    store = PostgresAgentMemoryStore(db)
    with pytest.raises(UnsafeKeyError):
        store.save(key, AgentMemoryState(memory="m"))
    with pytest.raises(UnsafeKeyError):
        store.append_chat_message(key, "user", "hi")
    with pytest.raises(InvalidArgumentError, match="too long"):
        store.append_chat_message("k" * 300, "user", "hi")
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM coreai_saves").fetchone()[0] == 0


def test_a_state_a_file_could_not_hold_is_refused_before_writing(db):
    store = PostgresAgentMemoryStore(db)
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        store.save(KEY, AgentMemoryState(system_prompt_memory_version=2**31))
    assert store.try_load(KEY).status is LoadStatus.NOT_FOUND


def test_text_the_database_cannot_hold_as_text_round_trips(db):
    # NUL and lone surrogates: stored as the file layout's bytes, so they round-trip as in a file.
    store = PostgresAgentMemoryStore(db)
    summaries = PostgresConversationSummaryStore(db)
    store.save(KEY, AgentMemoryState(memory="a\x00b"))
    store.append_chat_message(KEY, "user", "nul \x00 and \ud800")
    summaries.save_summary(KEY, "s\x00")
    assert loaded(store.try_load(KEY)).memory == "a\x00b"
    assert store.get_chat_history(KEY)[0].content == "nul \x00 and \ud800"
    assert summaries.load_summary(KEY) == "s\x00"


def test_an_unreadable_document_is_failed_and_never_rewritten(db):
    store = PostgresAgentMemoryStore(db)
    store.save(KEY, AgentMemoryState(memory="x"))
    bad = b'{"Memory": "x", "SystemPromptMemoryVersion": NaN}'
    with db.connection() as conn:
        conn.execute("UPDATE coreai_saves SET document = %s WHERE key = %s", (bad, KEY))
    assert store.try_load(KEY).status is LoadStatus.FAILED
    result = MemoryTool(store, KEY).execute({"action": "append", "content": "new"})
    assert not result.success and result.error is not None and "could not be read" in result.error
    with pytest.raises(MemoryUnreadableError):
        store.mutate(KEY, lambda s: s.evolve(memory="y"))
    with db.connection() as conn:
        assert bytes(conn.execute("SELECT document FROM coreai_saves WHERE key = %s", (KEY,)).fetchone()[0]) == bad
    store.save(KEY, AgentMemoryState(memory="healed"))  # save heals it, as on files
    assert loaded(store.try_load(KEY)).memory == "healed"


def test_an_unreadable_summary_is_unreadable_not_none(db):
    summaries = PostgresConversationSummaryStore(db)
    summaries.save_summary(KEY, "fine")
    with db.connection() as conn:
        conn.execute("UPDATE coreai_summaries SET summary = %s", (b'{"Summary": "half',))
    with pytest.raises(MemoryUnreadableError, match="summary"):
        summaries.load_summary(KEY)


# -- session-only rows and summaries stay in the process --------------------------------------


def test_unpersisted_rows_and_summaries_never_reach_the_database(db):
    store = PostgresAgentMemoryStore(db)
    summaries = PostgresConversationSummaryStore(db)
    store.append_chat_message(KEY, "user", "kept")
    store.append_chat_message(KEY, "assistant", "volatile", persist=False)
    store.append_chat_message(KEY, "user", "kept too")
    summaries.save_summary(KEY, "session summary", persist=False)
    assert [m.content for m in store.get_chat_history(KEY)] == ["kept", "volatile", "kept too"]
    assert [m.content for m in store.get_chat_history(KEY, persisted_only=True)] == ["kept", "kept too"]
    assert summaries.load_summary(KEY) == "session summary"
    assert summaries.load_summary(KEY, persisted_only=True) is None
    other_runtime = PostgresAgentMemoryStore(db)
    assert [m.content for m in other_runtime.get_chat_history(KEY)] == ["kept", "kept too"]
    assert PostgresConversationSummaryStore(db).load_summary(KEY) is None
    orders = [m.order for m in store.get_chat_history(KEY)]
    assert orders == sorted(orders) and len(set(orders)) == 3


def test_trimming_keeps_every_row_either_window_still_shows(db):
    store = PostgresAgentMemoryStore(db, chat_cap=5, transcript_cap=4)
    for i in range(3):
        store.append_chat_message(KEY, "user", f"m{i}")
    for i in range(100):
        store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", f"r{i}")])
    with db.connection() as conn:
        stored = conn.execute("SELECT count(*) FROM coreai_transcript WHERE key = %s", (KEY,)).fetchone()[0]
    assert stored < 3 + 4 + store.trim_every  # trimmed, not grown to 103
    assert [m.content for m in store.get_chat_history(KEY)] == ["m0", "m1", "m2"]
    assert [r.content for r in store.get_transcript(KEY)] == ["r96", "r97", "r98", "r99"]


# -- locks -----------------------------------------------------------------------------------


def _hold_row_lock(url: str, key: str) -> psycopg.Connection:
    """Another runtime in the middle of a write of key: its row locked, not committed."""
    conn = psycopg.connect(url)
    conn.execute("INSERT INTO coreai_saves (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    conn.commit()
    conn.execute("SELECT 1 FROM coreai_saves WHERE key = %s FOR UPDATE", (key,))
    return conn


def test_a_row_held_past_the_lock_timeout_fails_only_that_call(db, postgres_url):
    store = PostgresAgentMemoryStore(db)
    holder = _hold_row_lock(postgres_url, KEY)
    try:
        with pytest.raises(StoreLockedError, match="locked by another runtime"):
            store.mutate(KEY, lambda s: s.evolve(memory="lost?"))
        with pytest.raises(StoreLockedError):
            store.append_chat_message(KEY, "user", "lost?")
        store.append_chat_message("Other", "user", "fine")  # other saves go on
        assert store.try_load(KEY).status is LoadStatus.NOT_FOUND  # reads take no lock
    finally:
        holder.close()
    store.mutate(KEY, lambda s: s.evolve(memory="after"))
    assert loaded(store.try_load(KEY)).memory == "after"
    assert [m.content for m in store.get_chat_history(KEY)] == []


def test_an_admitted_call_on_a_held_row_is_turned_away_before_writing(db, postgres_url):
    store = PostgresAgentMemoryStore(db)
    store.save(KEY, AgentMemoryState(memory="before"))
    holder = _hold_row_lock(postgres_url, KEY)
    try:
        admission = Admission()
        for call in (lambda: store.mutate(KEY, lambda s: s.evolve(memory="after")),
                     lambda: store.append_chat_message(KEY, "user", "x"),
                     lambda: store.save(KEY, AgentMemoryState(memory="after"))):
            with pytest.raises(SaveBusy):
                with admitted(admission):
                    call()
        assert admission.saw_other_process
        late = Admission(started=0.0)  # its lock timeout is long over: the clear error instead
        with pytest.raises(StoreLockedError):
            with admitted(late):
                store.mutate(KEY, lambda s: s.evolve(memory="after"))
    finally:
        # Rollback waits for the server to release the row; close() alone lets the admitted call below race
        # the holder's backend exiting (it was turned away as busy now and then on a loaded machine).
        holder.rollback()
        holder.close()
    assert loaded(store.try_load(KEY)).memory == "before"
    with admitted(Admission()):
        store.mutate(KEY, lambda s: s.evolve(memory="after"))
    assert loaded(store.try_load(KEY)).memory == "after"


def test_a_statement_past_the_statement_timeout_is_unavailable(postgres_url):
    database = PostgresDatabase(postgres_url, statement_timeout=0.2)
    try:
        with pytest.raises(PersistenceError, match="did not answer within 0.2 s"):
            with database.connection() as conn:
                conn.execute("SELECT pg_sleep(5)")
        with database.connection() as conn:  # the pool still works
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        database.close()


# -- bundle ----------------------------------------------------------------------------------


def test_open_stores_with_a_database_url_survives_reopening(postgres_url, tmp_path):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=postgres_url, chat_cap=3)
    view = bundle.scoped(ALEX, "npc_1")
    view.save("Merchant", AgentMemoryState(memory="likes gold"))
    for i in range(5):
        view.append_chat_message("Merchant", "user", f"m{i}")
    view.save_summary("Merchant", "summary")
    bundle.close()
    assert not (tmp_path / "CoreAI").exists()
    reopened = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=postgres_url)
    again = reopened.scoped(ALEX, "npc_1")
    try:
        assert loaded(again.try_load("Merchant")).memory == "likes gold"
        assert [m.content for m in again.get_chat_history("Merchant")] == ["m0", "m1", "m2", "m3", "m4"]
        assert again.load_summary("Merchant") == "summary"
        assert isinstance(reopened.memory, PostgresAgentMemoryStore)
        identities = reopened.memory.identities.identities()
        assert [(i.role_id, i.actor) for i in identities.values()] == [("Merchant", "npc_1")]
    finally:
        reopened.close()


def test_more_writers_than_pooled_connections_never_wait_for_a_second_connection(postgres_url):
    # A first write of a scoped save records its identity; that must happen in the write's own
    # transaction: with every connection held by a writer, a second one would never come.
    from pyruntime.stores.postgres import PostgresIdentityIndex
    from pyruntime.stores.scoped import ScopedAgentMemoryStore

    database = PostgresDatabase(postgres_url, pool_size=2, connect_timeout=3.0)
    try:
        index = PostgresIdentityIndex(database)
        store = PostgresAgentMemoryStore(database, identities=index)
        summaries = PostgresConversationSummaryStore(database, identities=index)
        errors: list[BaseException] = []
        start = threading.Barrier(6)

        def writer(n: int) -> None:
            start.wait()
            try:
                for i in range(10):
                    view = ScopedAgentMemoryStore(store, summaries, AgentMemoryScope("studio", f"p{n}-{i}"))
                    view.mutate("Blacksmith", lambda s: s.evolve(memory="first"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(index.identities()) == 60
    finally:
        database.close()


def test_a_database_restart_costs_no_call():
    # Its own cluster: the restart ends every connection of the server.
    from tests.support.postgres import PostgresCluster

    cluster = PostgresCluster()
    try:
        database = PostgresDatabase(cluster.database(), pool_size=3)
        try:
            store = PostgresAgentMemoryStore(database)
            store.save(KEY, AgentMemoryState(memory="before"))
            cluster.restart()
            for i in range(5):  # every pooled connection was dropped; none reaches a call
                store.mutate(KEY, partial(_with_line, str(i)))
            assert loaded(store.try_load(KEY)).memory.splitlines() == ["before", "0", "1", "2", "3", "4"]
        finally:
            database.close()
    finally:
        cluster.stop()


def test_a_full_database_disk_says_what_a_full_disk_says_on_files(db):
    # One disk-full message on every path, the database's (sqlstate 53100) included.
    from pyruntime.errors import DISK_FULL_MESSAGE, DiskFullError
    from pyruntime.service.status import StatusCode, status_for

    with pytest.raises(DiskFullError) as info:
        with db.connection():
            raise psycopg.errors.DiskFull("could not extend file")
    assert str(info.value) == DISK_FULL_MESSAGE
    assert status_for(info.value).code is StatusCode.UNAVAILABLE and status_for(info.value).message == DISK_FULL_MESSAGE
