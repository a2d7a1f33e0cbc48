"""The scale-out deployment for tests: two `coreai-runtime serve` processes on one PostgreSQL database behind a
real nginx running the documented configuration (docs/operations/nginx-coreai.conf).

As on separate machines, each runtime has its own address (127.0.0.2 and 127.0.0.3) with the same ports, serves
TLS with a certificate for `coreai-runtime.internal`, and shares the token; nginx listens on 127.0.0.1 with TLS
for the clients. The documented file is used as it is: only its addresses, ports and paths are substituted,
and each substitution must find its text, so a change to the file cannot leave the test running another one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.nginx import Nginx, NginxMissing, terminate
from tests.support.tls import TestCertificates, make_certificates

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / "docs" / "operations" / "nginx-coreai.conf"
TOKEN = "scale-out-token-0123456789abcdef"
RUNTIME_HOSTS = ("127.0.0.2", "127.0.0.3")  # the documented file's 10.0.0.11 and 10.0.0.12
DOC_HOSTS = ("10.0.0.11", "10.0.0.12")
RUNTIME_NAME = "coreai-runtime.internal"


@dataclass
class RuntimeProcess:
    """One `serve` child: its address and the log its stderr goes to."""

    host: str
    process: subprocess.Popen[str]
    log: Path

    def kill(self) -> None:
        """SIGKILL: no grace, no cleanup (a crashed machine)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL past 30 s)."""
        terminate(self.process)


@dataclass
class AccessLine:
    """One line of the balancer's access log (the `coreai` log format)."""

    status: int
    rpc: str  # "coreai.v1.Orchestrator/StreamTask"
    conversation: str  # "" when the call carried no coreai-affinity header
    upstreams: list[str]  # the runtimes tried, in order ("127.0.0.2:PORT")

    @property
    def served_by(self) -> str:
        """The address of the runtime that answered (the last one tried), without the port."""
        return self.upstreams[-1].rsplit(":", 1)[0] if self.upstreams else ""


_LINE = re.compile(r'^\S+ (\d+) "POST /(\S+) [^"]*" conversation=(\S+) upstream=(.*?) upstream_status=')


@dataclass
class Deployment:
    """The balancer's two URLs, the CA its clients trust, the runtimes and the balancer itself."""

    grpc_url: str
    connect_url: str
    certificates: TestCertificates
    runtimes: list[RuntimeProcess]
    nginx: Nginx
    database_url: str
    folder: Path

    @property
    def access_log(self) -> Path:
        return self.folder / "nginx" / "access.log"

    def access_lines(self, start: int = 0, end: int | None = None, *, at_least: int = 0) -> list[AccessLine]:
        """The RPC lines of the access log between byte offsets `start` and `end` (None: its end).

        `at_least`: wait (up to 10 s) until that many are there - nginx logs a request once it has finalized it,
        which can be a moment after its client read the whole response.
        """
        deadline = time.monotonic() + 10
        while True:
            lines = self._read_access_lines(start, end)
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def _read_access_lines(self, start: int, end: int | None) -> list[AccessLine]:
        lines = []
        with open(self.access_log, "rb") as f:
            f.seek(start)
            text = f.read(-1 if end is None else end - start).decode(errors="replace")
            for raw in text.splitlines():
                found = _LINE.match(raw)
                if found:
                    status, rpc, conversation, upstreams = found.groups()
                    lines.append(AccessLine(int(status), rpc, "" if conversation == "-" else conversation,
                                            [u.strip() for u in upstreams.split(",") if u.strip() not in ("", "-")]))
        return lines

    def access_log_size(self) -> int:
        """The access log's current size (an offset for `access_lines`)."""
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def url(self, transport: str) -> str:
        """The balancer's URL for a transport ("grpc" or "connect")."""
        return self.grpc_url if transport == "grpc" else self.connect_url

    def stop(self) -> None:
        """Stop the balancer, then the runtimes."""
        self.nginx.stop()
        for runtime in self.runtimes:
            runtime.stop()


def _free_port(hosts: tuple[str, ...]) -> int:
    """A port free on every one of hosts (runtimes on separate machines use the same ports)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = int(probe.getsockname()[1])
            try:
                for host in hosts[1:]:
                    with socket.socket() as other:
                        other.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no port free on all of {hosts}")


def _substituted(text: str, replacements: list[tuple[str, str]]) -> str:
    for old, new in replacements:
        if old not in text:
            raise AssertionError(f"{NGINX_CONF.name} no longer contains {old!r}: update tests/support/scale_out.py")
        text = text.replace(old, new)
    return text


def nginx_site(*, grpc_port: int, connect_port: int, balancer_grpc: int, balancer_connect: int,
               certificates: TestCertificates, access_log: Path) -> str:
    """The documented configuration with this machine's addresses, ports and files."""
    replacements = [
        *[(f"{doc}:13334", f"{host}:{grpc_port}") for doc, host in zip(DOC_HOSTS, RUNTIME_HOSTS, strict=True)],
        *[(f"{doc}:13335", f"{host}:{connect_port}") for doc, host in zip(DOC_HOSTS, RUNTIME_HOSTS, strict=True)],
        ("listen 13334 ", f"listen 127.0.0.1:{balancer_grpc} "),
        ("listen 13335 ", f"listen 127.0.0.1:{balancer_connect} "),
        ("Host localhost:13335", f"Host localhost:{connect_port}"),
        ("/etc/nginx/coreai/balancer.pem", str(certificates.server_cert)),
        ("/etc/nginx/coreai/balancer.key", str(certificates.server_key)),
        ("/etc/nginx/coreai/runtime-ca.pem", str(certificates.ca_cert)),
        ("/var/log/nginx/coreai.log", str(access_log)),
    ]
    return _substituted(NGINX_CONF.read_text(encoding="utf-8"), replacements)


def spawn_runtime(host: str, *, grpc_port: int, connect_port: int, database_url: str, model: list[str],
                  certificates: TestCertificates, log: Path) -> RuntimeProcess:
    """Start `coreai-runtime serve` on host with the shared store, token and certificate; wait for its ready line."""
    env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.cli", "serve", *model, "--store", database_url, "--listen", host,
             "--grpc-port", str(grpc_port), "--connect-port", str(connect_port),
             "--tls-cert", str(certificates.server_cert), "--tls-key", str(certificates.server_key), "--grace", "2"],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=ROOT)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.kill()
        raise RuntimeError(f"runtime on {host} did not start (exit {process.wait()}):\n"
                           f"{log.read_text(errors='replace')[-3000:]}")
    json.loads(line)
    return RuntimeProcess(host, process, log)


def start_deployment(folder: Path, database_url: str, model: list[str]) -> Deployment:
    """Two runtimes serving `model` (serve's model flags) on database_url, and nginx in front of them."""
    # The runtimes' name (what nginx checks), and the addresses a test may call them on directly.
    names = ",".join([f"DNS:{RUNTIME_NAME}", "DNS:localhost", "IP:127.0.0.1", *(f"IP:{h}" for h in RUNTIME_HOSTS)])
    certificates = make_certificates(folder / "tls", names=names)
    grpc_port, connect_port = _free_port(RUNTIME_HOSTS), _free_port(RUNTIME_HOSTS)
    runtimes: list[RuntimeProcess] = []
    try:
        for host in RUNTIME_HOSTS:
            runtimes.append(spawn_runtime(host, grpc_port=grpc_port, connect_port=connect_port,
                                          database_url=database_url, model=model, certificates=certificates,
                                          log=folder / f"runtime-{host}.log"))
        balancer_grpc, balancer_connect = _free_port(("127.0.0.1",)), _free_port(("127.0.0.1",))
        site = nginx_site(grpc_port=grpc_port, connect_port=connect_port, balancer_grpc=balancer_grpc,
                          balancer_connect=balancer_connect, certificates=certificates,
                          access_log=folder / "nginx" / "access.log")
        nginx = Nginx(folder / "nginx", site, [("127.0.0.1", balancer_grpc), ("127.0.0.1", balancer_connect)])
    except BaseException:
        for runtime in runtimes:
            runtime.stop()
        raise
    return Deployment(f"grpcs://127.0.0.1:{balancer_grpc}", f"https://127.0.0.1:{balancer_connect}", certificates,
                      runtimes, nginx, database_url, folder)


def scripted_deployment(folder: Path, database_url: str, script: dict[str, object]) -> Deployment:
    """The deployment with both runtimes serving `script` (the scripted model, memory tool in the reply); a machine
    without nginx FAILS the test naming the package, never skips it."""
    import pytest

    path = folder / "script.json"
    path.write_text(json.dumps(script))
    try:
        return start_deployment(folder, database_url, ["--scripted-model", str(path), "--port", "0",
                                                       "--memory-design", "tool"])
    except NginxMissing as exc:
        pytest.fail(str(exc), pytrace=False)
