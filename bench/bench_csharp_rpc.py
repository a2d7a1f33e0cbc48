"""Round-trip cost of RPCs from the Unity package's C# client, against the Python client, in one run.

One runtime without a model (`coreai-runtime serve --no-model`, real file stores) runs in its own process. The
same calls go to it from:
- C#: `CoreAI.Runtime.CoreAIRuntimeClient` (Connect over HttpClient, Mono), timed inside C# with a
  Stopwatch (pythonnet only starts each batch);
- Python: `pyruntime.client.RuntimeClient` over Connect (the same wire protocol) and over gRPC.
Operations: a memory mutation (`memory` write, durable on disk before the reply), ListVersions and
Health (no model, no disk write). Each client does WARMUP calls, then RUNS batches of CALLS; the
table shows the median and p99 of all timed calls, and each client's median relative to the Python
Connect client (the baseline).

Run:  .venv/bin/python bench/bench_csharp_rpc.py                 (3 runs x 100 calls)
      .venv/bin/python bench/bench_csharp_rpc.py --runs 5 --calls 1000
      .venv/bin/python bench/bench_csharp_rpc.py --ports CONNECT,GRPC
          (against a runtime already running with COREAI_RUNTIME_TOKEN=bench-csharp-token-0123456789abcd)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import RuntimeClient  # noqa: E402
from tools.build_csharp import DEFAULT_OUT, build_client, compile_assembly  # noqa: E402

TOKEN = "bench-csharp-token-0123456789abcd"
ROLE = "BenchScribe"
WARMUP = 20
OPERATIONS = ("mutation (memory write)", "ListVersions", "Health")

BENCH_SOURCE = r"""
using System.Diagnostics;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Bench
{
    /// <summary>Timed loops of single calls; microseconds per call.</summary>
    public static class RpcBench
    {
        public static double[] Run(CoreAIRuntimeClient client, string op, string role, int n, int offset)
        {
            RuntimeAgentMemoryStore store = client.CreateMemoryStore();
            var times = new double[n];
            var sw = new Stopwatch();
            for (int i = 0; i < n; i++)
            {
                sw.Restart();
                if (op == "mutation")
                    store.ExecuteMemoryTool(role, MemoryToolCall.Write("line " + (offset + i)));
                else if (op == "versions")
                    store.ListVersions(role);
                else
                    client.HealthAsync().GetAwaiter().GetResult();
                times[i] = sw.Elapsed.TotalMilliseconds * 1000.0;
            }
            return times;
        }
    }
}
"""


def start_runtime(data_dir: Path) -> tuple[subprocess.Popen[str], dict[str, int]]:
    """The runtime in its own process; returns it with its ports once it accepts calls."""
    env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyruntime.cli", "serve", "--no-model", "--data-dir", str(data_dir),
         "--connect-port", "0", "--grpc-port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise SystemExit("the runtime did not start")
    return proc, json.loads(line)


def load_csharp(assembly: str = "CoreAI.Bench.Rpc", text: str = BENCH_SOURCE) -> None:
    """Build Core and a bench helper assembly from C# text, start Mono, reference both."""
    os.environ["MONO_THREADS_SUSPEND"] = "preemptive"
    core = build_client()
    source = DEFAULT_OUT / "bench" / f"{assembly}.cs"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text)
    helper = compile_assembly(assembly, [source], DEFAULT_OUT, [core])
    import warnings

    import pythonnet

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # clr_loader's note about Mono < 6.12
        pythonnet.load("mono")
    import clr

    for dll in (DEFAULT_OUT / "Newtonsoft.Json.dll", core, helper):
        clr.AddReference(str(dll))


def csharp_batches(url: str, runs: int, calls: int) -> dict[str, list[float]]:
    """Microseconds per call of each operation from the C# client."""
    from CoreAI.Ai import AgentMemoryPolicy
    from CoreAI.Bench import RpcBench
    from CoreAI.Runtime import CoreAIRuntimeClient

    client = CoreAIRuntimeClient(url, TOKEN, AgentMemoryPolicy())
    out: dict[str, list[float]] = {op: [] for op in OPERATIONS}
    try:
        for op, key in zip(OPERATIONS, ("mutation", "versions", "health"), strict=True):
            RpcBench.Run(client, key, ROLE, WARMUP, 0)
            for run in range(runs):
                out[op] += list(RpcBench.Run(client, key, ROLE, calls, (run + 1) * calls))
    finally:
        client.Dispose()
    return out


def python_batches(url: str, runs: int, calls: int) -> dict[str, list[float]]:
    """Microseconds per call of each operation from the Python client at url."""
    out: dict[str, list[float]] = {op: [] for op in OPERATIONS}
    with RuntimeClient(url, token=TOKEN, timeout=30) as client:
        ops: dict[str, Callable[[int], object]] = {
            OPERATIONS[0]: lambda i: client.apply_memory_tool(ROLE, {"action": "write", "content": f"line {i}"}),
            OPERATIONS[1]: lambda i: client.list_versions(ROLE),
            OPERATIONS[2]: lambda i: client.health(),
        }
        for op, call in ops.items():
            for i in range(WARMUP):
                call(i)
            for run in range(runs):
                for i in range(calls):
                    start = time.perf_counter()
                    call((run + 1) * calls + i)
                    out[op].append((time.perf_counter() - start) * 1e6)
    return out


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * len(ordered))) - 1)]


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--ports", help="CONNECT,GRPC of a runtime already running (default: start one)")
    args = parser.parse_args()
    load_csharp()
    with tempfile.TemporaryDirectory(prefix="bench-csharp-rpc-") as tmp:
        if args.ports:
            proc = None
            connect_port, grpc_port = (int(p) for p in args.ports.split(","))
            ports = {"connect_port": connect_port, "grpc_port": grpc_port}
        else:
            proc, ports = start_runtime(Path(tmp))
        try:
            connect = f"http://127.0.0.1:{ports['connect_port']}"
            grpc = f"grpc://127.0.0.1:{ports['grpc_port']}"
            results = {
                "Python client, Connect (baseline)": python_batches(connect, args.runs, args.calls),
                "C# client, Connect": csharp_batches(connect, args.runs, args.calls),
                "Python client, gRPC": python_batches(grpc, args.runs, args.calls),
            }
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(10)
    baseline = results["Python client, Connect (baseline)"]
    print(f"\nRPC round trip, {args.runs} runs x {args.calls} calls per client and operation (microseconds)\n")
    print(f"{'operation':<26} {'client':<36} {'median':>9} {'p99':>9} {'x baseline':>11}")
    for op in OPERATIONS:
        base = statistics.median(baseline[op])
        for name, by_op in results.items():
            med = statistics.median(by_op[op])
            print(f"{op:<26} {name:<36} {med:>9.0f} {p99(by_op[op]):>9.0f} {med / base:>11.2f}")
    print("\nReproduce: .venv/bin/python bench/bench_csharp_rpc.py "
          f"--runs {args.runs} --calls {args.calls}" + (f" --ports {args.ports}" if args.ports else ""))
    sys.stdout.flush()
    os._exit(0)  # skip pythonnet's slow shutdown


if __name__ == "__main__":
    sys.exit(main())
