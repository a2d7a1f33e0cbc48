"""Fixtures of the Unity package core tests: the assemblies compiled with mcs and loaded through pythonnet,
and real runtimes (the Python RPC servers over real file stores, turns on a real llama.cpp tiny model).

C# is called from Python exactly as a game calls it; tasks are awaited with `wait()` (Wait(timeout),
then GetAwaiter().GetResult() so exceptions arrive unwrapped) - never `.Result`, which holds the GIL
while the in-process runtime needs it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.fixtures import tiny_llama_server, tiny_model_path  # noqa: E402,F401
from tools.build_csharp import DEFAULT_OUT, assembly_of_tests, build_client, build_tests  # noqa: E402

TOKEN = "unity-core-test-token-0123456789"
# The package's test assemblies (unity_package/Tests/Runtime, Tests/Editor): the scenarios these tests call and the
# NUnit tests test_package_nunit.py runs; named by their asmdefs, as the Core's InternalsVisibleTo names them.
RUNTIME_TESTS, EDITOR_TESTS = assembly_of_tests("Runtime"), assembly_of_tests("Editor")
WAIT_S = 120.0


def start_mono() -> None:
    """Start Mono once per process; preemptive suspend avoids the GC/GIL deadlock."""
    os.environ["MONO_THREADS_SUSPEND"] = "preemptive"
    import pythonnet

    if pythonnet.get_runtime_info() is None:
        with warnings.catch_warnings():
            # clr_loader warns about Mono < 6.12; Debian 12 ships 6.8 and preemptive suspend is the fix it hints at.
            warnings.simplefilter("ignore", UserWarning)
            pythonnet.load("mono")


@pytest.fixture(scope="session")
def assemblies() -> Path:
    """CoreAI.Client.dll and the package's test assemblies (the design note's scenarios, NUnit tests), loaded."""
    core = build_client()
    tests = build_tests()
    start_mono()
    import clr

    for dll in (DEFAULT_OUT / "Newtonsoft.Json.dll", DEFAULT_OUT / "nunit.framework.dll", core, *tests):
        clr.AddReference(str(dll))
    from tests.support.sync_store_calls import raise_for_a_shared_machine

    raise_for_a_shared_machine()  # synchronous store calls get room (their 2 s default has its own test)
    return DEFAULT_OUT


def wait(task: Any, timeout_s: float = WAIT_S) -> Any:
    """The result of a .NET Task (its exception, unwrapped, when it failed)."""
    from System import TimeSpan

    try:
        finished = task.Wait(TimeSpan.FromSeconds(timeout_s))
    except Exception:  # noqa: BLE001 - the AggregateException; GetResult below raises the real one
        finished = True
    if not finished:
        raise TimeoutError(f"the .NET task did not finish within {timeout_s} s")
    return task.GetAwaiter().GetResult()


@dataclass
class Runtime:
    """A runtime serving file stores under data_dir (serve's `pyruntime.app.Runtime`, RPC in this process; the model
    in a llama.cpp process or the scripted model)."""

    handle: Any  # tests.support.runtime.RuntimeThread
    data_dir: Path

    @property
    def services(self) -> Any:
        """The services both transports serve."""
        return self.handle.services

    @property
    def orchestrator(self) -> Any:
        """The turn engine."""
        return self.handle.orchestrator

    @property
    def url(self) -> str:
        """The Connect base URL."""
        return self.handle.connect_url

    @property
    def memory_dir(self) -> Path:
        """Where memory documents live."""
        return self.data_dir / "CoreAI" / "AgentMemory"

    def client(self, token: str | None = TOKEN, policy: Any = None) -> Any:
        """A C# CoreAIRuntimeClient of this runtime (dispose it)."""
        from CoreAI.Runtime import CoreAIRuntimeClient

        return CoreAIRuntimeClient(self.url, token, policy)

    def stop(self) -> None:
        """Graceful stop, in reverse: in-flight calls, store writes, the model client, the stores."""
        self.handle.stop(1.0)


def start_runtime(data_dir: Path, llama: Any = None, **settings: Any) -> Runtime:
    """The runtime `serve` runs (`pyruntime.app.Runtime`, in this process): both transports on free loopback ports,
    file stores under data_dir, turns on the `llama` server the tests share (its stop stays the tests'), else on
    the model `settings` name (e.g. `llm_url`: the scripted model's URL)."""
    from pyruntime.app import Runtime as AppRuntime
    from pyruntime.app import RuntimeModel, RuntimeSettings
    from tests.support.runtime import RuntimeThread

    model = RuntimeModel(llama.base_url, llama.config.alias, llama) if llama is not None else None
    fields = {"data_dir": data_dir, "grpc_port": 0, "connect_port": 0, "token": TOKEN, "grace": 1.0, **settings}
    return Runtime(RuntimeThread(AppRuntime(RuntimeSettings(**fields), model=model)), data_dir)


@pytest.fixture
def runtime_factory(assemblies: Path, tiny_llama_server: Any, tmp_path: Path) -> Iterator[Callable[..., Runtime]]:
    """Start runtimes (default data dir: this test's); all are stopped after the test."""
    started: list[Runtime] = []

    def start(data_dir: Path | None = None) -> Runtime:
        rt = start_runtime(data_dir or tmp_path / "data", tiny_llama_server)
        started.append(rt)
        return rt

    yield start
    for rt in started:
        rt.stop()


@pytest.fixture
def runtime(runtime_factory: Callable[..., Runtime]) -> Runtime:
    """A fresh runtime for one test."""
    return runtime_factory()


@pytest.fixture
def client(runtime: Runtime) -> Iterator[Any]:
    """A C# client of the test's runtime with a fresh policy."""
    from CoreAI.Ai import AgentMemoryPolicy

    c = runtime.client(policy=AgentMemoryPolicy())
    yield c
    c.Dispose()


_session: dict[str, pytest.Session] = {}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remember the session so pytest_unconfigure can read its final exit status."""
    _session["s"] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Skip pythonnet's slow shutdown (3-5 s) once everything is reported, keeping the exit code.

    Only when Mono was started in this process and it is not an xdist worker (whose controller waits
    for its own shutdown handshake); reports, cache and junit files are written before this hook.
    """
    if "clr" not in sys.modules or hasattr(config, "workerinput") or "s" not in _session:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_session["s"].exitstatus))
