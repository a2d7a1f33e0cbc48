"""Real runtimes on loopback (free ports, real file stores) and clients of both transports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyruntime.app import Runtime as AppRuntime
from pyruntime.app import RuntimeModel, RuntimeSettings
from pyruntime.client import RuntimeClient
from pyruntime.service import RuntimeServices
from pyruntime.service.admission import TurnAdmission
from pyruntime.service.orchestrator import TurnRunner
from pyruntime.stores import StoreBundle
from pyruntime.turns import AiOrchestrator
from tests.support.runtime import RuntimeThread

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"
TRANSPORTS = ("grpc", "connect")


@dataclass
class Runtime:
    """A runtime serving file stores under data_dir, in this process: serve's own (`pyruntime.app.Runtime`)."""

    handle: RuntimeThread
    data_dir: Path

    @property
    def services(self) -> RuntimeServices:
        """The services both transports serve."""
        return self.handle.services

    @property
    def orchestrator(self) -> AiOrchestrator:
        """The turn engine (a runtime started with a model)."""
        return self.handle.orchestrator

    @property
    def token(self) -> str:
        return self.handle.token

    def url(self, transport: str) -> str:
        """The client URL of a transport."""
        return f"grpc://127.0.0.1:{self.handle.grpc_port}" if transport == "grpc" else self.handle.connect_url

    def client(self, transport: str, token: str | None = None) -> RuntimeClient:
        """A blocking client of one transport (close it); generous timeout: the machine is shared."""
        return RuntimeClient(self.url(transport), token=token or self.token, timeout=120)

    @property
    def memory_dir(self) -> Path:
        return self.data_dir / "CoreAI" / "AgentMemory"


def start_runtime(data_dir: Path, *, stores: StoreBundle | None = None, model: RuntimeModel | None = None,
                  admission: TurnAdmission | None = None,
                  turn_runner: Callable[[AiOrchestrator], TurnRunner] | None = None, **settings: Any) -> Runtime:
    """Start the runtime `serve` runs, built by `pyruntime.app.Runtime` from settings: both transports on free
    loopback ports, file stores under data_dir (or `stores`), the token TOKEN; no model unless `model` (one the
    test started: stopping it stays the test's). `settings`: further `RuntimeSettings` fields."""
    fields: dict[str, Any] = {"data_dir": data_dir, "grpc_port": 0, "connect_port": 0, "token": TOKEN,
                              "grace": 2.0, "no_model": model is None, **settings}
    runtime = AppRuntime(RuntimeSettings(**fields), stores=stores, model=model, admission=admission,
                         turn_runner=turn_runner)
    return Runtime(RuntimeThread(runtime), data_dir)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    """A fresh runtime per test."""
    rt = start_runtime(tmp_path / "data")
    yield rt
    rt.handle.stop(1.0)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each test runs once per transport."""
    return str(request.param)


@pytest.fixture
def client(runtime: Runtime, transport: str) -> Iterator[RuntimeClient]:
    """A blocking client of the runtime over the test's transport."""
    with runtime.client(transport) as c:
        yield c


def files_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (to show that a refused call changed nothing)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and "runtime" not in p.parts and not p.name.endswith(".lock")}


@dataclass
class RuntimeProcess:
    """A runtime in a child process (`coreai-runtime serve`), for signals."""

    process: subprocess.Popen[str]
    grpc_port: int
    connect_port: int
    data_dir: Path

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send sig and wait for the exit code."""
        self.process.send_signal(sig)
        return self.process.wait(timeout)


def spawn_runtime(data_dir: Path, *, grpc_port: int = 0, connect_port: int = 0,
                  model: tuple[str, ...] = ("--no-model",), extra: tuple[str, ...] = (),
                  log: Path | None = None, open_files: int | None = None) -> RuntimeProcess:
    """Start `coreai-runtime serve` (by default without a model) and wait for its ready line.

    log: where its stderr goes (else discarded); open_files: its file-handle limit, soft and hard
    (so it cannot raise it), like a desktop or macOS GUI process.
    """
    env = {**os.environ, "COREAI_RUNTIME_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}

    def limit_files() -> None:
        if open_files is not None:
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    log_file = open(log, "w") if log is not None else None  # the child owns it
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.cli", "serve", *model, "--data-dir", str(data_dir),
             "--grpc-port", str(grpc_port), "--connect-port", str(connect_port), "--grace", "10", *extra],
            stdout=subprocess.PIPE, stderr=log_file if log_file is not None else subprocess.DEVNULL, text=True,
            env=env, cwd=ROOT, preexec_fn=limit_files)
    finally:
        if log_file is not None:
            log_file.close()
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.kill()
        raise RuntimeError(f"runtime did not start (exit {process.wait()})")
    ready = json.loads(line)
    return RuntimeProcess(process, ready["grpc_port"], ready["connect_port"], data_dir)
