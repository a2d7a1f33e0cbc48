"""The C# downloads through pythonnet, against a real HTTP server on loopback: a model pulled with progress on the
main thread (into the runtime's cache layout), resumed after a cut, refused when its checksum or format is wrong; the
runtime archive fetched, checked and swapped in; the Models panel assigning what it pulled; a player that downloads
its model on first launch and then starts the runtime with it."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pyruntime.catalog.cache import ModelCache
from tests.support.file_server import FileServer, Served
from tests.unity_layer.conftest import PYTHON, free_ports
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import wait_for
from tests.unity_layer.test_bootstrap import _bootstrap, _call
from tools import gen_catalog_csharp, package_runtime


def _pump(queue, task, timeout: float = 60.0) -> None:
    """Be the main thread: drain `queue` until `task` completes (then once more, for what it posted last)."""
    deadline = time.monotonic() + timeout
    while not task.IsCompleted:
        queue.Drain()
        assert time.monotonic() < deadline, "the download did not finish"
        time.sleep(0.01)
    time.sleep(0.05)
    queue.Drain()


def _settle(task, timeout: float = 60.0) -> None:
    """Wait for `task` to end, faulted or not (polling: .Wait would rethrow, .Result holds the GIL)."""
    deadline = time.monotonic() + timeout
    while not task.IsCompleted:
        assert time.monotonic() < deadline, "the task did not end"
        time.sleep(0.01)


def _error(task):
    """The task's DownloadException (or None)."""
    return task.Exception.GetBaseException() if task.IsFaulted else None


def _on_main_thread(seen: list):
    from CoreAI.Downloads import DownloadProgress
    from System import Action

    main = threading.get_ident()
    return Action[DownloadProgress](lambda p: seen.append((p.Received, p.Total, threading.get_ident() == main)))


def test_the_generated_catalogue_is_the_runtimes(assemblies) -> None:
    from CoreAI.Downloads import ModelCatalog

    assert gen_catalog_csharp.OUT.read_text(encoding="utf-8") == gen_catalog_csharp.render(), \
        "run python tools/gen_catalog_csharp.py"
    entry = ModelCatalog.Find("SMOLLM2-135M")
    assert entry.Sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert entry.SizeBytes == 98362432


def test_a_model_pulled_in_csharp_reports_progress_on_the_main_thread_and_the_runtime_finds_it(
        assemblies, server: FileServer, gguf_bytes: bytes, tmp_path: Path) -> None:
    from CoreAI.Downloads import ModelStore
    from CoreAI.UnityIntegration import MainThreadProgress, MainThreadQueue
    from System.Threading import CancellationToken

    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.02)  # several 100 ms progress ticks
    queue = MainThreadQueue()
    seen: list[Any] = []
    store = ModelStore(str(tmp_path / "models"))
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    task = store.PullAsync("npc-model", server.url("/slow.gguf"), sha, len(gguf_bytes), "url",
                           MainThreadProgress(queue, _on_main_thread(seen)), CancellationToken(False))
    _pump(queue, task)
    assert _error(task) is None
    assert Path(task.Result).read_bytes() == gguf_bytes
    assert len(seen) >= 3 and all(on_main for _, _, on_main in seen)
    size = len(gguf_bytes)
    assert [r for r, _, _ in seen] == sorted(r for r, _, _ in seen) and seen[-1][:2] == (size, size)
    assert store.IsPulled("npc-model") and list(store.Pulled()) == ["npc-model"]
    pulled = ModelCache(tmp_path / "models").get("npc-model")  # the runtime's cache reads what C# wrote
    assert pulled is not None and pulled.sha256 == sha and pulled.size_bytes == len(gguf_bytes)


def test_a_cut_download_resumes_and_bad_files_are_refused_leaving_nothing(
        assemblies, server: FileServer, gguf_bytes: bytes, tmp_path: Path) -> None:
    from CoreAI.Downloads import DownloadFailure, ModelStore
    from System.Threading import CancellationToken

    store = ModelStore(str(tmp_path / "models"))
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    cut = len(gguf_bytes) // 2
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=cut)

    def pull(name: str, path: str, checksum: str | None = sha, size: int = -1):
        task = store.PullAsync(name, server.url(path), checksum, size, "url", None, CancellationToken(False))
        _settle(task)
        return task

    first = _error(pull("cut", "/cut.gguf"))
    assert first.Kind == DownloadFailure.Interrupted and first.Resumable and "resume" in first.Message
    assert (tmp_path / "models" / ".partial" / "cut.gguf.partial").stat().st_size == cut
    assert not store.IsPulled("cut")
    assert _error(pull("cut", "/cut.gguf")) is None
    assert server.requests[-1].range == f"bytes={cut}-" and store.IsPulled("cut")

    wrong = _error(pull("wrong", "/tiny.gguf", "0" * 64))
    assert wrong.Kind == DownloadFailure.ChecksumMismatch and "expected sha256 " + "0" * 64 in wrong.Message
    missing = _error(pull("missing", "/missing.gguf"))
    assert missing.Kind == DownloadFailure.NotFound and "HTTP 404" in missing.Message
    server.files["/page.gguf"] = Served(b"<html>please log in</html>" * 40)
    page = _error(pull("page", "/page.gguf", None))
    assert page.Kind == DownloadFailure.NotUsable and "not a GGUF model file" in page.Message
    short = _error(pull("short", "/tiny.gguf", None, len(gguf_bytes) + 10))
    assert short.Kind == DownloadFailure.Truncated
    left = sorted(p.name for p in (tmp_path / "models").rglob("*") if p.is_file())
    assert left == ["cut.gguf", "cut.json"], "no partial and no lock file of a refused download stays"


def _fake_runtime(folder: Path, marker: str) -> Path:
    (folder / "_internal" / "lib").mkdir(parents=True)
    exe = folder / "coreai-runtime"
    exe.write_text(f"#!/bin/sh\necho {marker}\n")
    exe.chmod(0o755)
    (folder / "_internal" / "lib" / "libllama.so").write_bytes(os.urandom(4096))
    (folder / "_internal" / "libllama.so").symlink_to("lib/libllama.so")
    return folder


def test_the_runtime_archive_is_fetched_checked_and_swapped_in(assemblies, server: FileServer, tmp_path: Path) -> None:
    import subprocess

    from CoreAI.Downloads import DownloadFailure, RuntimeArchive
    from CoreAI.UnityIntegration import MainThreadProgress, MainThreadQueue
    from System.Threading import CancellationToken

    archive, checksum = package_runtime.package(_fake_runtime(tmp_path / "dist", "v2"), tmp_path / "release", "linux",
                                                "x64")
    assert archive.name == RuntimeArchive.ArchiveName("linux", "x64") == "coreai-runtime-linux-x64.tar.gz"
    server.files["/releases/download/v2/" + archive.name] = Served(archive.read_bytes(), chunk=4096, delay_s=0.01)
    server.files["/releases/download/v2/" + checksum.name] = Served(checksum.read_bytes())
    target = tmp_path / "Project" / "CoreAIRuntime" / "Linux"
    _fake_runtime(target, "v1")  # an older runtime is there: replaced whole
    queue = MainThreadQueue()
    seen: list[Any] = []
    base = server.url("/releases/download/v2")
    task = RuntimeArchive.FetchAsync(base, "linux", "x64", str(target),
                                     MainThreadProgress(queue, _on_main_thread(seen)), CancellationToken(False))
    _pump(queue, task)
    assert _error(task) is None
    exe = Path(task.Result.Executable)
    assert not task.Result.WaitsForNextStart, "no runtime ran from the folder: swapped in at once"
    assert task.Result.Version.startswith("v2 coreai-runtime-linux-x64.tar.gz sha256:")
    assert (target / "coreai-runtime.version").read_text().strip() == task.Result.Version
    assert exe == target / "coreai-runtime" and os.stat(exe).st_mode & stat.S_IXUSR
    assert subprocess.run([str(exe)], capture_output=True, text=True, timeout=10).stdout.strip() == "v2"
    assert (target / "_internal" / "libllama.so").is_symlink()
    assert os.readlink(target / "_internal" / "libllama.so") == "lib/libllama.so"
    assert sorted(p.name for p in target.parent.iterdir()) == [".downloads", "Linux"]  # no staging left
    assert seen and all(on_main for _, _, on_main in seen) and seen[-1][0] == archive.stat().st_size

    # A corrupted archive (the bytes differ from the published sha256) is refused; the runtime in place stays.
    server.files["/releases/download/v2/" + archive.name] = Served(archive.read_bytes()[:-64] + b"\0" * 64)
    bad = RuntimeArchive.FetchAsync(base, "linux", "x64", str(target), None, CancellationToken(False))
    _settle(bad)
    assert _error(bad).Kind == DownloadFailure.ChecksumMismatch
    assert subprocess.run([str(exe)], capture_output=True, text=True, timeout=10).stdout.strip() == "v2"
    missing = RuntimeArchive.FetchAsync(base, "macos", "arm64", str(tmp_path / "Project" / "CoreAIRuntime" / "macOS"),
                                        None, CancellationToken(False))
    _settle(missing)
    assert _error(missing).Kind == DownloadFailure.NotFound
    assert "coreai-runtime-macos-arm64.tar.gz" in _error(missing).Message


def test_the_release_url_follows_the_git_url_the_package_came_from(assemblies) -> None:
    from CoreAI.Downloads import RuntimeArchive

    url = RuntimeArchive.ReleaseBaseUrl("https://github.com/acme/coreai.git?path=unity_package#v0.2.0", "0.1.0")
    assert url == "https://github.com/acme/coreai/releases/download/v0.2.0"
    assert RuntimeArchive.ReleaseBaseUrl("git@github.com:acme/coreai.git?path=unity_package", "0.1.0") == \
        "https://github.com/acme/coreai/releases/download/v0.1.0"
    assert RuntimeArchive.ReleaseBaseUrl("file:../coreai/unity_package", "0.1.0") is None


def test_an_archive_entry_that_escapes_its_folder_is_refused(assemblies, tmp_path: Path) -> None:
    import io
    import tarfile

    from CoreAI.Downloads import DownloadException, TarGzArchive

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"owned"
        info = tarfile.TarInfo("coreai-runtime/../../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DownloadException, match="points outside"):
        TarGzArchive.Extract(str(archive), str(tmp_path / "target"), 1)
    assert not (tmp_path / "outside.txt").exists()


@pytest.fixture
def project(assemblies, tmp_path: Path):
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEngine import ScriptableObject, StubState

    root = tmp_path / "Project"
    (root / "Assets").mkdir(parents=True)
    StubState.DataPath = str(root / "Assets")
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.name = "CoreAIRuntimeSettings"
    yield root, settings
    StubState.DataPath = ""


def test_the_models_panel_pulls_assigns_and_fetches_the_runtime(project, server: FileServer, gguf_bytes: bytes,
                                                                tmp_path: Path) -> None:
    from CoreAI.Downloads import CatalogModel
    from CoreAI.EditorTools import ModelsPanel
    from CoreAI.UnityIntegration import RuntimeProgram
    from UnityEditor import StubDialogs

    root, settings = project
    panel = ModelsPanel(settings, str(root))
    seen: list = []
    panel.ProgressChanged += _on_main_thread(seen)
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    server.files["/npc.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.02)
    entry = CatalogModel("test-npc", server.url("/npc.gguf"), sha, len(gguf_bytes), "Apache-2.0", 2048, "structured",
                         "writer",
                         "a test model", "computed in the test")
    dirty = StubDialogs.DirtyCount
    task = panel.Pull(entry)
    assert panel.Busy
    deadline = time.monotonic() + 60
    while not task.IsCompleted:
        panel.Pump()  # the window's Update
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert task.Result is True and not panel.Busy, panel.Status
    assert settings.ModelName == "test-npc" and settings.ModelPath == "CoreAIModels/test-npc.gguf"
    assert (root / "CoreAIModels" / "test-npc.gguf").read_bytes() == gguf_bytes and StubDialogs.DirtyCount > dirty
    assert seen and all(on_main for _, _, on_main in seen)

    archive, checksum = package_runtime.package(_fake_runtime(tmp_path / "dist", "fetched"), tmp_path / "release",
                                                "linux", "x64")
    for path in (archive, checksum):
        server.files["/r/" + path.name] = Served(path.read_bytes())
    (root / "Packages").mkdir()
    fetch = panel.FetchRuntime("linux", "x64", server.url("/r"))
    while not fetch.IsCompleted:
        panel.Pump()
        time.sleep(0.01)
    assert fetch.Result is True, panel.Status
    assert settings.RuntimeProgram == RuntimeProgram.BundledExecutable  # the editor (Linux here) now runs it
    assert settings.RuntimePath == "CoreAIRuntime/Linux/coreai-runtime"
    assert (root / "CoreAIRuntime" / "Linux" / "coreai-runtime").is_file()


def test_a_player_downloads_its_model_on_first_launch_then_starts_the_runtime_with_it(
        assemblies, server: FileServer, gguf_bytes: bytes, tmp_path: Path, monkeypatch) -> None:
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from UnityEngine import ScriptableObject, StubState

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    server.files["/cdn/npc.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.02)
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RuntimeProgram = RuntimeProgram.PythonEnvironment
    settings.RuntimePath = str(PYTHON)
    settings.ModelName = "first-launch-npc"
    settings.ModelPath = "CoreAIModels/first-launch-npc.gguf"  # the editor's copy: not in the player
    settings.DownloadModelOnFirstLaunch = True
    settings.ModelDownloadUrl = server.url("/cdn/npc.gguf")
    settings.ModelDownloadSha256 = hashlib.sha256(gguf_bytes).hexdigest()
    settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
    assert settings.ModelFileFor(str(tmp_path)) is None  # the build step bundles no model then
    persistent = tmp_path / "persistent"
    StubState.PersistentDataPath, StubState.IsPlaying, StubState.IsEditor = str(persistent), True, False
    StubState.DataPath = str(tmp_path / "Game_Data")
    bootstrap = _bootstrap(settings)
    seen: list[Any] = []
    ready: list[Any] = []
    failed: list[Any] = []
    bootstrap.ModelDownloadProgress += _on_main_thread(seen)
    bootstrap.RuntimeReady += lambda endpoint: ready.append(endpoint)
    bootstrap.RuntimeFailed += lambda error: failed.append(error.Message)
    try:
        start = bootstrap.StartRuntime()

        def tick() -> bool:
            _call(bootstrap, "Update")  # the player's frames
            assert not failed, failed
            return bool(ready)

        wait_for(tick, 90, "RuntimeReady after the first-launch download")
        model = persistent / "CoreAI" / "models" / "first-launch-npc.gguf"
        assert model.read_bytes() == gguf_bytes
        assert start.IsCompleted and start.Result.ProcessId == ready[0].ProcessId
        assert len(seen) >= 2 and all(on_main for _, _, on_main in seen) and seen[-1][0] == len(gguf_bytes)
        from tests.unity_layer.processes import cmdline
        argv = cmdline(ready[0].ProcessId)
        assert argv[argv.index("--model") + 1] == str(model)
    finally:
        bootstrap.StopRuntime()
        StubState.IsPlaying, StubState.IsEditor, StubState.PersistentDataPath, StubState.DataPath = False, False, "", ""


def test_extraction_restores_modes_and_links_without_spawning_anything(assemblies, tmp_path: Path, monkeypatch) -> None:
    import io
    import tarfile

    from CoreAI.Downloads import TarGzArchive

    archive = tmp_path / "runtime.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, mode, data in (("coreai-runtime", 0o755, b"#!/bin/sh\n"), ("llama-server", 0o700, b"\x7fELF"),
                                 ("_internal/base_library.zip", 0o644, b"PK")):
            info = tarfile.TarInfo("coreai-runtime/" + name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("coreai-runtime/_internal/Current")
        link.type, link.linkname = tarfile.SYMTYPE, "base_library.zip"
        tar.addfile(link)
    monkeypatch.setenv("PATH", "")  # no chmod or ln to find: the modes and links come through P/Invoke
    target = tmp_path / "out"
    TarGzArchive.Extract(str(archive), str(target), 1)
    modes = {name: stat.S_IMODE((target / name).stat().st_mode) for name in ("coreai-runtime", "llama-server",
                                                                             "_internal/base_library.zip")}
    assert modes == {"coreai-runtime": 0o755, "llama-server": 0o700, "_internal/base_library.zip": 0o644}
    assert os.readlink(target / "_internal" / "Current") == "base_library.zip"


@pytest.mark.parametrize(("os_name", "reported", "translated", "expected"), [
    ("macos", "x64", False, "x64"),     # an Intel Mac
    ("macos", "arm64", False, "arm64"),  # Apple Silicon, a native (arm64) editor
    ("macos", "x64", True, "arm64"),    # Apple Silicon, an x64 editor under Rosetta 2: the machine's arm64 runtime
    ("windows", "x64", False, "x64"),
    ("windows", "arm64", False, "x64"),  # Windows on ARM runs the x64 runtime emulated (none is released for arm64)
    ("linux", "x64", False, "x64"),
    ("linux", "arm64", False, None),    # no Linux arm64 archive is released
    ("linux", None, False, None),       # a 32-bit OS
])
def test_the_runtime_fetched_fits_the_machines_real_cpu(assemblies, os_name: str, reported, translated: bool,
                                                        expected) -> None:
    from CoreAI.Downloads import RuntimeArchive

    assert RuntimeArchive.PickArch(os_name, reported, translated) == expected
    assert sorted(RuntimeArchive.Released) == ["linux-x64", "macos-arm64", "macos-x64", "windows-x64"]


def test_this_machine_gets_its_archive(assemblies) -> None:
    import platform

    from CoreAI.Downloads import RuntimeArchive

    assert RuntimeArchive.HostArch("linux") == ("x64" if platform.machine() in ("x86_64", "AMD64") else None)
