"""Benchmark of the file store against a naive baseline in the same run.

Baseline: one JSON file per key holding memory, versions and chat, rewritten whole on every
change (temp file + fsync + rename, so it is as durable as the file store).

Measures durable memory mutations/s, chat appends/s, and the time of one append with 10, 500 and
2000 rows already stored (the file store should stay flat; the baseline grows with the file).
Medians of several runs. Run: `.venv/bin/python bench/bench_file_store.py`
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore

RUNS = 5
OPS = 40
KEY = "Teacher"
MESSAGE = "The blacksmith said the sword would be ready by dawn, and asked for 30 gold. " * 2


class NaiveStore:
    """Everything of a key in one JSON, rewritten whole (durably) on every change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def _load(self, key: str) -> dict:
        try:
            return json.loads(self._path(key).read_bytes())
        except FileNotFoundError:
            return {"memory": "", "versions": [], "chat": []}

    def _store(self, key: str, doc: dict) -> None:
        path = self._path(key)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def mutate_append_line(self, key: str, line: str) -> None:
        doc = self._load(key)
        doc["memory"] = f"{doc['memory']}\n{line}" if doc["memory"] else line
        version = {
            "Version": (doc["versions"][-1]["Version"] if doc["versions"] else 0) + 1,
            "Timestamp": int(time.time()),
            "Action": "append",
            "ContentAfter": doc["memory"],
            "Note": "n",
        }
        doc["versions"] = (doc["versions"] + [version])[-30:]
        self._store(key, doc)

    def append_chat_message(self, key: str, role: str, content: str) -> None:
        doc = self._load(key)
        doc["chat"] = (doc["chat"] + [{"role": role, "content": content, "t": int(time.time())}])[-2000:]
        self._store(key, doc)


def add_line(line: str):
    def fn(state: AgentMemoryState) -> AgentMemoryState:
        memory = f"{state.memory}\n{line}" if state.memory else line
        version = MemoryVersion(state.latest_version + 1, int(time.time()), "append", memory, "n")
        return state.evolve(memory=memory, versions=(state.versions + (version,))[-30:])

    return fn


def timed(fn, ops: int) -> float:
    """Seconds per operation of ops calls of fn(i)."""
    start = time.perf_counter()
    for i in range(ops):
        fn(i)
    return (time.perf_counter() - start) / ops


def median_runs(make_op, ops: int = OPS) -> float:
    """Median seconds per op over RUNS fresh runs; make_op(folder) returns the op for that run."""
    results = []
    for _ in range(RUNS):
        folder = Path(tempfile.mkdtemp(prefix="bench-file-store-"))
        try:
            results.append(timed(make_op(folder), ops))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(results)


def file_mutation(folder: Path):
    store = FileAgentMemoryStore(folder)
    return lambda i: store.mutate(KEY, add_line(f"fact {i}"))


def naive_mutation(folder: Path):
    store = NaiveStore(folder)
    return lambda i: store.mutate_append_line(KEY, f"fact {i}")


def file_append(existing: int):
    def make(folder: Path):
        store = FileAgentMemoryStore(folder)
        if existing:
            rows = [TranscriptEntry(TranscriptKind.USER, "user", MESSAGE, is_chat_message=True)
                    for _ in range(existing)]
            store.append_transcript(KEY, rows)
        store = FileAgentMemoryStore(folder)  # a fresh process view: reads the file once
        store.get_chat_history(KEY, 1)
        return lambda i: store.append_chat_message(KEY, "user", MESSAGE)

    return make


def naive_append(existing: int):
    def make(folder: Path):
        store = NaiveStore(folder)
        if existing:
            doc = {"memory": "", "versions": [], "chat": [{"role": "user", "content": MESSAGE, "t": 0}] * existing}
            store._store(KEY, doc)
        return lambda i: store.append_chat_message(KEY, "user", MESSAGE)

    return make


def main() -> None:
    started = time.perf_counter()
    rows = []
    file_s, naive_s = median_runs(file_mutation), median_runs(naive_mutation)
    rows.append(("memory mutations/s (durable)", 1 / file_s, 1 / naive_s))
    file_s, naive_s = median_runs(file_append(0)), median_runs(naive_append(0))
    rows.append(("chat appends/s (from empty)", 1 / file_s, 1 / naive_s))
    per_append = []
    for existing in (10, 500, 2000):
        file_s, naive_s = median_runs(file_append(existing)), median_runs(naive_append(existing))
        rows.append((f"chat appends/s at {existing} rows", 1 / file_s, 1 / naive_s))
        per_append.append((existing, file_s, naive_s))

    print(f"{'operation':<34}{'file store':>12}{'naive':>12}{'ratio':>8}")
    for name, file_rate, naive_rate in rows:
        print(f"{name:<34}{file_rate:>12.0f}{naive_rate:>12.0f}{file_rate / naive_rate:>7.2f}x")
    print()
    print(f"{'time per append':<34}{'file store':>12}{'naive':>12}")
    for existing, file_s, naive_s in per_append:
        print(f"{f'at {existing} existing rows':<34}{file_s * 1e3:>10.3f}ms{naive_s * 1e3:>10.3f}ms")
    print()
    print(f"medians of {RUNS} runs x {OPS} ops; total {time.perf_counter() - started:.1f} s")
    print("reproduce: .venv/bin/python bench/bench_file_store.py")


if __name__ == "__main__":
    main()
