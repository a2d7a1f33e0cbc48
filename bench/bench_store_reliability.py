"""Benchmark of the stores' reliability rules, each against a baseline run in the same process.

1. ImportSnapshot of N roles (memory, one chat row, a summary each): the batched, parallel import
   against the one-role-at-a-time path (every rename followed by its own folder fsync, in series —
   what a 3000-role import did before, ~20 s).
2. Process memory per player: tracemalloc growth after 10,000 players each get a lookup and one
   chat append, with the bounded per-key cache against an unbounded one (the old behaviour: +11.8 KB
   per player touched, never freed).
3. Lock files left by 1000 lookups of different saves (reads take no file lock now), and by 1000 writes.

Import times are medians of several runs.
Run: `nice -n 10 .venv/bin/python bench/bench_store_reliability.py [--roles 3000]`
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    RoleSnapshot,
    ScopeSnapshot,
    TranscriptEntry,
    TranscriptKind,
    import_scope_snapshot,
    open_stores,
)
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.persistence import StoreBundle

SCOPE = AgentMemoryScope(user_id="alex")


def snapshot_of(n: int) -> ScopeSnapshot:
    roles = [RoleSnapshot(f"Role{i}", None, AgentMemoryState(memory=f"fact {i}"),
                          [TranscriptEntry(TranscriptKind.USER, "user", f"hi {i}", timestamp=1, is_chat_message=True)],
                          f"summary {i}") for i in range(n)]
    return ScopeSnapshot(SCOPE, roles, 1)


def import_batched(folder: Path, snapshot: ScopeSnapshot) -> float:
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, folder)
    start = time.perf_counter()
    import_scope_snapshot(bundle, snapshot)
    return time.perf_counter() - start


def import_one_by_one(folder: Path, snapshot: ScopeSnapshot) -> float:
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, folder)
    start = time.perf_counter()
    for role in snapshot.roles:  # a one-role snapshot takes the unbatched, sequential path
        import_scope_snapshot(bundle, ScopeSnapshot(snapshot.scope, [role], snapshot.exported_at))
    return time.perf_counter() - start


def median_time(fn, snapshot: ScopeSnapshot, runs: int) -> float:
    times = []
    for _ in range(runs):
        folder = Path(tempfile.mkdtemp(prefix="coreai-bench-"))
        try:
            times.append(fn(folder, snapshot))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(times)


def memory_per_player(players: int, max_cached_keys: int) -> float:
    """Bytes of Python heap kept per player after each got a lookup and one chat append.

    Heap, not disk, is measured: the files go to /dev/shm where there is one, so 10,000 durable
    appends do not take minutes of fsync.
    """
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="coreai-bench-", dir=shm if shm.is_dir() else None))
    try:
        root = folder / "CoreAI"
        index = IdentityIndex(root)
        bundle = StoreBundle(
            FileAgentMemoryStore(root, identities=index, max_cached_keys=max_cached_keys),
            FileConversationSummaryStore(root, identities=index, max_cached_keys=max_cached_keys),
            AgentMemoryPersistenceMode.PERSISTENT)
        warm = bundle.scoped(AgentMemoryScope(user_id="warm-up"))
        warm.append_chat_message("Teacher", "user", "hello")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(players):
            view = bundle.scoped(AgentMemoryScope(user_id=f"player-{i}"))
            view.try_load("Teacher")
            view.load_summary("Teacher")
            view.append_chat_message("Teacher", "user", "Good morning, blacksmith!")
            view.get_chat_history("Teacher")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return (after - before) / players
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def lock_files(lookups: int) -> tuple[int, int]:
    folder = Path(tempfile.mkdtemp(prefix="coreai-bench-"))
    try:
        bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, folder)
        for i in range(lookups):
            view = bundle.scoped(AgentMemoryScope(user_id=f"p{i}"))
            view.try_load("Teacher")
            view.get_chat_history("Teacher")
            view.load_summary("Teacher")
        after_reads = len(list(folder.rglob("*.lock")))
        for i in range(lookups):
            bundle.scoped(AgentMemoryScope(user_id=f"p{i}")).append_chat_message("Teacher", "user", "x")
        return after_reads, len(list(folder.rglob("*.lock")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--roles", type=int, default=3000)
    parser.add_argument("--players", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--part", choices=("all", "import", "memory", "locks"), default="all")
    args = parser.parse_args()

    if args.part in ("all", "import"):
        snapshot = snapshot_of(args.roles)
        batched = median_time(import_batched, snapshot, args.runs)
        serial = median_time(import_one_by_one, snapshot, args.runs)
        print(f"ImportSnapshot of {args.roles} roles: {batched:.2f} s batched+parallel vs {serial:.2f} s one by one "
              f"(x{serial / batched:.1f} faster); medians of {args.runs}", flush=True)
    if args.part in ("all", "memory"):
        memory_report(args.players)
    if args.part in ("all", "locks"):
        reads, writes = lock_files(1000)
        print(f"lock files after 1000 lookups of different saves: {reads}; after also writing each: {writes}")
    print("reproduce: nice -n 10 .venv/bin/python bench/bench_store_reliability.py [--part import|memory|locks]")


def memory_report(players: int) -> None:
    """Heap per player with the bounded per-key cache against an unbounded one."""
    # Heap bytes are deterministic enough for one run each.
    bounded = memory_per_player(players, 1024)
    unbounded = memory_per_player(players, 10**9)
    print(f"memory per player touched ({players} players): {bounded / 1024:.2f} KB with the bounded cache "
          f"(1024 keys) vs {unbounded / 1024:.2f} KB unbounded -> {bounded * 10000 / 2**20:.1f} MB vs "
          f"{unbounded * 10000 / 2**20:.1f} MB per 10,000 players", flush=True)


if __name__ == "__main__":
    main()
