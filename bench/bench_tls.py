"""Benchmark of remote mode's TLS: what it costs a call over each transport, against plain text in the same run.

One in-process runtime serves plain text and one serves TLS (a private CA and a server certificate made by
openssl), both over file stores on loopback. For each transport and each kind:

- kept connection: a `load_state` call on a client that stays open (the game's normal case);
- new connection: a fresh client per call (connect + TLS handshake + call + close).

Ratios TLS / plain per row; medians of `--runs` runs of `--calls` calls each (a shared machine is noisy).
Run: `.venv/bin/python bench/bench_tls.py [--runs 5] [--calls 40]`
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import RuntimeClient  # noqa: E402
from pyruntime.rpc.tls import TlsFiles  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402
from tests.rpc.conftest import TOKEN, Runtime, start_runtime  # noqa: E402
from tests.support.tls import make_certificates  # noqa: E402

SCOPE = AgentMemoryScope(user_id="bench")


def _urls(runtime: Runtime, tls: bool) -> dict[str, str]:
    host = "localhost"  # the certificate's name; the same for plain text, so name lookup costs both alike
    return {"gRPC": f"{'grpcs' if tls else 'grpc'}://{host}:{runtime.handle.grpc_port}",
            "Connect": f"{'https' if tls else 'http'}://{host}:{runtime.handle.connect_port}"}


def _per_call_ms(calls: int, call: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) * 1000 / calls


def _kept(url: str, ca: Path | None, calls: int) -> float:
    with RuntimeClient(url, token=TOKEN, ca_cert=ca, timeout=60) as client:
        client.load_state("Bench", scope=SCOPE)  # warm: connection and handshake outside the timing
        return _per_call_ms(calls, lambda: client.load_state("Bench", scope=SCOPE))


def _fresh(url: str, ca: Path | None, calls: int) -> float:
    def call() -> None:
        with RuntimeClient(url, token=TOKEN, ca_cert=ca, timeout=60) as client:
            client.load_state("Bench", scope=SCOPE)

    return _per_call_ms(calls, call)


def main() -> int:
    """Print the table (ms per call, medians) and the command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        certs = make_certificates(Path(folder) / "tls")
        plain = start_runtime(Path(folder) / "plain")
        secure = start_runtime(Path(folder) / "tls-data", tls=TlsFiles(certs.server_cert, certs.server_key))
        try:
            rows = []
            for transport in ("gRPC", "Connect"):
                for kind, measure in (("kept connection", _kept), ("new connection", _fresh)):
                    base, tls = [], []
                    for _ in range(args.runs):  # interleaved, so drift on the machine hits both alike
                        base.append(measure(_urls(plain, False)[transport], None, args.calls))
                        tls.append(measure(_urls(secure, True)[transport], certs.ca_cert, args.calls))
                    rows.append((transport, kind, statistics.median(base), statistics.median(tls)))
        finally:
            for runtime in (plain, secure):
                runtime.handle.stop(0.5)
                runtime.services.close()
    print(f"| transport | call | plain ms | TLS ms | TLS / plain |   (median of {args.runs} runs x {args.calls} calls)")
    print("|---|---|---|---|---|")
    for transport, kind, plain_ms, tls_ms in rows:
        print(f"| {transport} | {kind} | {plain_ms:.2f} | {tls_ms:.2f} | {tls_ms / plain_ms:.2f}x |")
    print(f"\n.venv/bin/python bench/bench_tls.py --runs {args.runs} --calls {args.calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
