"""What the load balancer costs: calls straight to a runtime vs through nginx, in one run on the same runtimes.

The scale-out deployment of the tests (tests/support/scale_out.py: two `serve` processes with the scripted model on
one throwaway PostgreSQL, nginx running docs/operations/nginx-coreai.conf, TLS on both hops). One client per path and
transport sends N memory writes (ApplyMemoryTool) and N turns (RunTask, a reply with no delay) of one conversation,
on the runtime nginx sends that conversation to, so both paths reach the same process. Rounds alternate the paths
(direct, nginx, direct, nginx, ...) so that the machine's load falls on both alike. Reported: p50 and p90 per call,
the ratio nginx/direct of the medians, and nginx's own CPU seconds per call (master and worker, from /proc).

Run:  .venv/bin/python bench/bench_balancer.py [--calls 200] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import AsyncRuntimeClient  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402
from tests.support.postgres import PostgresCluster  # noqa: E402
from tests.support.scale_out import RUNTIME_HOSTS, TOKEN, Deployment, start_deployment  # noqa: E402

ROLE = "SmartChat"
SCRIPT = {"rules": [], "default": {"reply": "Aye."}}


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its children threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nginx_cpu_s(deployment: Deployment) -> float:
    """CPU seconds of nginx's master and workers so far."""
    master = deployment.nginx.process.pid
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return sum(process_cpu_s(pid) for pid in [master, *map(int, children)])


async def conversation_on_first_runtime(deployment: Deployment, transport: str, name: str) -> AgentMemoryScope:
    """A player scope whose conversation nginx sends to the first runtime (the one the direct URLs name)."""
    async with AsyncRuntimeClient(deployment.url(transport), token=TOKEN,
                                  ca_cert=deployment.certificates.ca_cert) as client:
        for n in range(100):
            scope = AgentMemoryScope("bench", f"{name}-{n}")
            await client.load_state(ROLE, scope=scope)
            if deployment.access_lines()[-1].served_by == RUNTIME_HOSTS[0]:
                return scope
    raise RuntimeError("no conversation hashed to the first runtime in 100 tries")


async def timed_calls(url: str, ca_cert: Path, scope: AgentMemoryScope, calls: int) -> dict[str, list[float]]:
    """Seconds per memory write and per turn, one conversation, one client (its connection kept)."""
    times: dict[str, list[float]] = {"write": [], "turn": []}
    async with AsyncRuntimeClient(url, token=TOKEN, ca_cert=ca_cert) as client:
        await client.health()  # the connection (and its TLS handshake) before the clock
        for i in range(calls):
            start = time.perf_counter()
            await client.apply_memory_tool(ROLE, {"action": "append", "content": f"fact {i}"}, scope=scope)
            times["write"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await client.run_task(f"line {i}", role_id=ROLE, scope=scope)
            times["turn"].append(time.perf_counter() - start)
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))]


async def run(deployment: Deployment, calls: int, rounds: int) -> None:
    ports = {t: deployment.url(t).rsplit(":", 1)[1] for t in ("grpc", "connect")}
    site = (deployment.folder / "nginx" / "site.conf").read_text()
    runtime_ports = {"grpc": site.split(f"server {RUNTIME_HOSTS[0]}:", 1)[1].split()[0],
                     "connect": site.split(f"server {RUNTIME_HOSTS[0]}:", 2)[2].split()[0]}
    direct = {"grpc": f"grpcs://{RUNTIME_HOSTS[0]}:{runtime_ports['grpc']}",
              "connect": f"https://{RUNTIME_HOSTS[0]}:{runtime_ports['connect']}"}
    samples: dict[tuple[str, str, str], list[float]] = {}
    nginx_s, nginx_calls = 0.0, 0
    for rnd in range(rounds):
        for transport in ("grpc", "connect"):
            for path in ("direct", "nginx"):
                scope = await conversation_on_first_runtime(deployment, transport, f"{path}-{transport}-{rnd}")
                url = direct[transport] if path == "direct" else deployment.url(transport)
                before, lines = nginx_cpu_s(deployment), len(deployment.access_lines())
                times = await timed_calls(url, deployment.certificates.ca_cert, scope, calls)
                if path == "nginx":
                    nginx_s += nginx_cpu_s(deployment) - before
                    nginx_calls += len(deployment.access_lines()) - lines
                for kind, values in times.items():
                    samples.setdefault((transport, kind, path), []).extend(values)
    print(f"{calls} calls x {rounds} rounds per cell; balancer ports {ports['grpc']} (gRPC), {ports['connect']} "
          "(Connect); wall clock on this machine")
    print("| transport | call | direct p50 / p90 ms | nginx p50 / p90 ms | nginx/direct p50 |")
    print("|---|---|---|---|---|")
    for transport in ("grpc", "connect"):
        for kind in ("write", "turn"):
            d, n = samples[(transport, kind, "direct")], samples[(transport, kind, "nginx")]
            print(f"| {transport} | {kind} | {statistics.median(d) * 1e3:.2f} / {p90(d) * 1e3:.2f} | "
                  f"{statistics.median(n) * 1e3:.2f} / {p90(n) * 1e3:.2f} | "
                  f"{statistics.median(n) / statistics.median(d):.2f}x |")
    print(f"nginx CPU: {nginx_s:.2f} s for {nginx_calls} calls = {nginx_s / max(nginx_calls, 1) * 1e3:.3f} ms per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="memory writes and turns per cell and round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of direct/nginx alternation")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="coreai-bench-balancer-"))
    (folder / "script.json").write_text(json.dumps(SCRIPT))
    cluster = PostgresCluster()
    try:
        deployment = start_deployment(folder, cluster.database(), [
            "--scripted-model", str(folder / "script.json"), "--port", "0", "--memory-design", "tool"])
        try:
            asyncio.run(run(deployment, args.calls, args.rounds))
        finally:
            deployment.stop()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
