"""The launcher against what real editors and players do (issue 28 items 1, 7, 9, 10, 12, 13), with the real runtime:

- no pipe anywhere: the runtime writes its own log (`serve --log-file`), so nothing goes silent or blocks after a
  domain reload; the Windows start (no shell) is run here too;
- Detach while the runtime is still starting leaves it starting, and the next launcher reuses it;
- a bundled runtime that lost its executable bit is launched anyway; symbolic links stay links in a player build;
- Stop is the authenticated Shutdown call first (Windows' only graceful stop), kill only as the fallback;
- a second editor process of the project (another parent pid) shares the runtime; taken ports are replaced by this
  project's own, and said so;
- Delete All Saves is not undone by a watching launcher's restart; a state file that cannot be written stops the
  runtime instead of leaving it on its ports; an LLM API key reaches the runtime by environment only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.unity_layer.conftest import PYTHON, free_ports
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import cmdline, environ, is_alive, processes_mentioning, wait_for

KEY_VARIABLE = "COREAI_TEST_LLM_KEY"


def _private(type_name: str, method: str) -> Any:
    from System.Reflection import BindingFlags

    from tests.support.internals import clr_type

    found = clr_type(type_name)
    return found.GetMethod(method, BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic)


def _kinds(launcher) -> list[str]:
    return [str(e.Kind) for e in launcher.RecentEvents]


class GatedModelServer:
    """An OpenAI-compatible /v1/models that answers only once opened (a model server still loading)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.opened = threading.Event()
        self.authorizations: list[str] = []
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                gate.authorizations.append(self.headers.get("Authorization", ""))
                gate.asked.set()
                gate.opened.wait(60)
                body = json.dumps({"object": "list", "data": [{"id": "gated-model", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.opened.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gated_model():
    server = GatedModelServer()
    yield server
    server.close()


def test_the_launcher_gives_the_runtime_its_log_file_and_no_pipe(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options())
    launchers.append(launcher)
    endpoint = launcher.Start()
    argv = cmdline(endpoint.ProcessId)
    assert argv[argv.index("--log-file") + 1] == launcher.LogFilePath
    # Neither stream of the runtime is a pipe this process would have to keep reading.
    for fd in (1, 2):
        assert not os.readlink(f"/proc/{endpoint.ProcessId}/fd/{fd}").startswith("pipe:")
    assert "ready;" in Path(launcher.LogFilePath).read_text()


def test_detach_during_the_first_model_load_leaves_the_runtime_to_the_next_launcher(make_options, launchers, gated_model,
                                                                                    tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchFailure

    options = make_options(tmp_path / "persistent", ModelPath=None, LlmUrl=gated_model.url)
    first = RuntimeLauncher(options)
    starting = first.StartAsync()
    assert gated_model.asked.wait(90), "the runtime never asked its model"
    state = json.loads(Path(first.StateFilePath).read_text())
    assert state["starting"] is True, "recorded at spawn, before it is ready"
    pid = state["pid"]
    first.Detach()  # Stop pressed, or a recompile, while the model loads
    wait_for(lambda: starting.IsCompleted, 30, "the detached start to end")
    assert starting.IsFaulted
    assert starting.Exception.GetBaseException().Failure == RuntimeLaunchFailure.Detached
    assert is_alive(pid), "Detach must not kill a runtime that is still starting"

    second = RuntimeLauncher(options)
    launchers.append(second)
    reusing = second.StartAsync()
    gated_model.opened.set()  # the model finishes loading
    wait_for(lambda: reusing.IsCompleted, 90, "the next launcher's start")
    endpoint = reusing.GetAwaiter().GetResult()
    assert endpoint.ProcessId == pid and second.Reused
    assert httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=10).json()["ready"] is True
    assert processes_mentioning(f"--connect-port {options.ConnectPort}") == [pid]


def test_a_runtime_that_lost_its_executable_bit_is_launched(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    runtime = tmp_path / "StreamingAssets" / "CoreAI" / "runtime" / "coreai-runtime"
    runtime.parent.mkdir(parents=True)
    runtime.write_text(f'#!/bin/sh\nexec "{PYTHON}" -m pyruntime.cli "$@"\n')
    runtime.chmod(0o644)  # what a Windows cross-build, a zip or a store upload leaves
    options = make_options(RuntimePath=str(runtime))
    options.RuntimeArguments.Clear()
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    assert launcher.Start().ProcessId > 0
    assert runtime.stat().st_mode & 0o111 == 0o111


def test_symbolic_links_stay_links_in_a_player_build(assemblies, tmp_path: Path) -> None:
    from CoreAI.Launcher import BundledRuntime

    built = tmp_path / "dist" / "coreai-runtime"
    (built / "lib").mkdir(parents=True)
    (built / "coreai-runtime").write_text("#!/bin/sh\n")
    (built / "lib" / "libpython3.11.so.1.0").write_bytes(b"\x7fELF library")
    os.symlink("libpython3.11.so.1.0", built / "lib" / "libpython3.11.so")
    framework = built / "Python.framework"
    (framework / "Versions" / "A").mkdir(parents=True)
    (framework / "Versions" / "A" / "Python").write_bytes(b"framework binary")
    os.symlink("A", framework / "Versions" / "Current")
    os.symlink("Versions/Current/Python", framework / "Python")
    streaming = tmp_path / "Game.app" / "Contents" / "Resources" / "Data" / "StreamingAssets"
    result = BundledRuntime.CopyInto("StandaloneOSX", "macos", str(built), None, str(streaming))
    copied = Path(result.RuntimeFolder)
    for link, target in (("lib/libpython3.11.so", "libpython3.11.so.1.0"), ("Python.framework/Versions/Current", "A"),
                         ("Python.framework/Python", "Versions/Current/Python")):
        assert (copied / link).is_symlink(), f"{link} was copied as what it points at"
        assert os.readlink(copied / link) == target
    assert (copied / "Python.framework" / "Python").read_bytes() == b"framework binary"
    assert result.FileCount == 6


def test_stop_asks_the_runtime_to_shut_down_before_any_signal(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options())
    pid = launcher.Start().ProcessId
    launcher.Stop()
    assert not is_alive(pid)
    log = Path(launcher.LogFilePath).read_text()
    # The graceful path every OS has (Windows has no SIGTERM): the authenticated call, then the clean shutdown.
    assert "stop requested by a Shutdown call" in log and "RPC servers stopped" in log


def test_a_second_editor_process_of_the_project_shares_the_runtime(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    other_editor = subprocess.Popen(["sleep", "600"])  # the other editor process's pid
    try:
        options = make_options(tmp_path / "persistent")
        first = RuntimeLauncher(options)
        launchers.append(first)
        pid = first.Start().ProcessId
        second_options = make_options(tmp_path / "persistent")
        second_options.ConnectPort, second_options.GrpcPort, second_options.ModelPort = (
            options.ConnectPort, options.GrpcPort, options.ModelPort)
        second_options.ParentProcessId = other_editor.pid
        assert second_options.Fingerprint() == options.Fingerprint(), "the parent pid is not part of the digest"
        second = RuntimeLauncher(second_options)
        launchers.append(second)
        assert second.Start().ProcessId == pid and second.Reused
        assert is_alive(pid) and first.IsHealthy()
    finally:
        other_editor.kill()
        other_editor.wait()


def test_taken_ports_are_replaced_by_the_projects_own_and_reported(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchException, RuntimeLaunchFailure

    options = make_options(tmp_path / "persistent")
    squatter = socket.socket()  # another game's runtime on our Connect port
    squatter.bind(("127.0.0.1", options.ConnectPort))
    squatter.listen()
    try:
        expected = [list(c) for c in RuntimeLauncher.PortCandidates("test-project\n")]
        assert expected == [list(c) for c in RuntimeLauncher.PortCandidates("test-project\n")], "the same each time"
        assert all(20000 <= p <= 31999 for c in expected for p in c)
        launcher = RuntimeLauncher(options)
        launchers.append(launcher)
        endpoint = launcher.Start()
        chosen = [endpoint.ConnectPort, endpoint.GrpcPort, endpoint.ModelPort]
        assert chosen in expected
        [event] = [e for e in launcher.RecentEvents if str(e.Kind) == "PortsChosen"]
        assert f"port {options.ConnectPort} was taken" in event.Message and f"Connect {chosen[0]}" in event.Message
        assert httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=10).json()["ready"] is True
        launcher.Detach()

        again = RuntimeLauncher(options)  # the next Play: found again on its own ports
        launchers.append(again)
        assert again.Start().ProcessId == endpoint.ProcessId and again.Reused

        strict = make_options(tmp_path / "other", ChoosePortsWhenTaken=False)
        strict.ConnectPort = options.ConnectPort
        with pytest.raises(RuntimeLaunchException) as info:
            RuntimeLauncher(strict).Start()
        assert info.value.Failure == RuntimeLaunchFailure.PortInUse
    finally:
        squatter.close()


def test_delete_all_saves_is_not_undone_by_a_watching_launchers_restart(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.EditorTools import PersistentSaves
    from CoreAI.Launcher import RuntimeLauncher

    data_dir = tmp_path / "persistent"
    inspector = RuntimeLauncher(make_options(data_dir).UseEditorInstance())  # the Memory Inspector's, watching
    launchers.append(inspector)
    pid = inspector.Start().ProcessId
    result = PersistentSaves.DeleteAll(str(data_dir), False)
    assert result.Deleted and result.StoppedRuntime
    # Stopped through the launcher itself (its watchdog first), so nothing restarts the runtime into the saves.
    assert _kinds(inspector)[-1] == "Stopped" and inspector.Endpoint is None
    assert not is_alive(pid)
    assert not (data_dir / "CoreAI").exists()


def test_a_state_file_that_cannot_be_written_leaves_no_runtime_on_its_ports(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchException, RuntimeLaunchFailure

    options = make_options()
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    Path(launcher.StateFilePath + ".tmp").mkdir(parents=True)  # the temp file cannot be created: a directory is there
    with pytest.raises(RuntimeLaunchException) as info:
        launcher.Start()
    assert info.value.Failure == RuntimeLaunchFailure.StateFileFailed
    assert "launcher.json" in info.value.Message
    wait_for(lambda: not processes_mentioning(f"--connect-port {options.ConnectPort}"), 30, "no runtime left")
    for port in (options.ConnectPort, options.GrpcPort, options.ModelPort):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free again


def test_the_llm_api_key_reaches_the_runtime_by_environment_only(make_options, launchers, gated_model, monkeypatch,
                                                                 tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings, RuntimeProgram
    from System.Reflection import BindingFlags
    from UnityEngine import ScriptableObject, SerializeField, StubLog

    key = "sk-test-" + "k" * 40
    monkeypatch.setenv(KEY_VARIABLE, key)
    gated_model.opened.set()
    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RuntimeProgram = RuntimeProgram.PythonEnvironment
    settings.RuntimePath = str(PYTHON)
    settings.LlmUrl = gated_model.url
    settings.LlmApiKeyEnvironmentVariable = KEY_VARIABLE
    settings.ConnectPort, settings.GrpcPort, settings.ModelPort = free_ports(3)
    options = settings.ToLaunchOptions(str(tmp_path / "persistent"), str(tmp_path / "Project"), "p1")
    options.WorkingDirectory = str(ROOT)
    options.Environment["PYTHONPATH"] = str(ROOT)
    assert options.LlmApiKey == key
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    endpoint = launcher.Start()
    assert environ(endpoint.ProcessId)["COREAI_LLM_API_KEY"] == key
    assert key not in " ".join(cmdline(endpoint.ProcessId)), "never on the command line"
    assert key not in Path(launcher.StateFilePath).read_text() and key not in options.Fingerprint()
    assert not any(key in line for line in StubLog.Lines)
    # The asset stores where the key is, never the key.
    flags = BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public
    for field in settings.GetType().GetFields(flags):
        if field.IsDefined(SerializeField, False) or field.IsPublic:
            assert key not in str(field.GetValue(settings) or "")

    # From code (a login service) it wins; an empty variable with no file is a clear error naming the setting.
    settings.LlmApiKey = "from-code-key-0123456789"
    assert settings.ResolveLlmApiKey(str(tmp_path)) == "from-code-key-0123456789"
    settings.LlmApiKey = None
    monkeypatch.delenv(KEY_VARIABLE)
    from CoreAI.Launcher import RuntimeLaunchException

    with pytest.raises(RuntimeLaunchException) as info:
        settings.ResolveLlmApiKey(str(tmp_path))
    assert KEY_VARIABLE in info.value.Message and key not in info.value.Message
    (tmp_path / "llm.key").write_text(key + "\n")
    settings.LlmApiKeyEnvironmentVariable = ""
    settings.LlmApiKeyFile = "llm.key"
    assert settings.ResolveLlmApiKey(str(tmp_path)) == key
