"""The launcher against the real runtime: start + health, reuse after a domain reload, restart with
backoff after a crash, stop leaves no process."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.unity_layer.processes import cmdline, engine_of, environ, is_alive, processes_mentioning, tree, wait_for


def _health(endpoint) -> dict:
    response = httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=5.0)
    assert response.status_code == 200
    return response.json()


def _kinds(launcher) -> list[str]:
    return [str(e.Kind) for e in launcher.RecentEvents]


def test_start_answers_health_and_records_the_runtime(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    data_dir = tmp_path / "persistent"
    launcher = RuntimeLauncher(make_options(data_dir))
    launchers.append(launcher)
    endpoint = launcher.Start()

    assert _health(endpoint)["ready"] is True
    assert endpoint.ProcessId == launcher.ProcessId and is_alive(endpoint.ProcessId)
    assert not launcher.Reused and _kinds(launcher) == ["Started"]
    argv = cmdline(endpoint.ProcessId)
    assert argv[argv.index("--data-dir") + 1] == str(data_dir)
    assert "serve" in argv and str(endpoint.ConnectPort) in argv
    # The token travels by environment, never on the command line other users can read.
    assert endpoint.Token not in " ".join(argv)
    assert environ(endpoint.ProcessId)["COREAI_RUNTIME_TOKEN"] == endpoint.Token
    state = json.loads(Path(launcher.StateFilePath).read_text())
    assert state["pid"] == endpoint.ProcessId and state["connectPort"] == endpoint.ConnectPort
    assert state["projectId"] == "test-project" and state["token"] == endpoint.Token
    assert Path(launcher.StateFilePath).parent == data_dir / "CoreAI" / "runtime"
    # The token authenticates calls: a wrong one is refused, the launcher's accepted.
    url = f"{endpoint.ConnectBaseUrl}/coreai.v1.Orchestrator/ListRoles"
    assert httpx.post(url, json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(url, json={}, headers={"Authorization": f"Bearer {endpoint.Token}"}).status_code == 200


def test_a_second_launcher_reuses_the_runtime_after_a_domain_reload(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    options = make_options(tmp_path / "persistent")
    first = RuntimeLauncher(options)
    launchers.append(first)
    pid = first.Start().ProcessId
    first.Detach()  # what the bootstrap does before a domain reload: the runtime keeps running

    second = RuntimeLauncher(options)
    launchers.append(second)
    endpoint = second.Start()
    assert endpoint.ProcessId == pid and second.Reused
    assert endpoint.Token == first_token(options)
    assert _kinds(second) == ["Reused"]
    assert _health(endpoint)["ready"] is True
    assert processes_mentioning(f"--connect-port {options.ConnectPort}") == [pid]


def test_a_runtime_caught_while_its_model_restarts_is_reused(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    model = tmp_path / "model.gguf"
    options = make_options(tmp_path / "persistent")
    model.write_bytes(Path(options.ModelPath).read_bytes())
    options.ModelPath = str(model)
    first = RuntimeLauncher(options)
    launchers.append(first)
    endpoint = first.Start()
    pid = endpoint.ProcessId
    first.Detach()
    model.write_bytes(b"not a model")  # every restart fails: the runtime stays "restarting" for a while
    [child] = engine_of(pid)
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=5.0).status_code == 503, 30,
             "/healthz answers 503 while the model restarts")

    second = RuntimeLauncher(options)
    launchers.append(second)
    # Live (/livez) though not ready (/healthz 503): the same runtime, not a second one fighting for its ports.
    assert second.Start().ProcessId == pid and second.Reused
    assert _kinds(second) == ["Reused"]


def first_token(options) -> str:
    from CoreAI.Launcher import RuntimeLauncher

    return json.loads(Path(RuntimeLauncher.RuntimeFolderOf(options.DataDir), "launcher.json").read_text())["token"]


def test_another_projects_runtime_is_never_reused(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchException, RuntimeLaunchFailure

    options = make_options(tmp_path / "persistent")
    first = RuntimeLauncher(options)
    launchers.append(first)
    first.Start()
    other = make_options(tmp_path / "persistent")
    other.ConnectPort, other.GrpcPort, other.ModelPort = options.ConnectPort, options.GrpcPort, options.ModelPort
    other.ProjectId = "another-project"
    with pytest.raises(RuntimeLaunchException) as info:
        RuntimeLauncher(other).Start()
    assert info.value.Failure == RuntimeLaunchFailure.PortInUse
    assert "another project" in info.value.Message
    assert is_alive(first.ProcessId), "the other project's runtime is left alone"


def test_a_killed_runtime_is_restarted_with_backoff(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options())
    launchers.append(launcher)
    first = launcher.Start().ProcessId

    os.kill(first, signal.SIGKILL)
    wait_for(lambda: launcher.RestartCount == 1 and launcher.IsHealthy(), 60, "the first restart")
    second = launcher.ProcessId
    assert second not in (0, first) and not is_alive(first)

    os.kill(second, signal.SIGKILL)  # dies again soon after: the next delay doubles
    wait_for(lambda: launcher.RestartCount == 2 and launcher.IsHealthy(), 60, "the second restart")
    assert launcher.ProcessId not in (0, first, second)

    events = launcher.RecentEvents
    restarting = [e for e in events if str(e.Kind) == "Restarting"]
    assert [e.Attempt for e in restarting] == [1, 2]
    assert [e.Delay.TotalMilliseconds for e in restarting] == [500, 1000]
    exited = [e.ProcessId for e in events if str(e.Kind) == "Exited"]
    assert exited == [first, second]
    state = json.loads(Path(launcher.StateFilePath).read_text())
    assert state["pid"] == launcher.ProcessId, "the state file follows the restarted runtime"


def test_stop_on_quit_leaves_no_process(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    options = make_options()
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    endpoint = launcher.Start()
    wait_for(lambda: len(tree(endpoint.ProcessId)) > 1, 30, "the model server child")
    family = tree(endpoint.ProcessId)

    launcher.Stop()  # what the bootstrap calls in OnApplicationQuit
    wait_for(lambda: not any(is_alive(p) for p in family), 15, "every runtime process to exit")
    assert launcher.Endpoint is None and not launcher.IsRunning
    assert not Path(launcher.StateFilePath).exists()
    assert "Stopped" in _kinds(launcher)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{endpoint.ConnectBaseUrl}/healthz", timeout=2.0)
    again = RuntimeLauncher(options)  # the ports are free again for the next session
    launchers.append(again)
    assert again.Start().ProcessId not in family


def test_stop_recorded_stops_a_detached_runtime(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from System import TimeSpan

    options = make_options()
    launcher = RuntimeLauncher(options)
    launchers.append(launcher)
    pid = launcher.Start().ProcessId
    launcher.Detach()
    assert RuntimeLauncher.StopRecorded(options.DataDir, TimeSpan.FromSeconds(10)) is True
    wait_for(lambda: not is_alive(pid), 15, "the recorded runtime to exit")
    assert RuntimeLauncher.StopRecorded(options.DataDir, TimeSpan.FromSeconds(10)) is False
