"""Hostile saves bench: links, FIFOs, devices, sockets, huge and corrupt files in a real data folder.

One `coreai-runtime serve --no-model` child on a data folder where a hostile local process has put, in
place of the saves of `--roles` roles each: a link out of the folder (to a file holding a secret), a
dangling link (to a file that must never appear), a FIFO, a device node (`/dev/zero`'s numbers; a link
to `/dev/zero` when mknod is not allowed), a socket, a sparse 8 GB file, and a history file whose lines
are half garbage. Then, on gRPC and on Connect:

- every hostile save is called once with each MemoryStore RPC that touches it (LoadState, the memory
  tool's read and append, SaveSummary is left out: it heals), with a deadline of `--deadline` s;
  an answer is **wrong** unless it is LoadState FAILED / FAILED_PRECONDITION with a reason, in time,
  without the outside secret;
- meanwhile a writer keeps appending to and reading other saves: its latencies (p50, p99, max) show
  whether the others keep answering, and every acknowledged append is checked afterwards (**lost**:
  acknowledged but not in the history);
- the corrupt histories get one append each: **lost** also counts every one whose original bytes are
  not byte-for-byte in its `Quarantine/` copy;
- afterwards nothing outside the folder may have changed or appeared (**outside changed**).

Prints one JSON report. Run:  nice -n 10 .venv/bin/python bench/bench_hostile_saves.py [--roles 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import RuntimeCallError, RuntimeClient  # noqa: E402
from pyruntime.stores import LoadResult, LoadStatus  # noqa: E402
from tests.support.hostile_files import make_outside, outside_state, plant  # noqa: E402

TOKEN = "hostile-bench-token-0123456789"
SECRET = "outside secret"  # the text of tests.support.hostile_files.SECRET
KINDS = ("link", "dangling-link", "fifo", "device", "socket", "oversized")
SUFFIXES = (".json", ".history.jsonl")
CORRUPT = (b'{"k":0,"r":"user","c":"I am Alex","t":1,"o":1,"m":true}\n' + b"\x00\xff garbage \xfe\n" * 3
           + b'{"k":1,"r":"assistant","c":"Hello Alex","t":2,"o":2,"m":true}\n')


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of values, 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def hostile_calls(client: RuntimeClient, role: str) -> list[tuple[str, Callable[[], object]]]:
    """Each MemoryStore RPC that touches a save, through the public client, as (name, call)."""
    return [
        ("LoadState", partial(client.load_state, role)),
        ("ApplyMemoryTool read", partial(client.apply_memory_tool, role, {"action": "read"})),
        ("ApplyMemoryTool append", partial(client.apply_memory_tool, role, {"action": "append", "content": "x"})),
        ("GetChatHistory", partial(client.get_chat_history, role)),
        ("AppendChatMessage", partial(client.append_chat_message, role, "user", "x", persist=True)),
        ("LoadSummary", partial(client.load_summary, role)),
        ("ExportSnapshot", partial(client.export_snapshot, role_ids=[role])),
    ]


def attack(url: str, roles: list[str], deadline: float) -> dict[str, Any]:
    """Every hostile save called once per RPC; counts of tried and wrong answers, and the slowest."""
    tried = wrong = 0
    slowest = 0.0
    examples: list[str] = []
    with RuntimeClient(url, token=TOKEN, timeout=deadline) as client:
        for role in roles:
            calls = hostile_calls(client, role)
            for rpc, call in calls:
                tried += 1
                start = time.perf_counter()
                ok, said = False, ""
                try:
                    answer = call()
                    said = str(answer)
                    ok = (isinstance(answer, LoadResult) and answer.status == LoadStatus.FAILED
                          and bool(answer.reason))
                except RuntimeCallError as exc:
                    said = str(exc)
                    ok = exc.code.name == "FAILED_PRECONDITION" and len(said) > 20
                took = time.perf_counter() - start
                slowest = max(slowest, took)
                if not ok or took > deadline or SECRET in said:
                    wrong += 1
                    if len(examples) < 5:
                        examples.append(f"{rpc} {role}: {said[:160]}")
    return {"tried": tried, "wrong": wrong, "slowest_s": round(slowest, 3), "wrong_examples": examples}


def writer(url: str, stop: threading.Event, record: dict[str, Any]) -> None:
    """Append to and read other saves until stop; latencies and acknowledged rows."""
    with RuntimeClient(url, token=TOKEN, timeout=30) as client:
        i = 0
        while not stop.is_set():
            role = f"Fine{i % 8}"
            start = time.perf_counter()
            try:
                client.append_chat_message(role, "user", f"row {i}", persist=True)
                record["acked"].setdefault(role, []).append(f"row {i}")
                client.get_chat_history(role)
                record["latencies"].append(time.perf_counter() - start)
            except RuntimeCallError as exc:
                record["failed"].append(str(exc)[:120])
            i += 1


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="coreai-hostile-") as folder:
        base = Path(folder)
        data, outside = base / "data", make_outside(base)
        memory_dir = data / "CoreAI" / "AgentMemory"
        summaries = data / "CoreAI" / "ConversationSummaries"
        for d in (memory_dir, summaries):
            d.mkdir(parents=True)
        hostile: list[str] = []
        for kind in KINDS:
            for n in range(args.roles):
                role = f"{kind.replace('-', '')}{n}"
                hostile.append(role)
                for suffix in SUFFIXES:
                    plant(memory_dir / (role + suffix), kind, outside)
                plant(summaries / (role + ".json"), kind, outside)
        corrupt = [f"Corrupt{n}" for n in range(args.roles)]
        for role in corrupt:
            (memory_dir / (role + ".history.jsonl")).write_bytes(CORRUPT)
        before = outside_state(outside)

        env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "pyruntime.cli", "serve", "--no-model", "--data-dir", str(data),
                   "--grpc-port", "0", "--connect-port", "0", "--log-format", "json"]
        log = base / "serve.log"
        with open(log, "w") as stderr:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        try:
            assert process.stdout is not None
            ready = json.loads(process.stdout.readline() or "{}")
            if not ready:
                raise SystemExit(f"serve did not start (exit {process.wait()}); see {log}")
            urls = {"grpc": f"grpc://127.0.0.1:{ready['grpc_port']}",
                    "connect": f"http://127.0.0.1:{ready['connect_port']}"}
            report: dict[str, Any] = {"hostile_saves": len(hostile), "kinds": list(KINDS)}
            record: dict[str, Any] = {"acked": {}, "latencies": [], "failed": []}
            stop = threading.Event()
            background = threading.Thread(target=writer, args=(urls["connect"], stop, record))
            background.start()
            try:
                for transport, url in urls.items():
                    report[transport] = attack(url, hostile, args.deadline)
            finally:
                stop.set()
                background.join(60)
            report["tried"] = sum(report[t]["tried"] for t in urls)
            report["wrong"] = sum(report[t]["wrong"] for t in urls)
            report["lost"] = report["outside_changed"] = None  # until checked below
            if process.poll() is not None:
                report["serve_alive"] = False  # the attack took the runtime down: nothing left to check
                return report
            lost = 0
            with RuntimeClient(urls["grpc"], token=TOKEN, timeout=30) as client:
                for role, rows in record["acked"].items():
                    have = [message.content for message in client.get_chat_history(role)]
                    lost += sum(1 for row in rows if row not in have)
                kept = 0
                quarantine = data / "CoreAI" / "Quarantine"
                for role in corrupt:
                    client.append_chat_message(role, "user", "after", persist=True)
                    # The append keeps the unreadable file aside first, as `Quarantine/<role>.<time>.history.jsonl`.
                    copies = sorted(quarantine.glob(f"{role}.*.history.jsonl")) if quarantine.is_dir() else []
                    if any(copy.read_bytes() == CORRUPT for copy in copies):
                        kept += 1
                    else:
                        lost += 1
            latencies = record["latencies"]
            report["other_saves"] = {
                "append_and_read_calls": len(latencies), "failed": len(record["failed"]),
                "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
                "p99_ms": round(1000 * percentile(latencies, 0.99), 1),
                "max_ms": round(1000 * max(latencies, default=0.0), 1),
            }
            report["corrupt_histories_kept_aside"] = f"{kept}/{len(corrupt)}"
            report["lost"] = lost
            after = outside_state(outside)
            report["outside_changed"] = sum(1 for k in set(before) | set(after) if before.get(k) != after.get(k))
            report["serve_alive"] = process.poll() is None
            return report
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roles", type=int, default=6, help="hostile saves per kind (default 6)")
    parser.add_argument("--deadline", type=float, default=10.0, help="deadline of each call, seconds (default 10)")
    report = run(parser.parse_args())
    print(json.dumps(report, indent=2))
    clean = report.get("serve_alive") and not report["wrong"] and not report["lost"] and not report["outside_changed"]
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
