"""Benchmark a headless game server: N players talking through a Connect or gRPC client to one `serve` process.

`serve --llm-url` against the recording test engine (`pyruntime/testing/engine.py`: every request served at once,
first token after 28 ms, 24 tokens 4 ms apart; served by `testing/minimal_http.py`, so the engine's own HTTP
server takes little of the machine), or against the hosted engine (`--engine hosted`: the embedded SmolLM2-135M
on this CPU). Each player is one conversation of the built-in `SmartChat` role (memory tool on, history saved to
files), streaming its turns (`StreamTask`) over gRPC or Connect, with 1-2 s (seeded) between a reply and its next
line; players start spread over the first pause. The players' client is the public async client (`--client sdk`)
or, for Connect, `raw_connect.py` (`--client raw`: a hand-parsed HTTP/1.1 stream, a fraction of the CPU per turn).

Reported per run: turns/s, beside the players' pace (what the turns/s would be if every reply took the engine's
time only: the players' own pauses set it); the player's first token p50/p90/p99 and the part the runtime adds (the
player's first token minus the engine's own, matched per turn through the line's marker; test engine only), and of
that the part `serve` measured on its own clock (`coreai_turn_first_token_added_seconds`: without the players' and
the engine's event loops, whose lag on a small machine lands in the players' figure; the players' loop lag p99 is
reported too); the runtime-added p99 apart for the turns begun while players still join (every player's first line
comes within the first pause: 200 first lines in 2 s, each dearer than a later one) and for the turns after; turns
refused
(with the retry hint they carried); `serve` CPU seconds per turn (utime + stime of the process from /proc, the
figure to trust on a shared machine: wall-clock latencies move with whatever else runs), the cores `serve` kept
busy and what the players' clients and the engine cost beside it (on two cores they compete with `serve`: when
`serve` is far from a core's worth and turns/s stays below the players' pace, the machine is the limit, not the
runtime); `serve`'s RSS per player; and two checks: nothing lost (every acknowledged turn's line in its player's
saved history, once) and no request mixing two players (every engine request carries one player's markers only,
and one conversation identity per player, a different one for each).

`--pin` puts `serve` on every CPU but the last and the players and the engine on the last, so that on a small
machine the load generator does not take `serve`'s cores (the runtime-added latency is then `serve`'s own, up to
what the cores left to it carry). `--code-root DIR` runs `serve` from another checkout (e.g. `git archive main |
tar -x -C /tmp/main`): the same run measures the code before and after a change, which is the comparison to trust.

Run:  .venv/bin/python bench/bench_players.py --players 1 16 100 200 --transports grpc connect
      .venv/bin/python bench/bench_players.py --players 100 200 --transports connect --client raw --pin
      .venv/bin/python bench/bench_players.py --players 16 --code-root /tmp/main --turns 8   (before/after CPU)
      .venv/bin/python bench/bench_players.py --engine hosted --players 1 4 --turns 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.raw_connect import RawConnectPlayer, RefusedError  # noqa: E402
from pyruntime.client import AsyncRuntimeClient, RuntimeCallError  # noqa: E402
from pyruntime.client._messages import affinity, task_request  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402
from pyruntime.testing.engine import LatencyModel  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402

ROLE = "SmartChat"
REPLY_S = LatencyModel().first_token_s + (LatencyModel().tokens - 1) * LatencyModel().token_gap_s  # the test engine's
TOKEN = "bench-players-token-0123456789"
MARKER = r"P\d{4}T\d{4}"
LINES = ["I found a ring near the mill.", "Do you sell rope?", "The bridge is out again.",
         "My horse needs new shoes.", "Have you seen my sister?", "What does the mayor want?"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def own_cpu_seconds() -> float:
    """utime + stime of this process (the players' clients)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def line_of(player: int, turn: int) -> str:
    """A player's line, marked `P<player>T<turn>` so the engine's records tell whose it is."""
    return f"P{player:04d}T{turn:04d} {LINES[(player + turn) % len(LINES)]}"


class Process:
    """A child process that prints one JSON line when ready."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None,
                 cpus: set[int] | None = None) -> None:
        def pinned() -> None:
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})}, preexec_fn=pinned)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{argv[2:4]} did not start")
        self.ready: dict[str, Any] = json.loads(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@dataclass
class Run:
    """What one run measured."""

    name: str
    players: int
    ttft: list[float] = field(default_factory=list)  # the player's first token, s
    added: list[float] = field(default_factory=list)  # of which the runtime's, s
    added_joining: list[float] = field(default_factory=list)  # the runtime's, turns begun while players still joined
    added_joined: list[float] = field(default_factory=list)  # the runtime's, turns begun after every first line
    began: dict[str, tuple[float, int]] = field(default_factory=dict)  # line marker -> (when sent, line number)
    acknowledged: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    refused: int = 0
    retry_hints: int = 0
    failed: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    rss_per_player: float = 0.0
    lost: int = 0
    mixed: int = 0
    identities: str = ""
    engine_peak: int = 0
    others_cpu_s: float = 0.0  # the players' client (this process) and the test engine, same run
    client_lag: list[float] = field(default_factory=list)  # the players' event loop: how late a 5 ms sleep woke, s
    serve_added: dict[float, float] = field(default_factory=dict)  # serve's own share by its clock: quantile -> s
    paused: dict[int, float] = field(default_factory=dict)  # each player's own pauses (start and between lines), s
    reply_s: float = 0.0  # the engine's time for one reply where known (the test engine's), else 0

    @property
    def turns(self) -> int:
        return sum(map(len, self.acknowledged.values()))


def players_pace(run: Run) -> float:
    """The turns/s the players would make if every reply took the engine's time only: their pauses, not the
    runtime, set the run's length (the slowest player's pauses and replies end it)."""
    longest = max((run.paused[p] + len(lines) * run.reply_s for p, lines in run.acknowledged.items()), default=0.0)
    return run.turns / longest if longest else float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


class Refused(Exception):
    """A turn the runtime refused, with its retry hint (None: none)."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__("refused")
        self.retry_after = retry_after


class SdkPlayer:
    """A player on the public async client (gRPC or Connect)."""

    def __init__(self, url: str) -> None:
        self.client = AsyncRuntimeClient(url, token=TOKEN, timeout=120)

    async def turn(self, line: str, scope: AgentMemoryScope) -> tuple[float | None, Any]:
        """(when its first text came, its final result); Refused when the runtime refused it."""
        first, final = None, None
        try:
            async for event in self.client.stream_task(line, role_id=ROLE, scope=scope, max_output_tokens=32):
                if first is None and event.HasField("text_delta"):
                    first = time.time()
                if event.HasField("final"):
                    final = event.final
        except RuntimeCallError as exc:
            raise Refused(getattr(exc, "retry_after", None)) from None
        return first, final

    async def close(self) -> None:
        await self.client.aclose()


class RawPlayer:
    """A player on `raw_connect.RawConnectPlayer`: Connect only, a fraction of the public client's CPU per turn."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.connection = RawConnectPlayer(host, int(port), TOKEN)

    async def turn(self, line: str, scope: AgentMemoryScope) -> tuple[float | None, Any]:
        """(when its first text came, its final result); Refused when the runtime refused it."""
        first: list[float] = []

        def seen(event: Any) -> None:
            if not first and event.HasField("text_delta"):
                first.append(time.time())

        request = task_request(line, ROLE, scope, None, {"max_output_tokens": 32})
        try:
            outcome = await self.connection.stream_task(request, affinity(request), seen)
        except RefusedError as exc:
            raise Refused(exc.retry_after_s) from None
        return (first[0] if first else None), outcome.final

    async def close(self) -> None:
        self.connection.close()


async def play(url: str, run: Run, player: int, turns: int, first_token: dict[str, float], think: tuple[float, float],
               seed: int, raw: bool) -> None:
    """One player: `turns` lines, each after a pause; a refused line is sent again after its retry hint."""
    rng = random.Random(seed * 100_003 + player)
    scope = AgentMemoryScope(tenant_id="bench", user_id=f"player-{player:04d}")
    client = RawPlayer(url) if raw else SdkPlayer(url)
    try:
        pause = rng.uniform(0, think[1])
        run.paused[player] = pause
        await asyncio.sleep(pause)
        for turn in range(turns):
            line = line_of(player, turn)
            while True:
                began = time.time()
                try:
                    first, final = await client.turn(line, scope)
                except Refused as refused:
                    run.refused += 1
                    run.retry_hints += refused.retry_after is not None
                    await asyncio.sleep(refused.retry_after if refused.retry_after is not None else 0.5)
                    continue
                break
            if final is None or final.status != 1 or first is None:  # TURN_STATUS_OK
                run.failed += 1
            else:
                run.acknowledged[player].append(line)
                run.ttft.append(first - began)
                first_token[line.split()[0]] = first - began
                run.began[line.split()[0]] = (began, turn)
            pause = rng.uniform(*think)
            run.paused[player] += pause
            await asyncio.sleep(pause)
    finally:
        await client.close()


async def loop_lag(lags: list[float]) -> None:
    """How late this process's event loop wakes from a 5 ms sleep, until cancelled: a player's first token is
    stamped on this loop, so its lag is in the player's (and the runtime-added) figures though it is not serve's."""
    while True:
        began = time.perf_counter()
        await asyncio.sleep(0.005)
        lags.append(time.perf_counter() - began - 0.005)


def serve_share(connect_port: int) -> dict[float, float]:
    """p50/p90/p99 of what serve added to first tokens by its own clock (its histogram, interpolated within buckets
    as Prometheus' histogram_quantile does): the runtime-added figure without the players' and the engine's loops."""
    text = httpx.get(f"http://127.0.0.1:{connect_port}/metrics", timeout=30).text
    buckets = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(
        r'^coreai_turn_first_token_added_seconds_bucket\{le="([^"+]+)"\} (\S+)$', text, re.M)]
    total = buckets[-1][1] if buckets else 0.0
    shares: dict[float, float] = {}
    for q in (0.5, 0.9, 0.99):
        rank, below, low = q * total, 0.0, 0.0
        for bound, count in buckets:
            if count >= rank and total:
                shares[q] = low + (bound - low) * (rank - below) / max(count - below, 1e-9)
                break
            below, low = count, bound
    return shares


def check_engine(run: Run, records: list[dict[str, Any]], first_token: dict[str, float]) -> None:
    """No request mixing two players, one identity per player; the runtime's share of each first token."""
    identity: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    joined = max((sent for sent, turn in run.began.values() if turn == 0), default=0.0)  # the last first line
    for record in records:
        players = {m[:5] for m in record["markers"]}
        if len(players) > 1:
            run.mixed += 1
        for player in players:
            identity[player].add((record["user"], record["conversation"]))
        for marker in record["last_user_markers"]:
            if marker in first_token and record["first_token"] is not None:
                engine_s = record["first_token"] - record["arrived"]
                run.added.append(max(0.0, first_token.pop(marker) - engine_s))
                (run.added_joined if run.began[marker][0] > joined else run.added_joining).append(run.added[-1])
    ids = [next(iter(v)) for v in identity.values() if len(v) == 1]
    one_each = len(ids) == len(identity)
    distinct = len(set(ids)) == len(ids)
    carried = all(u and c for u, c in ids)
    if not carried:
        run.identities = "not sent"
    else:
        run.identities = "one per player, distinct" if one_each and distinct else "MIXED"


async def verify_saved(url: str, run: Run) -> None:
    """Every acknowledged line in its player's saved history, exactly once."""
    async with AsyncRuntimeClient(url, token=TOKEN, timeout=120) as client:
        for player, lines in run.acknowledged.items():
            scope = AgentMemoryScope(tenant_id="bench", user_id=f"player-{player:04d}")
            history = await client.get_chat_history(ROLE, scope=scope)
            said = [m.content for m in history if m.role == "user"]
            run.lost += sum(1 for line in lines if said.count(line) != 1)


def start_serve(code_root: Path, data_dir: Path, engine_url: str | None, extra: list[str],
                cpus: set[int] | None = None) -> Process:
    argv = [sys.executable, "-m", "pyruntime.cli", "serve", "--data-dir", str(data_dir),
            "--grpc-port", str(free_port()), "--connect-port", str(free_port()), "--log-level", "warning"]
    argv += ["--llm-url", engine_url] if engine_url else ["--port", str(free_port())]
    env = {"COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(code_root)}
    return Process(argv + extra, code_root, env, cpus)


def one_run(args: argparse.Namespace, code_root: Path, label: str, players: int, transport: str) -> Run:
    run = Run(f"{label} {transport}", players, reply_s=REPLY_S if args.engine == "test" else 0.0)
    work = Path(tempfile.mkdtemp(prefix="bench-players-"))
    engine = None
    every_cpu = os.sched_getaffinity(0)
    if args.pin:  # this process (the players) and the engine it starts on the last CPU, serve on the others
        os.sched_setaffinity(0, {max(every_cpu)})
    try:
        if args.engine == "test":
            engine = Process([sys.executable, "-m", "pyruntime.testing.engine", "--marker", MARKER,
                              "--http", "minimal"], ROOT, {"PYTHONPATH": str(ROOT)})
        serve = start_serve(code_root, work / "data", engine.ready["base_url"] if engine else None, args.serve_arg,
                            every_cpu - {max(every_cpu)} if args.pin else None)
        try:
            url = (f"grpc://127.0.0.1:{serve.ready['grpc_port']}" if transport == "grpc"
                   else f"http://127.0.0.1:{serve.ready['connect_port']}")
            spy = None
            if args.profile is not None:  # py-spy's collapsed stacks of serve while the players play
                args.profile.mkdir(parents=True, exist_ok=True)
                out = args.profile / f"{label}-{transport}-{players}.txt"
                spy = subprocess.Popen(["py-spy", "record", "-p", str(serve.pid), "-r", "250", "-f", "raw",
                                        "-o", str(out), "--nonblocking", *(["--gil"] if args.profile_gil else [])],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rss0, cpu0 = rss_bytes(serve.pid), cpu_seconds(serve.pid)
            others0 = own_cpu_seconds() + (cpu_seconds(engine.pid) if engine else 0.0)
            first_token: dict[str, float] = {}
            began = time.perf_counter()

            async def everyone() -> None:
                probe = asyncio.create_task(loop_lag(run.client_lag))
                await asyncio.gather(*[play(url, run, p, args.turns, first_token, tuple(args.think_s), args.seed,
                                            args.client == "raw") for p in range(players)])
                probe.cancel()

            asyncio.run(everyone())
            run.seconds = time.perf_counter() - began
            run.cpu_s = cpu_seconds(serve.pid) - cpu0
            run.others_cpu_s = own_cpu_seconds() + (cpu_seconds(engine.pid) if engine else 0.0) - others0
            run.rss_per_player = (rss_bytes(serve.pid) - rss0) / players
            run.serve_added = serve_share(serve.ready["connect_port"])
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes what it has
                spy.wait(30)
            asyncio.run(verify_saved(url, run))
        finally:
            serve.stop()
        if engine is not None:
            root = engine.ready["base_url"].removesuffix("/v1")
            recorded = httpx.get(root + "/coreai/recorded", timeout=60).json()
            run.engine_peak = recorded["peak"]
            check_engine(run, recorded["requests"], first_token)
    finally:
        if engine is not None:
            engine.stop()
        shutil.rmtree(work, ignore_errors=True)
        os.sched_setaffinity(0, every_cpu)
    return run


def row(run: Run) -> str:
    cpu = run.cpu_s / run.turns * 1000 if run.turns else float("nan")
    share = " / ".join(f"{run.serve_added[q] * 1000:.1f}" if q in run.serve_added else "-" for q in (0.5, 0.9, 0.99))
    cells = [
        run.name, run.players, f"{run.turns / run.seconds:.1f} ({players_pace(run):.1f})",
        " / ".join(f"{pct(run.ttft, q):.0f}" for q in (0.5, 0.9, 0.99)),
        " / ".join(f"{pct(run.added, q):.1f}" for q in (0.5, 0.9, 0.99)),
        " / ".join(f"{pct(part, 0.99):.1f}" if part else "-" for part in (run.added_joining, run.added_joined)), share,
        f"{cpu:.1f}", f"{run.cpu_s / run.seconds:.2f}", f"{run.others_cpu_s / max(1, run.turns) * 1000:.1f}",
        f"{pct(run.client_lag, 0.99):.1f}", f"{run.rss_per_player / 1024:.0f}",
        f"{run.refused} ({run.retry_hints} with a hint)", run.failed, run.lost,
        f"{run.mixed}, {run.identities or '-'}", run.engine_peak,
    ]
    return "| " + " | ".join(map(str, cells)) + " |"


COLUMNS = ["run", "players", "turns/s (the players' pace)", "player's first token p50 / p90 / p99 ms",
           "runtime-added p50 / p90 / p99 ms", "runtime-added p99 while players join / after ms",
           "of which serve's, by its clock, p50 / p90 / p99 ms",
           "serve CPU ms/turn", "serve cores busy", "players + engine CPU ms/turn", "players' loop lag p99 ms",
           "RSS KiB/player", "refused", "failed", "lost", "mixed, identities", "engine peak"]
HEADER = "| " + " | ".join(COLUMNS) + " |\n" + "|---" * len(COLUMNS) + "|"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, nargs="+", default=[1, 16, 100, 200])
    parser.add_argument("--transports", nargs="+", choices=["grpc", "connect"], default=["grpc", "connect"])
    parser.add_argument("--turns", type=int, default=10, help="lines per player")
    parser.add_argument("--think-s", type=float, nargs=2, default=[1.0, 2.0])
    parser.add_argument("--engine", choices=["test", "hosted"], default="test")
    parser.add_argument("--client", choices=["sdk", "raw"], default="sdk",
                        help="the players' client: the public async client, or raw_connect.py's (Connect only; a "
                             "fraction of the CPU per turn, so hundreds of players leave the cores to serve)")
    parser.add_argument("--code-root", type=Path, action="append", default=[],
                        help="also run serve from this checkout (before/after in one run); repeatable")
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra serve flag (repeatable)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pin", action="store_true",
                        help="serve on every CPU but the last, the players and the engine on the last (Linux): on a "
                             "small machine they no longer take serve's cores, so its latency is its own")
    parser.add_argument("--profile", type=Path,
                        help="write py-spy's collapsed stacks of serve per run into DIR (needs py-spy on PATH: it is "
                             "a profiler, not a dependency)")
    parser.add_argument("--profile-gil", action="store_true",
                        help="with --profile: only stacks that hold the GIL (the Python code's CPU; without it py-spy "
                             "also counts threads blocked in a system call such as fsync)")
    args = parser.parse_args()
    if args.client == "raw" and "grpc" in args.transports:
        parser.error("--client raw speaks Connect only: add --transports connect")
    roots = [(f"{r.name or r}", r.resolve()) for r in args.code_root] + [("this", ROOT)]
    runs = []
    for players in args.players:
        for transport in args.transports:
            for label, root in roots:
                run = one_run(args, root, label, players, transport)
                print(row(run), flush=True)
                runs.append(run)
    print(f"\nN players x {args.turns} lines, {args.think_s[0]:g}-{args.think_s[1]:g} s apart, {args.engine} engine, "
          f"{os.cpu_count()} CPUs (wall-clock figures from a shared machine; CPU seconds are the robust ones)")
    print(HEADER)
    for run in runs:
        print(row(run))
    print("reproduce: .venv/bin/python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]))
    return 0 if all(r.lost == 0 and r.mixed == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
