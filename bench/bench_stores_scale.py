"""Headless-server scale: runtimes sharing one PostgreSQL vs one runtime on files (loopback only, bounded).

Part `load`: R `serve --no-model` runtimes on one throwaway PostgreSQL cluster (durable: fsync on), C gRPC
clients per runtime, each sending M memory appends (unique lines) to random players' saves out of P
(seeded). One runtime is SIGKILLed a third of the way through; its clients fail over to the others and
send their unacknowledged append again (an identical append is not added twice). Afterwards every
save is read from the database: every acknowledged line must be there exactly once (0 lost, 0
duplicated), or the run fails. The same workload runs with one runtime on PostgreSQL and with one
runtime on the file store (durable files), side by side.

Part `growth`: how one mutate + load costs as the stored saves grow (P_stored = 1,000 -> 100,000
players' saves, each with a memory document), on PostgreSQL and on files, in one process, one thread:
the median and p99 of 2,000 mutations on random saves (medians of 3 runs), plus the disk space per save.

Run:  .venv/bin/python bench/bench_stores_scale.py                 (full: 4 x 50 x 200 over 1,000; growth to 100,000)
      .venv/bin/python bench/bench_stores_scale.py --quick         (4 x 10 x 40 over 200; growth to 10,000)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_rpc_load import free_port, scope_of  # noqa: E402  (one player-scope mapping for the load benches)
from pyruntime.client import AsyncRuntimeClient  # noqa: E402
from pyruntime.memory.state import AgentMemoryState  # noqa: E402
from pyruntime.scopes import storage_key  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, StoreBundle, open_stores  # noqa: E402
from pyruntime.stores.file_layout import (  # noqa: E402
    AGENT_MEMORY_DIR,
    MEMORY_SUFFIX,
    encode_memory_document,
    file_stem,
)
from tests.support.postgres import PostgresCluster  # noqa: E402

ROLE = "BenchScribe"
TOKEN = "bench-token-0123456789abcdef"
CALL_TIMEOUT_S = 60.0
MAX_RUN_S = 1800.0  # a run that takes longer is aborted (bounded)


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Runtime:
    """`coreai-runtime serve --no-model` on a free loopback port, on a database URL or a data folder."""

    def __init__(self, store_args: list[str]) -> None:
        self.grpc_port = free_port()
        env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.cli", "serve", "--no-model", *store_args,
             "--grpc-port", str(self.grpc_port), "--connect-port", "0", "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        assert self.process.stdout is not None
        if not self.process.stdout.readline():
            raise RuntimeError("a runtime did not start")
        self.url = f"grpc://127.0.0.1:{self.grpc_port}"
        self.killed = False

    def kill(self) -> None:
        self.killed = True
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


@dataclass
class Outcome:
    """One load run."""

    name: str
    latencies: list[float] = field(default_factory=list)
    acknowledged: dict[int, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    failovers: int = 0
    verified: str = ""

    @property
    def writes(self) -> int:
        return len(self.latencies)


async def run_load(name: str, runtimes: list[Runtime], clients: int, mutations: int, players: int,
                   kill_after: int | None, seed: int = 7) -> Outcome:
    """Every client sends its appends in order to its runtime (failing over once it is gone)."""
    outcome = Outcome(name)
    total = len(runtimes) * clients * mutations
    done = 0
    next_report = total // 10
    victim = runtimes[-1]

    async def killer() -> None:
        while done < (kill_after or 0):
            await asyncio.sleep(0.01)
        log(f"{name}: SIGKILL one runtime after {done} acknowledged writes")
        await asyncio.to_thread(victim.kill)

    async def client(home: int, index: int) -> None:
        nonlocal done, next_report
        rng = random.Random(seed * 1_000_003 + home * 1000 + index)
        target = home
        rpc = AsyncRuntimeClient(runtimes[target].url, token=TOKEN, timeout=CALL_TIMEOUT_S)
        try:
            for n in range(mutations):
                player, line = rng.randrange(players), f"r{home}c{index}m{n}"
                while True:
                    began = time.perf_counter()
                    try:
                        result = await rpc.apply_memory_tool(ROLE, {"action": "append", "content": line},
                                                             scope=scope_of(player))
                    except Exception:
                        if not runtimes[target].killed:
                            raise
                        await rpc.aclose()
                        target = next(i for i, r in enumerate(runtimes) if not r.killed)
                        rpc = AsyncRuntimeClient(runtimes[target].url, token=TOKEN, timeout=CALL_TIMEOUT_S)
                        outcome.failovers += 1
                        continue
                    if not result.success:
                        raise RuntimeError(f"append refused: {result.error}")
                    outcome.latencies.append(time.perf_counter() - began)
                    outcome.acknowledged.setdefault(player, []).append(line)
                    done += 1
                    if done >= next_report:
                        log(f"{name}: {done}/{total} writes acknowledged")
                        next_report += total // 10
                    break
        finally:
            await rpc.aclose()

    began = time.perf_counter()
    tasks = [client(r, c) for r in range(len(runtimes)) for c in range(clients)]
    if kill_after is not None:
        tasks.append(killer())
    await asyncio.wait_for(asyncio.gather(*tasks), MAX_RUN_S)
    outcome.seconds = time.perf_counter() - began
    return outcome


def verify(outcome: Outcome, bundle: StoreBundle, players: int) -> None:
    """Every acknowledged line stored exactly once, and nothing stored that no client sent; raises otherwise."""
    lost = duplicated = 0
    for player in range(players):
        expected = set(outcome.acknowledged.get(player, []))
        loaded = bundle.memory.try_load(storage_key(ROLE, scope_of(player)))
        lines = loaded.state.memory.splitlines() if loaded.status is LoadStatus.LOADED and loaded.state else []
        duplicated += len(lines) - len(set(lines))
        lost += len(expected - set(lines))
        if set(lines) - expected:
            raise AssertionError(f"{outcome.name}: a stored line no client had acknowledged")
    if lost or duplicated:
        raise AssertionError(f"{outcome.name}: {lost} lost and {duplicated} duplicated writes")
    outcome.verified = f"{sum(map(len, outcome.acknowledged.values()))} acknowledged = stored; 0 lost, 0 duplicated"


def load_part(cluster: PostgresCluster, work: Path, runtimes: int, clients: int, mutations: int, players: int,
              kill: bool) -> list[Outcome]:
    """The PostgreSQL runs (R runtimes with a kill; one runtime) and the file-store run."""
    outcomes: list[Outcome] = []
    plans = [(f"PostgreSQL, {runtimes} runtimes" + (", 1 SIGKILLed" if kill else ""), "pg", runtimes, kill),
             ("PostgreSQL, 1 runtime", "pg", 1, False),
             ("files, 1 runtime", "files", 1, False)]
    for name, kind, count, with_kill in plans:
        url = cluster.database("load") if kind == "pg" else None
        folder = work / f"files-{len(outcomes)}"
        store_args = ["--store", url] if url else ["--data-dir", str(folder)]
        log(f"{name}: starting {count} runtime(s)")
        procs = [Runtime(store_args) for _ in range(count)]
        try:
            kill_after = count * clients * mutations // 3 if with_kill else None
            outcome = asyncio.run(run_load(name, procs, clients, mutations, players, kill_after))
        finally:
            for proc in procs:
                proc.stop()
        bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None if url else folder, database_url=url)
        try:
            verify(outcome, bundle, players)
        finally:
            bundle.close()
        log(f"{name}: {outcome.writes} writes in {outcome.seconds:.1f} s, verified")
        outcomes.append(outcome)
    return outcomes


# -- growth ------------------------------------------------------------------------------------------


def _fill_database(url: str, start: int, stop: int) -> None:
    """Saves start..stop-1 straight into the tables (COPY), as the store writes them."""
    import psycopg

    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy("COPY coreai_saves (key, document, last_order) FROM STDIN") as copy:
            for player in range(start, stop):
                state = AgentMemoryState(memory=f"player {player} likes swords")
                copy.write_row((storage_key(ROLE, scope_of(player)), encode_memory_document(state), 0))


def _fill_folder(root: Path, start: int, stop: int) -> None:
    """Saves start..stop-1 as files (no fsync: setup, not the measurement)."""
    folder = root / "CoreAI" / AGENT_MEMORY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for player in range(start, stop):
        key = storage_key(ROLE, scope_of(player))
        state = AgentMemoryState(memory=f"player {player} likes swords")
        (folder / (file_stem(key) + MEMORY_SUFFIX)).write_bytes(encode_memory_document(state))


def _with_line(line: str, state: AgentMemoryState) -> AgentMemoryState:
    return state.evolve(memory=f"{state.memory}\n{line}")


def _stored_bytes(kind: str, url: str | None, root: Path) -> int:
    """Space the saves take: the store's tables with their indexes and TOAST, or the files' allocated blocks."""
    if kind == "pg":
        import psycopg

        assert url is not None
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                               "WHERE c.relkind = 'r' AND c.relname LIKE 'coreai%'").fetchone()
            assert row is not None
            return int(row[0])
    return sum(p.stat().st_blocks * 512 for p in (root / "CoreAI").rglob("*") if p.is_file())


def growth_part(cluster: PostgresCluster, work: Path, sizes: list[int], operations: int,
                repeat: int) -> list[dict]:
    """Mutate + load latency on random stored saves at each size, per store kind."""
    rows = []
    for kind in ("pg", "files"):
        url = cluster.database("growth") if kind == "pg" else None
        root = work / "growth-files"
        bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None if url else root, database_url=url)
        stored = 0
        try:
            for size in sizes:
                log(f"growth {kind}: filling to {size} saves")
                if url:
                    _fill_database(url, stored, size)
                else:
                    _fill_folder(root, stored, size)
                stored = size
                p50s, p99s = [], []
                for rep in range(repeat):  # the machine is shared: the median of several runs
                    rng = random.Random(size * 10 + rep)
                    latencies = []
                    for n in range(operations):
                        key = storage_key(ROLE, scope_of(rng.randrange(size)))
                        began = time.perf_counter()
                        bundle.memory.mutate(key, partial(_with_line, f"line {n}"))
                        assert bundle.memory.try_load(key).status is LoadStatus.LOADED
                        latencies.append(time.perf_counter() - began)
                    p50s.append(statistics.median(latencies) * 1000)
                    p99s.append(percentile(latencies, 0.99) * 1000)
                rows.append({"store": "PostgreSQL" if url else "files", "saves": size,
                             "p50_ms": statistics.median(p50s), "p99_ms": statistics.median(p99s),
                             "bytes_per_save": _stored_bytes(kind, url, root) / size})
                log(f"growth {kind} {size}: p50 {rows[-1]['p50_ms']:.2f} ms")
        finally:
            bundle.close()
            shutil.rmtree(root, ignore_errors=True)
    return rows


# -- report ------------------------------------------------------------------------------------------


def load_table(outcomes: list[Outcome]) -> str:
    lines = ["| run | writes | seconds | writes/s | p50 ms | p99 ms | failovers | verified in the store |",
             "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {o.name} | {o.writes} | {o.seconds:.1f} | {o.writes / o.seconds:.0f} | "
                     f"{statistics.median(o.latencies) * 1000:.1f} | {percentile(o.latencies, 0.99) * 1000:.1f} | "
                     f"{o.failovers} | {o.verified} |")
    return "\n".join(lines)


def growth_table(rows: list[dict]) -> str:
    lines = ["| store | stored saves | mutate+load p50 ms | p99 ms | disk bytes per save |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['store']} | {r['saves']:,} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{r['bytes_per_save']:.0f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 x 10 x 40 over 200 players; growth 1,000 -> 10,000")
    parser.add_argument("--part", choices=("load", "growth", "all"), default="all")
    parser.add_argument("--runtimes", type=int)
    parser.add_argument("--clients", type=int)
    parser.add_argument("--mutations", type=int)
    parser.add_argument("--players", type=int)
    parser.add_argument("--sizes", help="growth sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--operations", type=int, default=2000, help="growth: mutations measured per size")
    parser.add_argument("--repeat", type=int, default=3, help="growth: runs per size (medians reported)")
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args()
    quick = (4, 10, 40, 200, "1000,10000") if args.quick else (4, 50, 200, 1000, "1000,10000,100000")
    runtimes = args.runtimes or quick[0]
    clients = args.clients or quick[1]
    mutations = args.mutations or quick[2]
    players = args.players or quick[3]
    sizes = [int(s) for s in (args.sizes or quick[4]).split(",")]
    too_big = runtimes * clients * mutations > 200_000 or max(sizes) > 200_000
    if min(runtimes, clients, mutations, players) < 1 or too_big:
        parser.error("sizes must be >= 1, at most 200,000 writes and 200,000 stored saves")
    if runtimes < 2 and not args.no_kill:
        parser.error("the SIGKILL needs at least 2 runtimes (or --no-kill)")
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    cluster = PostgresCluster(durable=True, max_connections=300)
    report: dict[str, object] = {}
    try:
        if args.part in ("load", "all"):
            outcomes = load_part(cluster, work, runtimes, clients, mutations, players, not args.no_kill)
            print(f"Load: {clients} clients per runtime x {mutations} appends over {players} players' saves "
                  f"(durable PostgreSQL {cluster.bin.parent.name} and files, loopback, {os.cpu_count()} CPUs)")
            print(load_table(outcomes))
            report["load"] = {o.name: round(o.writes / o.seconds, 1) for o in outcomes}
        if args.part in ("growth", "all"):
            rows = growth_part(cluster, work, sizes, args.operations, max(1, args.repeat))
            print(f"Growth: {args.operations} mutate+load on random saves, one thread, median of {args.repeat} runs")
            print(growth_table(rows))
            report["growth"] = rows
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("reproduce: .venv/bin/python bench/bench_stores_scale.py " + " ".join(sys.argv[1:]))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
