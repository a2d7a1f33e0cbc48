"""The launcher ties the runtime to the game: `--parent-pid` is always this process, and a game that is SIGKILLed
takes the runtime and its model child with it (a real game process hosting the compiled launcher via pythonnet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.unity_layer.conftest import PYTHON, free_ports
from tests.unity_layer.dotnet import ROOT
from tests.unity_layer.processes import cmdline, engine_of, is_alive, wait_for

BOUND_S = 20.0  # generous for a loaded machine; bench/bench_lifeline.py measures the real time


def test_the_runtime_is_always_told_the_games_pid(make_options) -> None:
    options = make_options()
    args = list(options.BuildArguments())
    assert args[args.index("--parent-pid") + 1] == str(os.getpid())  # pythonnet: this process is "the game"
    assert options.ParentProcessId == os.getpid()


def test_a_started_runtime_watches_the_game(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options())
    launchers.append(launcher)
    argv = cmdline(launcher.Start().ProcessId)
    assert argv[argv.index("--parent-pid") + 1] == str(os.getpid())


GAME = """
import json, sys, time
sys.path.insert(0, {root!r})
from tests.unity_layer.dotnet import load_assemblies
load_assemblies("client", "hosting")
from CoreAI.Launcher import RuntimeLaunchOptions, RuntimeLauncher
options = RuntimeLaunchOptions()
options.RuntimePath = {runtime!r}
for arg in {runtime_args!r}:
    options.RuntimeArguments.Add(arg)
options.DataDir = {data_dir!r}
options.ConnectPort, options.GrpcPort, options.ModelPort = {ports!r}
options.ModelPath = {model!r}
options.WorkingDirectory = {root!r}
options.Environment["PYTHONPATH"] = {root!r}
launcher = RuntimeLauncher(options)
endpoint = launcher.Start()
print(json.dumps({{"runtime": endpoint.ProcessId}}), flush=True)
time.sleep(300)
"""


def sigkill_game_and_check_runtime_gone(runtime: str, runtime_args: list[str], model: Path, tmp_path: Path) -> None:
    """A game process (pythonnet + the compiled launcher) starts `runtime`; SIGKILL it; runtime and model must go."""
    connect, grpc, model_port = free_ports(3)
    script = GAME.format(root=str(ROOT), runtime=runtime, runtime_args=runtime_args,
                         data_dir=str(tmp_path / "persistent"), ports=(connect, grpc, model_port), model=str(model))
    game = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                            env={**os.environ, "MONO_THREADS_SUSPEND": "preemptive"})
    runtime_pid = 0
    try:
        assert game.stdout is not None
        line = game.stdout.readline()
        assert line, "the game exited before its runtime answered"
        runtime_pid = json.loads(line)["runtime"]
        argv = cmdline(runtime_pid)
        assert argv[0] == runtime and argv[argv.index("--parent-pid") + 1] == str(game.pid)
        [model_pid] = engine_of(runtime_pid)
        game.kill()  # SIGKILL: no launcher code runs; the runtime has to notice on its own
        wait_for(lambda: not is_alive(runtime_pid) and not is_alive(model_pid), BOUND_S,
                 "the runtime and its model child to exit after the game's SIGKILL")
        log = (tmp_path / "persistent" / "CoreAI" / "runtime" / "runtime.log").read_text()
        assert "the parent process exited; stopping" in log and "model server stopped" in log
    finally:
        game.kill()
        game.wait()
        if runtime_pid and is_alive(runtime_pid):
            os.kill(runtime_pid, 9)


def test_sigkilling_the_game_takes_the_runtime_and_its_model_along(assemblies, tiny_model: Path,
                                                                   tmp_path: Path) -> None:
    sigkill_game_and_check_runtime_gone(str(PYTHON), ["-m", "pyruntime.cli"], tiny_model, tmp_path)
