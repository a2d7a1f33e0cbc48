"""The editor's build step (RuntimeBuildStep, compiled against the stub UnityEditor): a Linux player build gets the
real frozen runtime and the model under StreamingAssets/CoreAI, and that player's bootstrap runs them; macOS goes
inside the .app; a target without a runtime folder fails the build naming the folder; process-less targets and
bundling off copy nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.unity_layer.conftest import free_ports
from tests.unity_layer.processes import cmdline, is_alive, wait_for
from tools.build_runtime import scrubbed_environment

pytestmark = pytest.mark.timeout(900)  # may include a cold PyInstaller build


@pytest.fixture
def project(assemblies, tmp_path: Path):
    """An editor project under tmp (Assets, StubState) whose settings asset the AssetDatabase stub finds."""
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from UnityEditor import StubAssets
    from UnityEngine import ScriptableObject, StubState

    root = tmp_path / "Project"
    (root / "Assets").mkdir(parents=True)
    StubState.DataPath = str(root / "Assets")
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RuntimeProgram = RuntimeProgram.BundledExecutable
    StubAssets.ByPath["Assets/CoreAIRuntimeSettings.asset"] = settings
    yield root, settings
    StubAssets.ByPath.Clear()
    StubState.DataPath = ""
    StubState.IsEditor = False
    StubState.StreamingAssetsPath = ""


def _report(target: str, output: Path):
    from UnityEditor import BuildTarget
    from UnityEditor.Build.Reporting import BuildReport, BuildSummary

    summary = BuildSummary()
    summary.platform = getattr(BuildTarget, target)
    summary.outputPath = str(output)
    return BuildReport(summary)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_linux_player_carries_the_frozen_runtime_and_its_bootstrap_runs_it(
        project, frozen_runtime: Path, tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep
    from CoreAI.UnityIntegration import CoreAIRuntimeBootstrap
    from UnityEngine import GameObject, StubState

    root, settings = project
    settings.LinuxRuntimeFolder = str(frozen_runtime.parent)
    settings.ModelPath = str(tiny_model)
    settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
    RuntimeBuildStep().OnPostprocessBuild(_report("StandaloneLinux64", tmp_path / "Build" / "Game.x86_64"))

    streaming = tmp_path / "Build" / "Game_Data" / "StreamingAssets"
    bundled = streaming / "CoreAI" / "runtime" / "coreai-runtime"
    assert _files(streaming / "CoreAI" / "runtime") == _files(frozen_runtime.parent)
    assert os.access(bundled, os.X_OK)  # still executable after the copy
    assert (streaming / "CoreAI" / "models" / tiny_model.name).read_bytes() == tiny_model.read_bytes()
    version = subprocess.run([str(bundled), "--version"], capture_output=True, text=True, timeout=120,
                             env=scrubbed_environment(), check=False)
    assert version.stdout.startswith("coreai-runtime "), version.stderr

    # The player: its bootstrap runs the runtime and the model its build carries, whatever Runtime Path says.
    settings.RuntimePath = "not-installed-anywhere"
    StubState.IsEditor = False
    StubState.StreamingAssetsPath = str(streaming)
    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.IsPlaying = True
    monkeypatch.setenv("PATH", scrubbed_environment()["PATH"])
    bootstrap = GameObject("CoreAI").AddComponent[CoreAIRuntimeBootstrap]()
    bootstrap.Settings = settings
    try:
        endpoint = bootstrap.StartRuntime().Result
        argv = cmdline(endpoint.ProcessId)
        assert argv[0] == str(bundled)
        assert argv[argv.index("--model") + 1] == str(streaming / "CoreAI" / "models" / tiny_model.name)
        assert argv[argv.index("--config") + 1] == str(streaming / "CoreAI" / "coreai-runtime.json")
        assert httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=30).json()["ready"] is True
    finally:
        bootstrap.StopRuntime()
        StubState.IsPlaying = False
        StubState.PersistentDataPath = ""
    wait_for(lambda: not is_alive(endpoint.ProcessId), 10, "the bundled runtime to stop")


def test_a_macos_build_puts_the_runtime_inside_the_app_bundle(project, tmp_path: Path) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep

    root, settings = project
    # What tools/build_runtime.py makes on a Mac cannot be made here: a folder of the same shape stands in.
    mac = root / "CoreAIRuntime" / "macOS"
    (mac / "_internal").mkdir(parents=True)
    (mac / "coreai-runtime").write_bytes(b"mac executable")
    (mac / "_internal" / "libllama.dylib").write_bytes(b"lib")
    result = RuntimeBuildStep.Bundle(settings, "StandaloneOSX", str(tmp_path / "Build" / "Game.app"), str(root))
    streaming = tmp_path / "Build" / "Game.app" / "Contents" / "Resources" / "Data" / "StreamingAssets"
    assert result.Platform == "macos" and result.FileCount == 2 and result.ModelFile is None
    assert Path(result.Executable) == streaming / "CoreAI" / "runtime" / "coreai-runtime"
    assert _files(streaming) == ["CoreAI/coreai-runtime.json", "CoreAI/runtime/_internal/libllama.dylib",
                                 "CoreAI/runtime/coreai-runtime"]


def test_the_build_writes_serve_settings_that_the_bundled_runtime_is_started_with(project, tiny_model: Path,
                                                                                  tmp_path: Path) -> None:
    import json

    from CoreAI.Ai import AgentMemoryPersistenceMode
    from CoreAI.EditorTools import RuntimeBuildStep
    from CoreAI.Launcher import BundledRuntime, RuntimeLaunchOptions

    from pyruntime.cli import build_parser
    from pyruntime.cli.serve import options_from_args

    root, settings = project
    linux = root / "CoreAIRuntime" / "Linux"
    linux.mkdir(parents=True)
    (linux / "coreai-runtime").write_bytes(b"linux executable")
    settings.ModelPath = str(tiny_model)
    settings.PersistenceMode = AgentMemoryPersistenceMode.SessionOnly
    settings.ChatHistoryMessageCap, settings.ContextTokens = 40, 1024
    result = RuntimeBuildStep.Bundle(settings, "StandaloneLinux64", str(tmp_path / "Build" / "Game.x86_64"), str(root))
    config = Path(result.ConfigFile)
    assert config == tmp_path / "Build" / "Game_Data" / "StreamingAssets" / "CoreAI" / "coreai-runtime.json"
    assert json.loads(config.read_text()) == {"session_only": True, "chat_history_cap": 40, "transcript_cap": 2000,
                                              "ctx": 1024, "model": f"models/{tiny_model.name}"}
    # serve reads it as it is (its keys, its types; the model relative to the file).
    served = options_from_args(build_parser().parse_args(["serve", "--config", str(config)]))
    assert (served.session_only, served.chat_history_cap, served.transcript_cap, served.ctx) == (True, 40, 2000, 1024)
    assert served.model == config.parent / "models" / tiny_model.name and served.model.is_file()

    # The player's launcher passes the file: `serve --config …` (its own flags still win).
    options = RuntimeLaunchOptions()
    options.DataDir = str(tmp_path / "persistent")
    assert BundledRuntime.UseBundled(options, str(config.parent.parent))
    args = list(options.BuildArguments())
    assert args[args.index("--config") + 1] == str(config)


def test_a_target_without_its_runtime_folder_fails_the_build_naming_the_folder(project, tmp_path: Path) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep
    from UnityEditor.Build import BuildFailedException

    root, settings = project
    output = tmp_path / "Build" / "Game.exe"
    with pytest.raises(BuildFailedException) as failed:
        RuntimeBuildStep().OnPostprocessBuild(_report("StandaloneWindows64", output))
    message = str(failed.value.Message)
    assert "StandaloneWindows64" in message and str(root / "CoreAIRuntime" / "Windows") in message
    assert "python tools/build_runtime.py" in message
    assert not (tmp_path / "Build").exists()  # nothing half-copied

    (root / "CoreAIRuntime" / "Windows").mkdir(parents=True)
    (root / "CoreAIRuntime" / "Windows" / "coreai-runtime").write_bytes(b"a Linux build in the Windows folder")
    with pytest.raises(BuildFailedException, match="has no coreai-runtime.exe"):
        RuntimeBuildStep.Bundle(settings, "StandaloneWindows64", str(output), str(root))

    (root / "CoreAIRuntime" / "Windows" / "coreai-runtime.exe").write_bytes(b"windows executable")
    settings.ModelPath = "Models/missing.gguf"
    with pytest.raises(BuildFailedException, match="model file .*missing.gguf.* is missing"):
        RuntimeBuildStep.Bundle(settings, "StandaloneWindows64", str(output), str(root))
    assert not (tmp_path / "Build").exists()


def test_a_player_that_could_reach_no_runtime_is_refused_at_build_time(project) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep
    from UnityEditor.Build import BuildFailedException

    _, settings = project
    for target in ("Android", "iOS", "PS5", "Switch"):
        with pytest.raises(BuildFailedException,
                           match=f"{target} cannot start the CoreAI runtime.*no player ships without"):
            RuntimeBuildStep.Refuse(settings, target)
    with pytest.raises(BuildFailedException, match="WebGL is not supported"):
        RuntimeBuildStep.Refuse(settings, "WebGL")
    for target in ("StandaloneWindows64", "StandaloneOSX", "StandaloneLinux64"):
        RuntimeBuildStep.Refuse(settings, target)  # they start their own
    settings.RemoteUrlFromCode = True  # the game sets RemoteUrl at run time
    RuntimeBuildStep.Refuse(settings, "Android")
    settings.RemoteUrlFromCode = False
    settings.RemoteUrl = "https://game.example:13335"  # remote mode
    RuntimeBuildStep.Refuse(settings, "iOS")
    with pytest.raises(BuildFailedException, match="WebGL is not supported"):
        RuntimeBuildStep.Refuse(settings, "WebGL")  # neither a runtime of its own nor a remote one


def test_the_refusal_runs_before_the_build(project, tmp_path: Path) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep
    from UnityEditor import BuildTarget, StubAssets
    from UnityEditor.Build import BuildFailedException
    from UnityEditor.Build.Reporting import BuildReport, BuildSummary

    _, settings = project
    StubAssets.ByPath["Assets/CoreAIRuntimeSettings.asset"] = settings
    summary = BuildSummary()
    summary.platform, summary.outputPath = BuildTarget.Android, str(tmp_path / "Build" / "game.apk")
    try:
        with pytest.raises(BuildFailedException, match="Android cannot start"):
            RuntimeBuildStep().OnPreprocessBuild(BuildReport(summary))
    finally:
        StubAssets.ByPath.Clear()


def test_process_less_targets_and_bundling_off_copy_nothing(project, tmp_path: Path) -> None:
    from CoreAI.EditorTools import RuntimeBuildStep

    root, settings = project
    settings.RemoteUrl = "https://game.example:13335"
    for target in ("Android", "iOS"):
        assert RuntimeBuildStep.Bundle(settings, target, str(tmp_path / "Build" / "game"), str(root)) is None
    settings.BundleRuntimeInBuilds = False
    assert RuntimeBuildStep.Bundle(settings, "StandaloneLinux64", str(tmp_path / "Build" / "Game.x86_64"),
                                   str(root)) is None
    assert not (tmp_path / "Build").exists()


def test_a_player_without_a_bundled_runtime_keeps_its_settings(assemblies, tmp_path: Path) -> None:
    from CoreAI.Launcher import BundledRuntime, RuntimeLaunchOptions

    options = RuntimeLaunchOptions()
    options.RuntimePath = "coreai-runtime"
    options.ModelPath = "/models/npc.gguf"
    assert not BundledRuntime.UseBundled(options, str(tmp_path / "StreamingAssets"))
    assert not BundledRuntime.UseBundled(options, "")
    assert options.RuntimePath == "coreai-runtime" and options.ModelPath == "/models/npc.gguf"
