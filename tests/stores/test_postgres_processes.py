"""Several runtime processes, one PostgreSQL database: no acknowledged write lost, history never
reordered, and a process SIGKILLed mid-transaction leaves nothing half-written.

Real processes (`tests/support/pg_writer.py`) on a real throwaway cluster; bounded in count. No
timing is asserted: the checks are what the database holds afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest

from pyruntime.stores.base import LoadStatus
from pyruntime.stores.postgres import PostgresAgentMemoryStore, PostgresDatabase
from tests.support.pg_writer import rows

ROOT = Path(__file__).resolve().parents[2]
KEY = "scope-v1-" + "ab" * 32  # one player's save, written by every process


def _start(url: str, mode: str, worker: int, count: int = 0, key: str = KEY) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.pg_writer", url, mode, key, str(worker), str(count)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _acks(proc: subprocess.Popen, until: int | None = None) -> list[int]:
    """Ack numbers read from proc until it exits (or until `until` acks were read)."""
    acks: list[int] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        acks.append(int(line.split()[1]))
        if until is not None and len(acks) == until:
            break
    return acks


def _wait_inside(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "inside"


@pytest.fixture
def store(postgres_url):
    db = PostgresDatabase(postgres_url, lock_timeout=10.0)
    yield PostgresAgentMemoryStore(db)
    db.close()


def _check_history(store: PostgresAgentMemoryStore) -> dict[str, list[int]]:
    """Every call's three rows are adjacent and in order; returns the orders of each tag."""
    transcript = store.get_transcript(KEY)
    orders = [r.order for r in transcript]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    by_tag: dict[str, list[int]] = defaultdict(list)
    for row in transcript:
        by_tag[row.content].append(row.order)
    for tag, tag_orders in by_tag.items():
        assert len(tag_orders) == 3 and tag_orders == list(range(tag_orders[0], tag_orders[0] + 3)), tag
        first = tag_orders[0]
        assert [(r.kind, r.content) for r in transcript if first <= r.order < first + 3] == [
            (r.kind, tag) for r in rows(tag)]
    return by_tag


def test_four_processes_on_one_save_lose_and_reorder_nothing(postgres_url, store):
    workers, count = 4, 40
    procs = [_start(postgres_url, "write", n, count) for n in range(workers)]
    acked = [_acks(p) for p in procs]
    assert [p.wait(timeout=300) for p in procs] == [0] * workers
    assert acked == [list(range(count))] * workers
    lines = store.try_load(KEY).state.memory.split("\n")
    assert sorted(lines) == sorted(f"w{n}-{i}" for n in range(workers) for i in range(count))
    by_tag = _check_history(store)
    assert len(by_tag) == workers * count
    for n in range(workers):  # each process's own writes stay in its order, in memory and in history
        assert [line for line in lines if line.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(count)]
        mine = sorted((orders[0], tag) for tag, orders in by_tag.items() if tag.startswith(f"w{n}-"))
        assert [tag for _, tag in mine] == [f"w{n}-{i}" for i in range(count)]


def test_a_process_killed_mid_run_loses_none_of_its_acknowledged_writes(postgres_url, store):
    victim = _start(postgres_url, "write", 0, 400)
    others = [_start(postgres_url, "write", n, 30) for n in (1, 2)]
    acked = _acks(victim, until=10)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    acked += _acks(victim)  # under load it acknowledged more before the kill landed: still in the pipe
    assert [_acks(p) for p in others] == [list(range(30))] * 2
    assert [p.wait(timeout=300) for p in others] == [0, 0]
    lines = store.try_load(KEY).state.memory.split("\n")
    mine = [line for line in lines if line.startswith("w0-")]
    # Everything acknowledged is there, in order; at most the one call in flight went in unacknowledged.
    assert mine[: len(acked)] == [f"w0-{i}" for i in acked]
    assert mine == [f"w0-{i}" for i in range(len(mine))] and len(mine) <= len(acked) + 1
    by_tag = _check_history(store)  # each append is all three rows or none
    assert all(f"w0-{i}" in by_tag for i in acked)
    assert sum(tag.startswith("w0-") for tag in by_tag) <= len(acked) + 1
    assert sum(tag.startswith(("w1-", "w2-")) for tag in by_tag) == 60


def test_a_process_killed_inside_an_append_leaves_nothing_and_releases_the_save(postgres_url, store):
    store.append_transcript(KEY, rows("before"))
    with store.db.connection() as conn:
        last_order = conn.execute("SELECT last_order FROM coreai_saves WHERE key = %s", (KEY,)).fetchone()[0]
    victim = _start(postgres_url, "die-in-append", 9)
    _wait_inside(victim)  # its rows are inserted and the order counter moved, uncommitted
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    store.append_transcript(KEY, rows("after"))  # the row lock went with the dead connection
    assert [r.content for r in store.get_transcript(KEY)] == ["before"] * 3 + ["after"] * 3
    assert [r.order for r in store.get_transcript(KEY)] == list(range(1, 7))
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM coreai_transcript WHERE row::text LIKE %s",
                            ("%dead%",)).fetchone() == (0,)
    assert last_order == 3


def test_a_process_killed_inside_a_mutation_of_a_new_save_creates_nothing(postgres_url, store):
    victim = _start(postgres_url, "die-in-mutate", 9, key="NewSave")
    _wait_inside(victim)  # the new save's row exists in its transaction, locked
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    assert store.try_load("NewSave").status is LoadStatus.NOT_FOUND
    with store.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM coreai_saves WHERE key = 'NewSave'").fetchone()[0] == 0
    store.mutate("NewSave", lambda s: s.evolve(memory="mine"))  # not locked by the dead process
    assert store.try_load("NewSave").state.memory == "mine"
