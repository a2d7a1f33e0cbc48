"""The launcher's clear errors: a missing runtime, a runtime that exits at once, bad options."""

from __future__ import annotations

from pathlib import Path

import pytest


def _launch_error(launcher):
    from CoreAI.Launcher import RuntimeLaunchException

    with pytest.raises(RuntimeLaunchException) as info:
        launcher.Start()
    return info.value


def test_missing_runtime_path_names_the_path(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchFailure

    missing = tmp_path / "no-such-env" / "bin" / "coreai-runtime"
    launcher = RuntimeLauncher(make_options(RuntimePath=str(missing)))
    launchers.append(launcher)
    error = _launch_error(launcher)
    assert error.Failure == RuntimeLaunchFailure.RuntimeNotFound
    assert str(missing) in error.Message
    assert launcher.Endpoint is None and not launcher.IsRunning


def test_missing_bare_name_is_not_found_on_path(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchFailure

    launcher = RuntimeLauncher(make_options(RuntimePath="coreai-runtime-that-is-not-installed"))
    launchers.append(launcher)
    error = _launch_error(launcher)
    assert error.Failure == RuntimeLaunchFailure.RuntimeNotFound
    assert "coreai-runtime-that-is-not-installed" in error.Message


def test_runtime_that_exits_at_once_reports_its_log_tail(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchFailure

    # A real runtime, asked to host a model file that does not exist: it logs why and exits.
    launcher = RuntimeLauncher(make_options(ModelPath=str(tmp_path / "missing-model.gguf")))
    launchers.append(launcher)
    error = _launch_error(launcher)
    assert error.Failure == RuntimeLaunchFailure.ExitedDuringStart
    assert "exited with code" in error.Message
    assert error.LogTail.strip(), "the runtime's own last log lines belong in the error"
    assert error.LogTail in error.Message
    assert Path(launcher.LogFilePath).read_text().strip().endswith(error.LogTail.strip().splitlines()[-1])
    assert not Path(launcher.StateFilePath).exists()


def test_a_taken_port_is_named(make_options, launchers) -> None:
    import socket

    from CoreAI.Launcher import RuntimeLauncher, RuntimeLaunchFailure

    options = make_options(ChoosePortsWhenTaken=False)  # on: the project's own ports (test_launcher_realities.py)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", options.ConnectPort))
        busy.listen(1)
        launcher = RuntimeLauncher(options)
        launchers.append(launcher)
        error = _launch_error(launcher)
    assert error.Failure == RuntimeLaunchFailure.PortInUse
    assert f"port {options.ConnectPort}" in error.Message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("DataDir", "relative/dir", "DataDir must be an absolute path"),
        ("RuntimePath", " ", "RuntimePath is required"),
        ("ConnectPort", 0, "ConnectPort must be within 1..65535, got 0"),
        ("MaxRestartAttempts", -1, "MaxRestartAttempts"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(make_options, field, value, message) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from System import ArgumentException

    options = make_options()
    setattr(options, field, value)
    with pytest.raises(ArgumentException) as info:
        RuntimeLauncher(options)
    assert message in info.value.Message


def test_same_ports_are_refused(make_options) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from System import ArgumentException

    options = make_options()
    options.GrpcPort = options.ConnectPort
    with pytest.raises(ArgumentException):
        RuntimeLauncher(options)


def test_token_is_never_on_the_command_line(make_options) -> None:
    options = make_options(Token="secret-token-value-1234567890")
    args = list(options.BuildArguments())
    assert "secret-token-value-1234567890" not in " ".join(args)
    assert "serve" in args and args.index("serve") == len(options.RuntimeArguments)
    assert args[args.index("--data-dir") + 1] == options.DataDir


def test_missing_bare_name_error_gives_the_path_hint(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options(RuntimePath="coreai-runtime-that-is-not-installed"))
    launchers.append(launcher)
    message = _launch_error(launcher).Message
    # An editor started from Unity Hub does not inherit the shell's PATH: the error says so and what to do.
    assert "PATH" in message and "Unity Hub" in message and "full path" in message
    assert "which coreai-runtime-that-is-not-installed" in message
