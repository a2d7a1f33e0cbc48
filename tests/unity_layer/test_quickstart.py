"""The package README's quickstart (unity_package/README.md), followed step by step on Linux as a new user would, with
the compiled package under the stub editor: the git URL it gives goes into Packages/manifest.json as Package Manager
writes it; the editor works out that tag's GitHub release; the runtime archive the release workflow would publish
(tools/build_runtime.py, then tools/package_runtime.py's check and pack) is fetched, checked and unpacked by the
package's own code; the catalogue's smollm2-135m is pulled and assigned; the bootstrap and the imported Blacksmith
sample go into the scene; Play; Brom answers, and again after Stop and Play. Today the last step does not hold with
smollm2-135m: the test marks that one known outcome as an expected failure (see _say's caller) and fails on any other.

What cannot run here: github.com and huggingface.co. Both are mirrored on loopback at the same paths, so only the
host differs (the test asserts the URLs the editor computes for the real hosts). The runtime's ports are free ones
(other tests share this machine) and Play Mode enters without a domain reload (the stub reloads its own C# state,
which the Python side of this test cannot follow)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.file_server import FileServer, Served
from tests.unity_layer.conftest import free_ports, load_sample
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.frames import pump_until
from tools import package_runtime
from tools.build_csharp import build_hosting
from tools.build_runtime import DEFAULT_DIST, DEFAULT_WORK, build
from tools.package_version import git_url

README = (ROOT / "unity_package" / "README.md").read_text(encoding="utf-8")
MANIFEST = json.loads((ROOT / "unity_package" / "package.json").read_text(encoding="utf-8"))
RELEASE = f"https://github.com/coreai-runtime/coreai-runtime/releases/download/v{MANIFEST['version']}"


def _readme_git_url() -> str:
    """Step 1's URL, as a user copies it from the README."""
    [url] = re.findall(r"^\s+(https://\S+\.git\?path=\S+)$", README, re.M)
    return url


def _project(root: Path, git_url_line: str) -> Path:
    """A Unity project after "Add package from git URL": the URL in Packages/manifest.json, the package in
    Library/PackageCache (so nothing under Packages/<name>/)."""
    (root / "Assets").mkdir(parents=True)
    (root / "Packages").mkdir()
    manifest = {"dependencies": {MANIFEST["name"]: git_url_line, "com.unity.nuget.newtonsoft-json": "3.2.1"}}
    (root / "Packages" / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return root


def _settings() -> Any:
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.name = "CoreAIRuntimeSettings"
    return settings


def test_a_git_install_finds_the_release_of_its_own_version(assemblies: Path, tmp_path: Path) -> None:
    from CoreAI.EditorTools import CoreAIPackage, ModelsPanel

    assert CoreAIPackage.Name == MANIFEST["name"] == ModelsPanel.PackageName
    assert CoreAIPackage.Version == MANIFEST["version"]  # compiled in: a git install has no Packages/<name>/
    assert _readme_git_url() == git_url(ROOT)
    tagged = ModelsPanel(_settings(), str(_project(tmp_path / "tagged", _readme_git_url())))
    assert tagged.InstalledReleaseUrl() == RELEASE
    # Without a #tag Package Manager follows the default branch; the release is the package version's.
    untagged = ModelsPanel(_settings(), str(_project(tmp_path / "untagged", _readme_git_url().split("#")[0])))
    assert untagged.InstalledReleaseUrl() == RELEASE


def _finish(panel: Any, task: Any, what: str, timeout: float = 600) -> None:
    """Run the editor's updates (the Models window's Pump) until `task` ends; it must have succeeded."""
    deadline = time.monotonic() + timeout
    while not task.IsCompleted:
        panel.Pump()
        assert time.monotonic() < deadline, f"{what} did not finish"
        time.sleep(0.02)
    panel.Pump()
    assert task.Result is True, f"{what}: {panel.Status}"


@pytest.fixture
def editor(assemblies: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh editor in Edit Mode on an empty scene; the runtime it started is stopped afterwards."""
    from UnityEditor import StubDomain, StubEditorState, StubPlayMode
    from UnityEngine import StubEngine, StubLog, StubState

    monkeypatch.delenv("COREAI_LLAMA_SERVER", raising=False)  # the fetched runtime runs its own llama-server
    StubState.IsEditor, StubState.IsPlaying, StubEditorState.IsPlaying = True, False, False
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.DataPath = str(tmp_path / "Project" / "Assets")
    StubLog.Clear()
    StubEngine.DestroyEverything()
    StubDomain.Reload()
    yield tmp_path / "Project"
    if StubState.IsPlaying:
        StubPlayMode.Exit()
    StubState.IsEditor = False
    from CoreAI.Launcher import RuntimeLauncher
    from System import TimeSpan

    RuntimeLauncher.StopRecorded(str(tmp_path / "persistent"), TimeSpan.FromSeconds(10))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Served]:
    """What the release workflow publishes for this machine: the frozen runtime, checked and packed, with its sha256."""
    from tools.package_runtime import check_binaries, host_arch, host_os

    frozen = build(DEFAULT_DIST, DEFAULT_WORK).parent
    check_binaries(frozen, host_os(), host_arch())
    archive, checksum = package_runtime.package(frozen, tmp_path_factory.mktemp("release"), host_os(), host_arch())
    path = urlsplit(RELEASE).path
    return {f"{path}/{archive.name}": Served(archive.read_bytes()),
            f"{path}/{checksum.name}": Served(checksum.read_bytes())}


@pytest.fixture(scope="module")
def sample(assemblies: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Step 6's import: the Blacksmith sample compiled into the project, loaded."""
    return load_sample(tmp_path_factory.mktemp("sample"), build_hosting())


def _scene(settings: Any) -> tuple[Any, Any]:
    """The scene of steps 5 and 6, as Unity loads it for a Play: the `CoreAI` object with the bootstrap (the settings
    assigned) and the Blacksmith NPC."""
    from CoreAI.Samples.BlacksmithNpc import BlacksmithNpc
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEngine import GameObject

    game_object = GameObject("CoreAI")
    bootstrap = game_object.AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = settings
    return bootstrap, game_object.AddComponent[BlacksmithNpc]()


def _turns_logged(persistent: Path) -> str:
    """The runtime log's turn summaries (status, rounds; never player text)."""
    lines = [line for log in persistent.rglob("runtime.log") for line in log.read_text(errors="replace").splitlines()
             if "turn ended" in line]
    return "; ".join(line.split("]: ", 1)[-1] for line in lines)


def _say(npc: Any, line: str) -> str:
    """Type `line` into Brom's box and press Say; frames run until he answers."""
    turn = npc.Ask(line)
    pump_until(lambda: turn.IsCompleted, 300, f"Brom's answer to {line!r}")
    return str(npc.Reply)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a cold PyInstaller build, a ~100 MB archive and the 98 MB model through the C# downloads
def test_the_readme_quickstart_ends_with_the_blacksmith_answering(editor: Path, release: dict[str, Served],
                                                                  sample: Path) -> None:
    from CoreAI.Downloads import CatalogModel, ModelCatalog, RuntimeArchive
    from CoreAI.EditorTools import ModelsPanel
    from CoreAI.UnityIntegration import RuntimeProgram
    from UnityEditor import StubPlayMode

    from pyruntime.model.hosting.embedded import embedded_model_path

    # 1. Add the package from the README's git URL (Package Manager writes it into Packages/manifest.json).
    project = _project(editor, _readme_git_url())
    hub = FileServer(dict(release))
    try:
        # 2. Assets → Create → CoreAI → Runtime Settings.
        settings = _settings()
        settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
        panel = ModelsPanel(settings, str(project))

        # 3. CoreAI → Fetch Runtime for This Editor: this editor's OS and CPU, from the release of the URL's tag.
        assert panel.InstalledReleaseUrl() == RELEASE
        os_name = ModelsPanel.EditorOs()
        fetch = panel.FetchRuntime(os_name, RuntimeArchive.HostArch(os_name), hub.url(urlsplit(RELEASE).path))
        _finish(panel, fetch, "Fetch Runtime")
        assert settings.RuntimeProgram == RuntimeProgram.BundledExecutable
        assert settings.RuntimePath == "CoreAIRuntime/Linux/coreai-runtime"
        assert (project / "CoreAIRuntime" / "Linux" / "llama-server").stat().st_mode & 0o111  # executable again

        # 4. CoreAI → Models and Runtime → smollm2-135m → Pull and assign to the settings.
        [entry] = [e for e in ModelCatalog.Entries if e.Name == "smollm2-135m"]
        gguf = embedded_model_path().read_bytes()  # the identical file, from its PyPI package
        assert hashlib.sha256(gguf).hexdigest() == entry.Sha256 and len(gguf) == entry.SizeBytes
        hub.files[urlsplit(entry.Url).path] = Served(gguf)
        mirrored = CatalogModel(entry.Name, hub.url(urlsplit(entry.Url).path), entry.Sha256, entry.SizeBytes,
                                entry.License, entry.ContextLength, entry.ToolMode, entry.MemoryDesign,
                                entry.Description, entry.ChecksumSource)
        _finish(panel, panel.Pull(mirrored), "the model pull")
        assert settings.ModelName == "smollm2-135m" and (project / settings.ModelPath).is_file()

        # 5. GameObject → Create Empty "CoreAI" → Add Component → CoreAI Runtime Bootstrap, the settings assigned.
        # 6. Import the sample, add Blacksmith NPC to the CoreAI object, press Play, say a line: Brom answers.
        bootstrap, npc = _scene(settings)
        StubPlayMode.Enter(False)
        pump_until(lambda: bootstrap.IsReady, 180, "the runtime to start")
        assert str(bootstrap.Endpoint.ProcessId) and "(Brom looks up" in str(npc.Reply)
        first = _say(npc, "Hello! I am Alex, a traveller from the north.")
        # A real answer, not the sample's error text (the log's turn summaries say how the turn ended).
        assert first.strip() and not first.startswith("("), first + " | " + _turns_logged(editor.parent / "persistent")

        # Stop, play again (Unity loads the scene anew: the objects of the first Play were destroyed), ask who you are.
        StubPlayMode.Exit()
        bootstrap, npc = _scene(settings)
        StubPlayMode.Enter(False)
        pump_until(lambda: bootstrap.IsReady and "(Brom looks up" in str(npc.Reply), 180, "the runtime after Play")
        second = _say(npc, "Do you remember me? Who am I?")
        assert second.strip() and not second.startswith("("), second
    finally:
        hub.close()
