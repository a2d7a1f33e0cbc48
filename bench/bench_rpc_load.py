"""Load benchmark of the runtime's RPC transports, with verification on disk (loopback only, bounded).

N concurrent clients each send M `memory` appends (unique lines) over S scopes, rotating through the
scopes so several clients hit the same key at once; per transport (gRPC, Connect). Afterwards the
file stores are read directly: every acknowledged line must be in its scope's document exactly once
(no lost, no duplicated writes), with one version per line. Baseline in the same run: the same
workload through `MemoryTool` in-process on threads (no RPC), so the table shows what the transport
costs. `--crash` also SIGKILLs the runtime mid-run and restarts it on the same ports; clients retry
unacknowledged appends (append is idempotent for an identical line), and every acknowledged write
must be on disk.

Run:  .venv/bin/python bench/bench_rpc_load.py            (full size: 50 clients x 200 over 50 scopes)
      .venv/bin/python bench/bench_rpc_load.py --clients 8 --mutations 20 --scopes 4 --crash
Env:  BENCH_RPC_CLIENTS, BENCH_RPC_MUTATIONS, BENCH_RPC_SCOPES override the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import AsyncRuntimeClient, RuntimeCallError  # noqa: E402
from pyruntime.memory import MemoryTool  # noqa: E402
from pyruntime.scopes import AgentMemoryScope, storage_key  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores  # noqa: E402

ROLE = "BenchScribe"
TOKEN = "bench-token-0123456789abcdef"
RETRY_PAUSE_S = 0.05


@dataclass
class Outcome:
    """One run: latencies of acknowledged calls, what was acknowledged per scope, wall time."""

    name: str
    latencies: list[float] = field(default_factory=list)
    acknowledged: dict[int, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    retries: int = 0
    restarts: int = 0
    verified: str = ""

    @property
    def writes(self) -> int:
        return sum(map(len, self.acknowledged.values()))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scope_of(index: int) -> AgentMemoryScope:
    return AgentMemoryScope(tenant_id="bench", user_id=f"player-{index}")


def plan(clients: int, mutations: int, scopes: int) -> list[list[tuple[int, str]]]:
    """Per client, its (scope, unique line) appends; client c's n-th write goes to scope (c + n) % scopes."""
    return [[((c + n) % scopes, f"c{c}-m{n}") for n in range(mutations)] for c in range(clients)]


class RuntimeProcess:
    """`coreai-runtime serve --no-model` on fixed loopback ports, restartable on the same ports and data."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.grpc_port = free_port()
        self.connect_port = free_port()
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.cli", "serve", "--no-model", "--data-dir", str(self.data_dir),
             "--grpc-port", str(self.grpc_port), "--connect-port", str(self.connect_port)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        assert self.process.stdout is not None
        if not self.process.stdout.readline():
            raise RuntimeError("the runtime did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)

    def url(self, transport: str) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}" if transport == "grpc" else f"http://127.0.0.1:{self.connect_port}"


async def run_rpc(transport: str, work: list[list[tuple[int, str]]], runtime: RuntimeProcess,
                  crash_after: int | None) -> Outcome:
    """Every client sends its appends in order, retrying one until it is acknowledged."""
    outcome = Outcome(transport + (" +SIGKILL" if crash_after is not None else ""))
    done = 0
    crashed = asyncio.Event()

    async def crash_and_restart() -> None:
        while done < (crash_after or 0):
            await asyncio.sleep(0.005)
        await asyncio.to_thread(runtime.kill)
        await asyncio.to_thread(runtime.start)
        outcome.restarts += 1
        crashed.set()

    async def client(appends: list[tuple[int, str]]) -> None:
        nonlocal done
        async with AsyncRuntimeClient(runtime.url(transport), token=TOKEN, timeout=30) as rpc:
            for scope_index, line in appends:
                while True:
                    began = time.perf_counter()
                    try:
                        result = await rpc.apply_memory_tool(ROLE, {"action": "append", "content": line},
                                                             scope=scope_of(scope_index))
                    except (RuntimeCallError, OSError, Exception):  # noqa: BLE001 - runtime down: retry
                        outcome.retries += 1
                        await asyncio.sleep(RETRY_PAUSE_S)
                        continue
                    if not result.success:
                        raise RuntimeError(f"append refused: {result.error}")
                    outcome.latencies.append(time.perf_counter() - began)
                    outcome.acknowledged.setdefault(scope_index, []).append(line)
                    done += 1
                    break

    began = time.perf_counter()
    tasks = [client(appends) for appends in work]
    if crash_after is not None:
        tasks.append(crash_and_restart())
    await asyncio.gather(*tasks)
    outcome.seconds = time.perf_counter() - began
    return outcome


def run_in_process(work: list[list[tuple[int, str]]], data_dir: Path) -> Outcome:
    """Baseline: the same appends through MemoryTool on one thread per client, no RPC."""
    outcome = Outcome("in-process (no RPC)")
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)

    def client(appends: list[tuple[int, str]]) -> list[tuple[int, str, float]]:
        out = []
        for scope_index, line in appends:
            began = time.perf_counter()
            tool = MemoryTool(stores.memory, storage_key(ROLE, scope_of(scope_index)), max_memory_chars=0)
            result = tool.execute({"action": "append", "content": line})
            assert result.success, result.error
            out.append((scope_index, line, time.perf_counter() - began))
        return out

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(work)) as pool:
        results = list(pool.map(client, work))
    outcome.seconds = time.perf_counter() - began
    for rows in results:
        for scope_index, line, latency in rows:
            outcome.latencies.append(latency)
            outcome.acknowledged.setdefault(scope_index, []).append(line)
    return outcome


def verify(outcome: Outcome, data_dir: Path, scopes: int) -> None:
    """Every acknowledged line on disk exactly once per scope, one version per line; raises otherwise."""
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
    lost = duplicated = 0
    for index in range(scopes):
        expected = outcome.acknowledged.get(index, [])
        loaded = stores.memory.try_load(storage_key(ROLE, scope_of(index)))
        if loaded.status is not LoadStatus.LOADED or loaded.state is None:
            lost += len(expected)
            continue
        lines = loaded.state.memory.splitlines()
        duplicated += len(lines) - len(set(lines))
        lost += len(set(expected) - set(lines))
        if len(set(lines) - set(expected)) > 0 and not outcome.restarts:
            raise AssertionError(f"scope {index}: lines on disk that were never acknowledged")
        if loaded.state.max_memory_versions >= len(lines) and loaded.state.latest_version != len(lines):
            raise AssertionError(f"scope {index}: {loaded.state.latest_version} versions for {len(lines)} lines")
    if lost or duplicated:
        raise AssertionError(f"{outcome.name}: {lost} lost and {duplicated} duplicated writes")
    outcome.verified = "ok: 0 lost, 0 duplicated"


def table(outcomes: list[Outcome], baseline: Outcome) -> str:
    rows = [f"{'run':<22}{'writes':>8}{'seconds':>9}{'writes/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'vs base':>9}"
            f"{'retries':>9}  verified"]
    base_rate = baseline.writes / baseline.seconds
    for o in outcomes:
        lat = sorted(o.latencies)
        p50 = statistics.median(lat) * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        rate = o.writes / o.seconds
        rows.append(f"{o.name:<22}{o.writes:>8}{o.seconds:>9.2f}{rate:>10.0f}{p50:>9.2f}{p99:>9.2f}"
                    f"{rate / base_rate:>8.2f}x{o.retries:>9}  {o.verified}")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=int(os.environ.get("BENCH_RPC_CLIENTS", 50)))
    parser.add_argument("--mutations", type=int, default=int(os.environ.get("BENCH_RPC_MUTATIONS", 200)))
    parser.add_argument("--scopes", type=int, default=int(os.environ.get("BENCH_RPC_SCOPES", 50)))
    parser.add_argument("--transports", default="grpc,connect")
    parser.add_argument("--crash", action="store_true", help="also run each transport with a SIGKILL + restart")
    args = parser.parse_args()
    if min(args.clients, args.mutations, args.scopes) < 1 or args.clients * args.mutations > 200_000:
        parser.error("clients, mutations and scopes must be >= 1 (and at most 200000 writes)")
    work = plan(args.clients, args.mutations, args.scopes)
    total = args.clients * args.mutations
    outcomes: list[Outcome] = []
    root = Path(tempfile.mkdtemp(prefix="bench-rpc-"))
    try:
        baseline = run_in_process(work, root / "baseline")
        verify(baseline, root / "baseline", args.scopes)
        outcomes.append(baseline)
        runs = [(t, None) for t in args.transports.split(",")]
        if args.crash:
            runs += [(t, total // 2) for t in args.transports.split(",")]
        for transport, crash_after in runs:
            data_dir = root / f"{transport}-{'crash' if crash_after is not None else 'plain'}"
            runtime = RuntimeProcess(data_dir)
            runtime.start()
            try:
                outcome = asyncio.run(run_rpc(transport, work, runtime, crash_after))
            finally:
                runtime.stop()
            verify(outcome, data_dir, args.scopes)
            outcomes.append(outcome)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"RPC load: {args.clients} clients x {args.mutations} appends over {args.scopes} scopes "
          f"(durable file stores, loopback, {os.cpu_count()} CPUs)")
    print(table(outcomes, outcomes[0]))
    print("reproduce: .venv/bin/python bench/bench_rpc_load.py "
          f"--clients {args.clients} --mutations {args.mutations} --scopes {args.scopes}"
          + (" --crash" if args.crash else ""))
    print(json.dumps({o.name: round(o.writes / o.seconds, 1) for o in outcomes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
