"""The editor's model pulls and runtime fetches outlive the Models window, script reloads and Play: a reload pauses the
download (the partial file stays), the reloaded editor resumes it with an HTTP range, and the result reaches the
settings
asset. A cancelled or failed download leaves no partial and no lock file; a dropped connection is retried, resuming."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from tests.support.file_server import FileServer, Served
from tests.support.tiny_model import write_tiny_model
from tools import package_runtime


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()


@pytest.fixture
def server():
    files = FileServer({})
    yield files
    files.close()


@pytest.fixture
def editor(scenarios, tmp_path: Path):
    """A fresh editor with a project whose settings asset is registered at Assets/CoreAIRuntimeSettings.asset."""
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEditor import StubAssets, StubDomain, StubEditorState
    from UnityEngine import ScriptableObject, StubState

    root = tmp_path / "Project"
    (root / "Assets").mkdir(parents=True)
    StubState.DataPath, StubState.IsEditor = str(root / "Assets"), True
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubEditorState.Session.Clear()
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.name = "CoreAIRuntimeSettings"
    StubAssets.ByPath["Assets/CoreAIRuntimeSettings.asset"] = settings
    StubDomain.Reload()  # scripts loaded: [InitializeOnLoad] code (the downloads) runs
    yield root, settings
    from CoreAI.EditorTools import EditorDownloads

    if EditorDownloads.Busy:
        EditorDownloads.Cancel()
        _tick_until(lambda: not EditorDownloads.Busy, 30)
    StubAssets.ByPath.Clear()
    StubEditorState.Session.Clear()
    StubState.DataPath, StubState.IsEditor, StubState.PersistentDataPath = "", False, ""


def _tick_until(condition, timeout: float) -> None:
    """Be the editor's loop (EditorApplication.update) until `condition` holds."""
    from UnityEditor import StubEditorLoop

    deadline = time.monotonic() + timeout
    while not condition():
        StubEditorLoop.Tick()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _entry(server: FileServer, gguf: bytes, path: str = "/npc.gguf", sha: str | None = None):
    from CoreAI.Downloads import CatalogModel

    return CatalogModel("test-npc", server.url(path), sha or hashlib.sha256(gguf).hexdigest(), len(gguf), "Apache-2.0",
                        2048,
                        "structured", "writer", "a test model", "computed in the test")


def _leftovers(root: Path) -> list[str]:
    models = root / "CoreAIModels"
    return sorted(str(p.relative_to(models)) for p in models.rglob("*") if p.is_file()) if models.exists() else []


def _panel(root: Path, settings):
    from CoreAI.EditorTools import ModelsPanel

    return ModelsPanel(settings, str(root))


@pytest.mark.parametrize("interruption", ["script reload", "entering play mode"])
def test_a_pull_outlives_the_window_and_a_domain_reload_and_reaches_the_settings(editor, server, gguf: bytes,
                                                                                interruption: str) -> None:
    from CoreAI.EditorTools import EditorDownloads
    from UnityEditor import StubAssets, StubDomain, StubPlayMode

    root, settings = editor
    server.files["/npc.gguf"] = Served(gguf, chunk=8 * 1024, delay_s=0.02)
    _panel(root, settings).Pull(_entry(server, gguf))  # the window that started it is gone at once
    partial = root / "CoreAIModels" / ".partial" / "test-npc.gguf.partial"
    _tick_until(lambda: partial.exists() and partial.stat().st_size > 16 * 1024, 30)
    before = partial.stat().st_size  # the pause keeps at least this (the resumed pull may add to it before we look)
    if interruption == "script reload":
        StubDomain.Reload()
    else:
        StubPlayMode.Enter(True)
    kept = partial.stat().st_size
    assert kept > 0, "the reload paused the download and kept what arrived"
    assert partial.with_name(partial.name + ".json").exists(), "with the record of which file the bytes are"
    assert EditorDownloads.Busy, "the reloaded editor resumed it"
    _tick_until(lambda: not EditorDownloads.Busy, 60)
    if interruption != "script reload":
        StubPlayMode.Exit()
    assert server.requests[-1].range is not None and int(server.requests[-1].range.split("=")[1].rstrip("-")) >= before
    asset = StubAssets.ByPath["Assets/CoreAIRuntimeSettings.asset"]
    assert asset.ModelName == "test-npc" and asset.ModelPath == "CoreAIModels/test-npc.gguf", EditorDownloads.Status
    assert (root / "CoreAIModels" / "test-npc.gguf").read_bytes() == gguf
    assert _leftovers(root) == ["test-npc.gguf", "test-npc.json"], "no partial, no lock"


def test_a_cancelled_pull_leaves_nothing(editor, server, gguf: bytes) -> None:
    from CoreAI.EditorTools import EditorDownloads

    root, settings = editor
    server.files["/npc.gguf"] = Served(gguf, chunk=8 * 1024, delay_s=0.05)
    done = _panel(root, settings).Pull(_entry(server, gguf))
    partial = root / "CoreAIModels" / ".partial" / "test-npc.gguf.partial"
    _tick_until(lambda: partial.exists() and partial.stat().st_size > 0, 30)
    EditorDownloads.Cancel()
    _tick_until(lambda: not EditorDownloads.Busy, 30)
    assert done.IsCompleted and done.Result is False and "cancelled" in EditorDownloads.Status
    assert _leftovers(root) == [] and settings.ModelName == ""


def test_a_failed_pull_leaves_nothing_and_a_dropped_one_is_resumed(editor, server, gguf: bytes) -> None:
    from CoreAI.EditorTools import EditorDownloads

    root, settings = editor
    server.files["/npc.gguf"] = Served(gguf)
    failed = _panel(root, settings).Pull(_entry(server, gguf, sha="0" * 64))
    _tick_until(lambda: not EditorDownloads.Busy, 30)
    assert failed.Result is False and "checksum mismatch" in EditorDownloads.Status
    assert _leftovers(root) == [] and settings.ModelName == ""

    server.files["/cut.gguf"] = Served(gguf, cut_after=len(gguf) // 3, cuts=2)
    resumed = _panel(root, settings).Pull(_entry(server, gguf, path="/cut.gguf"))
    _tick_until(lambda: not EditorDownloads.Busy, 60)
    assert resumed.Result is True, EditorDownloads.Status
    ranges = [r.range for r in server.requests if r.path == "/cut.gguf"]
    assert len(ranges) == 3 and ranges[0] is None and all(r and r.startswith("bytes=") for r in ranges[1:])
    assert _leftovers(root) == ["test-npc.gguf", "test-npc.json"]


def test_repaints_do_not_read_the_disk(editor) -> None:
    from CoreAI.EditorTools import ModelsWindow
    from UnityEditor import EditorWindow
    from UnityEngine import StubEngine

    root, settings = editor
    window = EditorWindow.GetWindow[ModelsWindow]("CoreAI Models")
    StubEngine.Send(window, "OnGUI")
    panel = window.GetType().GetField("panel", _private()).GetValue(window)
    reads = panel.Refreshes
    for _ in range(50):
        StubEngine.Send(window, "OnGUI")
    assert panel.Refreshes == reads
    (root / "Packages").mkdir()
    (root / "Packages" / "manifest.json").write_text(
        '{"dependencies": {"com.coreai.agent-memory": "https://github.com/acme/coreai.git?path=unity_package#v9.9.9"}}')
    StubEngine.Send(window, "OnFocus")
    assert panel.Refreshes == reads + 1 and panel.ReleaseUrl.endswith("/releases/download/v9.9.9")
    window.Close()


def _private():
    from System.Reflection import BindingFlags

    return BindingFlags.Instance | BindingFlags.NonPublic


def test_a_runtime_fetched_while_one_runs_from_its_folder_waits_beside_it(editor, server, tmp_path: Path) -> None:
    import json
    import os

    from CoreAI.EditorTools import EditorDownloads, ModelsPanel
    from CoreAI.UnityIntegration import RuntimeProgram

    root, settings = editor
    folder = root / "CoreAIRuntime" / "Linux"
    folder.mkdir(parents=True)
    (folder / "coreai-runtime").write_text("#!/bin/sh\necho old\n")
    # The editor's runtime runs from that folder (recorded, alive: this test process stands in for it).
    persistent = Path(os.environ.get("COREAI_TEST_PERSISTENT", str(tmp_path / "persistent")))
    state = persistent / "CoreAI" / "runtime" / "editor"
    state.mkdir(parents=True)
    (state / "launcher.json").write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "connectPort": 1,
                                                    "token": "t",
                                                    "runtimePath": str(folder / "coreai-runtime")}))
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "coreai-runtime").write_text("#!/bin/sh\necho new\n")
    (dist / "llama-server").write_text("#!/bin/sh\necho engine\n")
    for f in dist.iterdir():
        f.chmod(0o755)
    archive, checksum = package_runtime.package(dist, tmp_path / "release", "linux", "x64")
    for path in (archive, checksum):
        server.files["/v3/" + path.name] = Served(path.read_bytes())
    done = ModelsPanel(settings, str(root)).FetchRuntime("linux", "x64", server.url("/v3"))
    _tick_until(lambda: not EditorDownloads.Busy, 60)
    assert done.Result is True, EditorDownloads.Status
    assert (folder / "coreai-runtime").read_text().endswith("echo old\n"), (
        "the running runtime's folder was not swapped")
    pending = root / "CoreAIRuntime" / "Linux.pending"
    assert (pending / "coreai-runtime").read_text().endswith("echo new\n")
    assert os.access(pending / "llama-server", os.X_OK) and os.access(pending / "coreai-runtime", os.X_OK)
    assert (pending / "coreai-runtime.version").read_text().startswith("v3 coreai-runtime-linux-x64.tar.gz sha256:")
    assert "replaces it at its next start" in EditorDownloads.Status
    assert settings.RuntimeProgram == RuntimeProgram.BundledExecutable
    assert settings.RuntimePath == "CoreAIRuntime/Linux/coreai-runtime"
