"""A runtime folder as "Fetch Runtime" and player builds leave it: the executable bits restored before the runtime
starts (the runtime and the llama-server beside it), a fetched runtime that waited beside a running one's folder taking
its place at the next start (the settings digest includes the runtime's version), quitting bounded on the main thread,
and tools that only read (the Memory Inspector) never replacing the runtime a play session uses."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

from tests.unity_layer.conftest import PYTHON
from tests.unity_layer.processes import is_alive, wait_for


def _runtime_folder(folder: Path, version: str | None) -> Path:
    """A runtime folder whose `coreai-runtime` runs this checkout's runtime; its files without their executable bit."""
    folder.mkdir(parents=True)
    exe = folder / "coreai-runtime"
    exe.write_text(f'#!/bin/sh\nexec "{PYTHON}" -m pyruntime.cli "$@"\n')
    (folder / "llama-server").write_text("#!/bin/sh\necho engine\n")
    for f in (exe, folder / "llama-server"):
        f.chmod(0o644)  # as a Windows cross-build or a zip leaves them
    if version:
        (folder / "coreai-runtime.version").write_text(version + "\n")
    return exe


def test_the_bits_come_back_and_a_waiting_runtime_replaces_the_running_one_at_the_next_start(make_options, launchers,
                                                                                          tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher, RuntimeLauncherEventKind

    folder = tmp_path / "Project" / "CoreAIRuntime" / "Linux"
    exe = _runtime_folder(folder, "v1 test")
    options = make_options(tmp_path / "persistent", RuntimePath=str(exe))
    options.RuntimeArguments.Clear()
    first = RuntimeLauncher(options)
    launchers.append(first)
    old = first.Start().ProcessId
    assert os.access(exe, os.X_OK) and os.access(folder / "llama-server", os.X_OK), "restored before it ran"
    assert RuntimeLauncher.RunsFrom(str(tmp_path / "persistent"), str(folder))

    # "Fetch Runtime" while it runs: the new version waits beside the folder (RuntimeInstall.Install with inUse).
    _runtime_folder(Path(str(folder) + ".pending"), "v2 test")
    first.Detach()  # a domain reload, say: the next launcher decides
    second = RuntimeLauncher(options)
    launchers.append(second)
    new = second.Start().ProcessId
    assert not second.Reused and new != old, "another version: the running runtime was replaced"
    assert not is_alive(old)
    assert (folder / "coreai-runtime.version").read_text().strip() == "v2 test"
    assert not Path(str(folder) + ".pending").exists()
    assert os.access(exe, os.X_OK)
    updated = [e.Message for e in second.RecentEvents if e.Kind == RuntimeLauncherEventKind.Updated]
    assert updated and "v2 test" in updated[0]

    # The same version again: reused, not replaced.
    second.Detach()
    third = RuntimeLauncher(options)
    launchers.append(third)
    assert third.Start().ProcessId == new and third.Reused


def test_a_read_only_tool_takes_the_running_runtime_whatever_its_settings(make_options, launchers,
                                                                          tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    game = RuntimeLauncher(make_options(tmp_path / "persistent"))
    launchers.append(game)
    pid = game.Start().ProcessId
    changed = make_options(tmp_path / "persistent", ConnectPort=game.Endpoint.ConnectPort,
                           GrpcPort=game.Endpoint.GrpcPort,
                           ModelPort=game.Endpoint.ModelPort)
    changed.ExtraServeArguments.Add("--chat-history-cap")
    changed.ExtraServeArguments.Add("7")  # other settings than the play session's runtime
    changed.ReuseAnySettings = True
    changed.RestartOnExit = False
    inspector = RuntimeLauncher(changed)
    launchers.append(inspector)
    assert inspector.Start().ProcessId == pid and inspector.Reused, "the play session keeps its runtime"
    assert is_alive(pid)


def test_quitting_waits_briefly_then_kills_a_runtime_that_does_not_stop(scenarios, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    from tests.support.internals import internal

    # A "runtime" that ignores SIGTERM and has no Shutdown endpoint: only a kill ends it. It says when it ignores
    # SIGTERM: a stop sent before the shell ran `trap` would end it gracefully (seen on a loaded machine).
    ignoring = tmp_path / "ignoring-sigterm"
    stubborn = SpawnProbe.Spawn("/bin/sh", ["-c", f"trap '' TERM; : > '{ignoring}'; exec sleep 120"], [],
                                str(tmp_path), str(tmp_path / "log"), False, False)
    wait_for(ignoring.exists, 30, "the stubborn runtime's trap")
    from System import TimeSpan

    stopper = internal("CoreAI.Launcher.RuntimeStopper")
    started = time.monotonic()
    graceful = stopper.StopWithin(stubborn.Id, None, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(60),
                                  "http://127.0.0.1:9", "token", None)
    waited = time.monotonic() - started
    assert graceful is False
    assert waited < 10, f"the main thread waited {waited:.1f} s; the graceful stop allowed 60"
    assert stubborn.WaitForExit(10000)  # it ignores SIGTERM and sleeps 120 s: only the kill ends it this soon
    # 137 (SIGKILL) when this handle reaped it; the stopper's worker, still polling whether the pid lives, may
    # reap it first, and then no status is left for the handle (-1).
    assert stubborn.ExitCode in (137, -1) and not is_alive(stubborn.Id)


def test_a_bundled_folder_copied_by_a_build_keeps_its_links_and_gets_its_bits(assemblies, tmp_path: Path) -> None:
    from CoreAI.Launcher import BundledRuntime

    source = tmp_path / "CoreAIRuntime" / "Linux"
    _runtime_folder(source, None)
    (source / "_internal").mkdir()
    (source / "_internal" / "libx.so.1").write_bytes(b"\0")
    (source / "_internal" / "libx.so").symlink_to("libx.so.1")
    result = BundledRuntime.CopyInto("StandaloneLinux64", "linux", str(source), None,
                                     str(tmp_path / "Game_Data" / "StreamingAssets"))
    copied = Path(result.RuntimeFolder)
    assert os.access(copied / "coreai-runtime", os.X_OK) and os.access(copied / "llama-server", os.X_OK)
    assert os.readlink(copied / "_internal" / "libx.so") == "libx.so.1"
    assert stat.S_IMODE((source / "coreai-runtime").stat().st_mode) == 0o644, "the project's copy is left as it is"
    shutil.rmtree(tmp_path / "Game_Data")
