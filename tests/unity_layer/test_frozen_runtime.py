"""The frozen runtime (tools/build_runtime.py, PyInstaller one-folder) with no Python anywhere in reach:
`--version`, then started by the compiled C# launcher with a PATH scrubbed of Python - health, a memory write
that lands on disk, a turn with the tiny model, stop with nothing left; and a SIGKILLed game takes it along.

The build is cached by tools/build_runtime.py (skipped while its inputs are unchanged): ~40 s cold here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeClient
from pyruntime.model.hosting.llama_server import LLAMA_SERVER_ENV, binary_name
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import cmdline, engine_of, environ, is_alive, wait_for
from tests.unity_layer.test_launcher_lifeline import sigkill_game_and_check_runtime_gone
from tools.build_runtime import DEFAULT_DIST, DEFAULT_WORK, build, scrubbed_environment

SCOPE = AgentMemoryScope(user_id="player-1")
pytestmark = pytest.mark.timeout(900)  # the first test includes a cold PyInstaller build on a loaded machine


def _no_python_on(path: str) -> bool:
    return not any((Path(folder) / name).exists() for folder in path.split(":") if folder
                   for name in ("python", "python3"))


def test_the_frozen_runtime_reports_its_version_with_no_python_in_reach(frozen_runtime: Path) -> None:
    env = scrubbed_environment()
    assert _no_python_on(env["PATH"]) and not any(k.startswith("PYTHON") for k in env)
    result = subprocess.run([str(frozen_runtime), "--version"], capture_output=True, text=True, env=env, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "coreai-runtime 0.1.0"
    assert not (frozen_runtime.parent / "_internal" / "pytest").exists()  # dev-only packages stay out
    # GNU readline is GPL-3.0: a game build must not carry it (THIRD_PARTY_NOTICES.md says it is left out).
    assert not list((frozen_runtime.parent / "_internal").rglob("libreadline*"))


def test_the_ci_smoke_test_passes_on_the_build_and_fails_without_one(frozen_runtime: Path, tmp_path: Path) -> None:
    from tools.smoke_runtime import SmokeError, smoke

    timings = smoke(frozen_runtime.parent.parent)  # what .github/workflows/frozen-runtime.yml runs on each OS
    assert 0 < timings["ready_s"] <= timings["total_s"]
    with pytest.raises(SmokeError, match="does not exist"):
        smoke(tmp_path / "empty-dist")


def test_the_launcher_runs_the_frozen_runtime_end_to_end(frozen_runtime: Path, make_options, launchers,
                                                         tiny_endless_model_path: Path, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    data_dir = tmp_path / "persistent"
    options = make_options(data_dir, RuntimePath=str(frozen_runtime), WorkingDirectory=str(tmp_path))
    # The endless variant: the plain tiny model samples <|im_end|> first now and then (an empty reply, no seed
    # to pin), and this test checks that a turn's text comes back through the frozen build.
    options.ModelPath = str(tiny_endless_model_path)
    options.RuntimeArguments.Clear()
    clean = scrubbed_environment()
    options.Environment.Clear()
    options.Environment["PATH"] = clean["PATH"]
    options.Environment[LLAMA_SERVER_ENV] = ""  # (a developer's override): the folder's own llama-server runs
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    endpoint = launcher.Start()

    runtime = endpoint.ProcessId
    assert cmdline(runtime)[0] == str(frozen_runtime)
    assert _no_python_on(environ(runtime)["PATH"])
    [model] = engine_of(runtime)
    assert cmdline(model)[0] == str(frozen_runtime.parent / binary_name())  # the shipped llama-server, no python
    with RuntimeClient(endpoint.ConnectBaseUrl, token=endpoint.Token, timeout=120) as client:
        health = client.health()
        assert health.ready and health.model_ready
        written = client.apply_memory_tool("Blacksmith", {"action": "append", "content": "frozen and shipped"},
                                           scope=SCOPE)
        assert written.success, written.error
        turn = client.run_task("hi", role_id="PlainChat", scope=SCOPE, max_output_tokens=8, forced_tool_mode="none")
        assert turn.status == pb.TURN_STATUS_OK and turn.text
    launcher.Stop()
    assert not is_alive(runtime)
    wait_for(lambda: not is_alive(model), 10, "the frozen model child to exit")
    loaded = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir).memory.try_load(
        storage_key("Blacksmith", SCOPE))
    assert loaded.status is LoadStatus.LOADED and loaded.state is not None
    assert loaded.state.memory == "frozen and shipped"


def test_sigkilling_the_game_takes_the_frozen_runtime_along(frozen_runtime: Path, assemblies, tiny_model: Path,
                                                            tmp_path: Path) -> None:
    sigkill_game_and_check_runtime_gone(str(frozen_runtime), [], tiny_model, tmp_path)


def test_the_build_is_reused_while_its_inputs_are_unchanged(frozen_runtime: Path, capsys) -> None:
    stamp = frozen_runtime.parent / ".build-stamp.json"
    for _ in range(3):  # in a checkout others are editing, a source may change between two builds: build again
        build(DEFAULT_DIST, DEFAULT_WORK)
        before = stamp.stat().st_mtime_ns
        capsys.readouterr()
        assert build(DEFAULT_DIST, DEFAULT_WORK) == frozen_runtime
        if "up to date" in capsys.readouterr().out:
            break
    else:
        raise AssertionError("an unchanged build was rebuilt three times in a row")
    assert stamp.stat().st_mtime_ns == before
    assert ROOT in frozen_runtime.parents
