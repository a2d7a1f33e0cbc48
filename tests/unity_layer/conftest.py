"""Fixtures of the Unity-layer tests: compiled assemblies, a tiny model, free ports, a launcher factory."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tiny_model import write_tiny_model
from tests.unity_layer.dotnet import ROOT, load_assemblies
from tools.build_csharp import DEFAULT_OUT, build_client, build_stubs, build_unity, compile_assembly, sources
from tools.build_runtime import DEFAULT_DIST, DEFAULT_WORK, build

SCENARIOS = "CoreAI.Tests.UnityLayer"

PYTHON = ROOT / ".venv" / "bin" / "python"


@pytest.fixture(scope="session")
def assemblies() -> Path:
    """Core (with the launcher), the Unity layer and the editor, compiled and loaded; this thread is Unity's main
    thread.

    The stub engine enforces Unity's main-thread rule from here on: Application.persistentDataPath and the other
    main-thread-only members throw a UnityException on any other thread, as in a real editor.
    """
    built = load_assemblies("client", "hosting", "unity", "editor")
    from System.Threading import SynchronizationContext
    from UnityEngine import StubEngine

    from tests.support.sync_store_calls import raise_for_a_shared_machine

    StubEngine.BecomeMainThread()
    # Unity's context only inside these tests (main_thread_context)
    SynchronizationContext.SetSynchronizationContext(None)
    raise_for_a_shared_machine()  # synchronous store calls get room (their 2 s default has its own test)
    return built


@pytest.fixture(autouse=True)
def main_thread_context(request: pytest.FixtureRequest) -> Iterator[None]:
    """Inside a Unity-layer test this thread has Unity's SynchronizationContext, as Unity's main thread does; outside
    (the core tests in the same process) it has none, so their blocking waits never wait for a frame."""
    if "assemblies" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("assemblies")
    from System.Threading import SynchronizationContext
    from UnityEngine import StubEngine

    SynchronizationContext.SetSynchronizationContext(StubEngine.MainThreadContext)
    try:
        yield
    finally:
        SynchronizationContext.SetSynchronizationContext(None)


@pytest.fixture(scope="session")
def scenarios(assemblies: Path) -> Path:
    """The game code of these tests (tests/unity_layer/csharp) compiled against the package and the stubs, loaded."""
    import clr

    refs = sorted(DEFAULT_OUT.glob("Unity*.dll")) + [DEFAULT_OUT / f"{n}.dll" for n in (
        "CoreAI.Client", "CoreAI.Hosting", "CoreAI.Runtime.Unity", "CoreAI.Editor")]
    dll = compile_assembly(SCENARIOS, sources(Path(__file__).parent / "csharp"), DEFAULT_OUT, refs)
    clr.AddReference(str(dll))
    return assemblies


def load_sample(folder: Path, *references: Path) -> Path:
    """The sample assembly (Samples~/BlacksmithNpc) compiled into folder against the client, the Unity stubs and
    `references`, loaded."""
    import clr

    files = sorted((ROOT / "unity_package" / "Samples~" / "BlacksmithNpc").rglob("*.cs"))
    unity = build_unity()
    assert unity is not None
    dll = compile_assembly("CoreAI.Samples.BlacksmithNpc", files, folder, [build_client(), *references,
                                                                           *build_stubs(), unity])
    clr.AddReference(str(dll))
    return dll


@pytest.fixture(scope="module")
def sample(assemblies: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample assembly, compiled against the package's client and the Unity stubs only, loaded."""
    return load_sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def frozen_runtime() -> Path:
    """The frozen executable (built once, then reused while nothing it is made from changed)."""
    return build(DEFAULT_DIST, DEFAULT_WORK)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight GGUF (fast real llama.cpp)."""
    return write_tiny_model(tmp_path_factory.mktemp("model") / "tiny-test-model.gguf")


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that are free now."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def make_options(assemblies: Path, tiny_model: Path, tmp_path: Path):
    """Options for the real runtime (`python -m pyruntime.cli serve`) on free ports, data dir under tmp."""
    from CoreAI.Launcher import RuntimeLaunchOptions
    from System import TimeSpan

    def make(data_dir: Path | None = None, **overrides) -> RuntimeLaunchOptions:
        options = RuntimeLaunchOptions.ForPython(str(PYTHON), str(data_dir or tmp_path / "persistent"))
        connect, grpc, model = free_ports(3)
        options.ConnectPort, options.GrpcPort, options.ModelPort = connect, grpc, model
        options.ModelPath = str(tiny_model)
        options.ProjectId = "test-project"
        options.WorkingDirectory = str(ROOT)  # so `-m pyruntime.cli` imports this checkout
        options.Environment["PYTHONPATH"] = str(ROOT)
        options.StartTimeout = TimeSpan.FromSeconds(60)
        options.WatchInterval = TimeSpan.FromMilliseconds(200)
        options.RestartBackoffInitial = TimeSpan.FromMilliseconds(500)
        options.RestartBackoffMax = TimeSpan.FromSeconds(4)
        options.StopTimeout = TimeSpan.FromSeconds(10)
        for name, value in overrides.items():
            setattr(options, name, value)
        return options

    return make


@pytest.fixture
def launchers() -> Iterator[list]:
    """Launchers a test created; every one is stopped afterwards so no runtime outlives the test."""
    created: list = []
    yield created
    for launcher in created:
        launcher.Stop()
