"""Soak bench: 4 NPC roles talking at once to the embedded model, under a half-open connection flood (bounded).

One `coreai-runtime serve` child (the embedded SmolLM2-135M unless `--model`), started with a
desktop's file-handle limit (`--open-files`, default 1024, soft = hard so it cannot raise it).
For `--minutes`:

- one worker per NPC role streams turns back to back (alternating gRPC and Connect over the
  connections it opened first, its own player scope, a few lines of small talk); every turn has
  a client deadline (`--turn-deadline`,
  above the runtime's own turn timeout): a turn with no answer by then counts as HUNG;
- a prober asks `GET /healthz` on a NEW connection and `Orchestrator/Health` over a gRPC channel
  every `--probe-interval` seconds and records how long each answer took (target: < 200 ms);
- a flooder keeps `--flood` connections per port open that send half a request and stop (more
  than the runtime's whole file-handle limit), reopening those the runtime closes.

Prints one JSON report: turns by status, p50/p99 turn latency, hung turns (target 0), health
latency max/p99 for both probes and failed probes, the runtime's peak open files and its log size.

Run:  nice -n 10 .venv/bin/python bench/soak.py                 (2 minutes)
      nice -n 10 .venv/bin/python bench/soak.py --minutes 10    (the full soak)
      .venv/bin/python bench/soak.py --minutes 0.5 --model tests-tiny.gguf   (smoke test, any GGUF)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coreai.v1 import orchestrator_pb2 as pb  # noqa: E402
from pyruntime.client import RuntimeCallError, RuntimeClient  # noqa: E402
from pyruntime.policy import RoleMemoryConfig  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402

TOKEN = "soak-token-0123456789abcdef"
ROLES = ("Blacksmith", "Innkeeper", "Guard", "Merchant")
LINES = ("Good morning! What do you sell?", "Have you heard any rumours lately?", "My name is Alex.",
         "Remember that I like iron swords.", "What did I tell you my name was?", "Goodbye for now.")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of values, 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@dataclass
class Record:
    """Everything the threads measured (appends are atomic under the GIL)."""

    turns: list[tuple[str, float]] = field(default_factory=list)  # (status, seconds)
    hung: int = 0
    http_health: list[float] = field(default_factory=list)
    grpc_health: list[float] = field(default_factory=list)
    http_health_failed: int = 0
    grpc_health_failed: int = 0
    peak_files: int = 0
    flood_opened: int = 0
    ready: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))


def start_runtime(args: argparse.Namespace, data_dir: Path, log: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """serve in a child with a desktop's file-handle limit; its ready line."""
    model = ["--model", str(args.model)] if args.model else []
    command = [sys.executable, "-m", "pyruntime.cli", "serve", *model, "--session-only", "--grpc-port", "0",
               "--connect-port", "0", "--port", str(args.model_port), "--log-format", "json"]
    if args.threads:
        command += ["--threads", str(args.threads)]
    env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.open_files, args.open_files))

    with open(log, "w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=data_dir,
                                   preexec_fn=limit)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"the runtime did not start (exit {process.wait()}); see {log}")
    return process, json.loads(line)


def npc(role: str, index: int, urls: tuple[str, str], args: argparse.Namespace, stop: threading.Event,
        record: Record) -> None:
    """Turns of one NPC role back to back until stop, alternating the transports over kept connections.

    A game keeps its channel open; new gRPC connections are refused while a flood fills the gRPC
    port's cap (grpc core has no eviction), so clients are made before the flood starts.
    """
    scope = AgentMemoryScope(user_id=f"soak-player-{index}")
    clients = [RuntimeClient(url, token=TOKEN, timeout=args.turn_deadline) for url in urls]
    for client in clients:
        client.health()  # connect now
    record.ready.release()
    turn = 0
    try:
        while not stop.is_set():
            client, line = clients[turn % 2], LINES[turn % len(LINES)]
            outcome: list[str] = []

            def run(client: RuntimeClient = client, line: str = line, outcome: list[str] = outcome) -> None:
                try:
                    for event in client.stream_task(line, role_id=role, scope=scope,
                                                    timeout_ms=int(args.turn_timeout * 1000)):
                        if event.HasField("final"):
                            outcome.append(pb.TurnStatus.Name(event.final.status).removeprefix("TURN_STATUS_").lower())
                except RuntimeCallError as exc:
                    outcome.append(exc.code.name.lower())
                except Exception as exc:  # noqa: BLE001 - a transport failure is a result too
                    outcome.append(type(exc).__name__)

            started = time.perf_counter()
            worker = threading.Thread(target=run, daemon=True)
            worker.start()
            worker.join(args.turn_deadline + 5)
            elapsed = time.perf_counter() - started
            if worker.is_alive():
                record.hung += 1  # no answer at all by the deadline: what froze the game before
                status = "hung"
            else:
                status = outcome[-1] if outcome else "no_final"
            record.turns.append((status, elapsed))
            turn += 1
    finally:
        for client in clients:
            client.close()


def healthz(port: int) -> int:
    """GET /healthz on a new connection (plain socket: no client library cost in the figure); the status."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def probe(connect_port: int, grpc_url: str, args: argparse.Namespace, stop: threading.Event,
          record: Record) -> None:
    """Health over a new HTTP connection and over a kept gRPC channel, every probe interval."""
    with RuntimeClient(grpc_url, token=TOKEN, timeout=10) as channel:
        channel.health()
        while not stop.wait(args.probe_interval):
            started = time.perf_counter()
            try:
                if healthz(connect_port) in (200, 503):  # an answer either way; 503 says why
                    record.http_health.append(time.perf_counter() - started)
                else:
                    record.http_health_failed += 1
            except (OSError, ValueError, IndexError):
                record.http_health_failed += 1
            started = time.perf_counter()
            try:
                channel.health()
                record.grpc_health.append(time.perf_counter() - started)
            except Exception:  # noqa: BLE001 - no answer is what we count
                record.grpc_health_failed += 1


def flood(ports: tuple[int, int], args: argparse.Namespace, stop: threading.Event, record: Record) -> None:
    """Keep args.flood half-open connections per port, reopening the ones the runtime closes."""
    open_: dict[int, list[socket.socket]] = {port: [] for port in ports}
    try:
        while not stop.is_set():
            for port, sockets in open_.items():
                alive = []
                for sock in sockets:
                    try:
                        if sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                            sock.close()
                            continue
                    except BlockingIOError:
                        pass
                    except OSError:
                        sock.close()
                        continue
                    alive.append(sock)
                while len(alive) < args.flood and not stop.is_set():
                    try:
                        sock = socket.create_connection(("127.0.0.1", port), timeout=1)
                        sock.sendall(b"POST /coreai.v1.MemoryStore/LoadState HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                        alive.append(sock)
                        record.flood_opened += 1
                    except OSError:
                        break  # backlog full for a moment
                open_[port] = alive
            stop.wait(0.5)
    finally:
        for sockets in open_.values():
            for sock in sockets:
                sock.close()


def watch_files(pid: int, stop: threading.Event, record: Record) -> None:
    """The runtime's open files (Linux /proc), peak."""
    while not stop.wait(0.5):
        try:
            record.peak_files = max(record.peak_files, len(os.listdir(f"/proc/{pid}/fd")))
        except OSError:
            return


def main() -> int:
    """Run the soak; print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--model", type=Path, help="GGUF to host (default: the embedded SmolLM2-135M)")
    parser.add_argument("--model-port", type=int, default=13433)
    parser.add_argument("--threads", type=int, help="model threads (default: serve's)")
    parser.add_argument("--open-files", type=int, default=1024, help="the runtime's file-handle limit")
    parser.add_argument("--flood", type=int, default=600, help="half-open connections per port")
    parser.add_argument("--max-output-tokens", type=int, default=48)
    parser.add_argument("--turn-timeout", type=float, default=90.0, help="the runtime's turn timeout (s)")
    parser.add_argument("--turn-deadline", type=float, default=150.0, help="client deadline: later = hung (s)")
    parser.add_argument("--probe-interval", type=float, default=0.25)
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the flood's sockets live in this process
    record = Record()
    with tempfile.TemporaryDirectory(prefix="coreai-soak-") as folder:
        log = Path(folder) / "runtime.log"
        process, ready = start_runtime(args, Path(folder), log)
        grpc_url, connect_url = f"grpc://127.0.0.1:{ready['grpc_port']}", f"http://127.0.0.1:{ready['connect_port']}"
        try:
            with RuntimeClient(grpc_url, token=TOKEN, timeout=30) as client:
                for role in ROLES:
                    client.configure_role(RoleMemoryConfig(role, max_output_tokens=args.max_output_tokens))
            stop = threading.Event()
            threads = [threading.Thread(target=npc, args=(role, i, (grpc_url, connect_url), args, stop, record))
                       for i, role in enumerate(ROLES)]
            threads.append(threading.Thread(target=probe, args=(ready["connect_port"], grpc_url, args, stop, record)))
            threads.append(threading.Thread(target=flood, args=((ready["grpc_port"], ready["connect_port"]), args,
                                                                stop, record)))
            threads.append(threading.Thread(target=watch_files, args=(process.pid, stop, record)))
            began = time.monotonic()
            for thread in threads[:len(ROLES)]:
                thread.start()
            for _ in ROLES:
                record.ready.acquire()  # every NPC connected before the flood
            for thread in threads[len(ROLES):]:
                thread.start()
            stop.wait(args.minutes * 60)
            stop.set()
            for thread in threads:
                thread.join(args.turn_deadline + 30)
            duration = time.monotonic() - began
            metrics = httpx.get(f"{connect_url}/metrics", timeout=10).text
        finally:
            process.terminate()
            stopping = time.monotonic()
            try:
                exit_code: int | str = process.wait(60)
            except subprocess.TimeoutExpired:  # still report the run: a slow stop is a finding, not a crash
                process.kill()
                process.wait()
                exit_code = "killed: still running 60 s after SIGTERM"
            stop_s = round(time.monotonic() - stopping, 1)
        log_bytes = log.stat().st_size
        tracebacks = log.read_text(errors="replace").count("Traceback")

    latencies = [s for _, s in record.turns]
    by_status: dict[str, int] = {}
    for status, _ in record.turns:
        by_status[status] = by_status.get(status, 0) + 1
    ms = lambda v: round(v * 1000, 1)  # noqa: E731
    report = {
        "command": " ".join(["bench/soak.py", *sys.argv[1:]]),
        "minutes": round(duration / 60, 2),
        "model": str(args.model) if args.model else "embedded SmolLM2-135M",
        "roles": len(ROLES),
        "turns": len(record.turns),
        "turns_by_status": by_status,
        "turn_latency_s": {"p50": round(statistics.median(latencies), 2) if latencies else 0,
                           "p99": round(percentile(latencies, 0.99), 2), "max": round(max(latencies, default=0), 2)},
        "hung_turns": record.hung,
        "health_http_ms": {"probes": len(record.http_health), "failed": record.http_health_failed,
                           "p99": ms(percentile(record.http_health, 0.99)),
                           "max": ms(max(record.http_health, default=0))},
        "health_grpc_ms": {"probes": len(record.grpc_health), "failed": record.grpc_health_failed,
                           "p99": ms(percentile(record.grpc_health, 0.99)),
                           "max": ms(max(record.grpc_health, default=0))},
        "flood_connections_opened": record.flood_opened,
        "runtime_open_files_limit": args.open_files,
        "runtime_peak_open_files": record.peak_files,
        "runtime_log_bytes": log_bytes,
        "runtime_log_tracebacks": tracebacks,
        "runtime_exit_code": exit_code,
        "runtime_stop_s": stop_s,
        "metrics_turns": [line for line in metrics.splitlines() if line.startswith("coreai_turns_total")],
        "metrics_connections_closed": [line for line in metrics.splitlines()
                                       if line.startswith("coreai_connections_closed_total")],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
