"""The spawner the launcher uses on every scripting backend (IL2CPP included, where System.Diagnostics.Process.Start
does
not exist), run for real: posix_spawn through the compiled C# under Mono, checked from outside through /proc.

Start, environment, working directory, stdout/stderr to the log file, exit code, kill, SIGTERM despite a blocked mask,
no zombie left, no inherited descriptor; each also through the fallbacks of older C libraries (no
posix_spawn_file_actions_addchdir_np: `/bin/sh -c 'cd … && exec …'`; no addclosefrom_np: one close per open descriptor).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from pathlib import Path

import pytest

from tests.unity_layer.processes import is_alive, wait_for

FALLBACKS = [pytest.param((False, False), id="glibc-2.34+"), pytest.param((True, True), id="older-libc-fallbacks")]


def _spawn(script: str, tmp_path: Path, *, env: list[str] | None = None, cwd: Path | None = None,
           fallbacks: tuple[bool, bool] = (False, False), exe: str = "/bin/sh"):
    from CoreAI.Tests.UnityLayer import SpawnProbe

    log = tmp_path / "runtime.log"
    args = ["-c", script] if exe == "/bin/sh" else []
    return SpawnProbe.Spawn(exe, args, env or [], str(cwd or tmp_path), str(log), *fallbacks), log


def test_the_spawner_is_the_posix_one_chosen_by_the_os(scenarios) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    assert SpawnProbe.SpawnerName == "PosixSpawner"
    assert SpawnProbe.CurrentProcessId == os.getpid()


@pytest.mark.parametrize("fallbacks", FALLBACKS)
def test_output_environment_working_directory_and_exit_code(scenarios, tmp_path: Path, fallbacks) -> None:
    work = tmp_path / "a folder with spaces"
    work.mkdir()
    os.environ["COREAI_SPAWN_INHERITED"] = "from-the-parent"
    os.environ["COREAI_SPAWN_REMOVED"] = "must-not-arrive"
    try:
        process, log = _spawn('echo "out $COREAI_SPAWN_SET"; echo "err" >&2; pwd; '
                              'echo "inherited=$COREAI_SPAWN_INHERITED removed=${COREAI_SPAWN_REMOVED-unset}"; exit 7',
                              tmp_path, env=["COREAI_SPAWN_SET=héllo wörld", "COREAI_SPAWN_REMOVED"], cwd=work,
                              fallbacks=fallbacks)
    finally:
        del os.environ["COREAI_SPAWN_INHERITED"], os.environ["COREAI_SPAWN_REMOVED"]
    assert process.WaitForExit(30000)
    assert process.ExitCode == 7
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines == ["out héllo wörld", "err", str(work), "inherited=from-the-parent removed=unset"]


def test_the_log_is_appended_to_and_created_owner_only(scenarios, tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    log.write_text("earlier line\n")
    first, _ = _spawn("echo second", tmp_path)
    assert first.WaitForExit(30000)
    assert log.read_text() == "earlier line\nsecond\n"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    second, new_log = _spawn("echo one", fresh)
    assert second.WaitForExit(30000)
    assert stat.S_IMODE(new_log.stat().st_mode) & 0o077 == 0, "nobody but the owner may read the runtime's log"


def test_stdin_is_the_null_device(scenarios, tmp_path: Path) -> None:
    process, log = _spawn('readlink /proc/self/fd/0; cat; echo "eof at once"', tmp_path)
    assert process.WaitForExit(30000)
    assert log.read_text().splitlines() == ["/dev/null", "eof at once"]


@pytest.mark.parametrize("fallbacks", FALLBACKS)
def test_no_descriptor_of_the_parent_is_inherited(scenarios, tmp_path: Path, fallbacks) -> None:
    from System.IO import FileMode, FileStream

    # An inheritable descriptor (no close-on-exec) of this process, and a .NET FileStream, as a launcher holds its lock.
    leaky = os.open(tmp_path / "leaky.txt", os.O_CREAT | os.O_WRONLY)
    os.set_inheritable(leaky, True)
    held = FileStream(str(tmp_path / "launcher.lock"), FileMode.OpenOrCreate)
    try:
        process, log = _spawn("exec sleep 30", tmp_path, fallbacks=fallbacks)
        try:
            wait_for(lambda: Path(f"/proc/{process.Id}/cmdline").read_bytes().startswith(b"sleep"), 10, "sleep to run")

            def descriptors() -> dict[int, str]:
                folder = f"/proc/{process.Id}/fd"
                return {int(fd): os.readlink(f"{folder}/{fd}") for fd in os.listdir(folder)}

            # Right after exec, sleep's own start-up may hold a file open for a moment (its locale archive): an
            # inherited descriptor never goes away, so wait for the three and name any other that stays.
            with contextlib.suppress(AssertionError):  # the assert below names what stayed
                wait_for(lambda: sorted(descriptors()) == [0, 1, 2], 5, "the three descriptors alone")
            fds = descriptors()
            assert sorted(fds) == [0, 1, 2], f"inherited descriptors: {fds}"
            assert os.readlink(f"/proc/{process.Id}/fd/1") == str(log)
            assert os.readlink(f"/proc/{process.Id}/fd/2") == str(log)
        finally:
            process.Kill()
            process.WaitForExit(10000)
    finally:
        held.Dispose()
        os.close(leaky)


def test_kill_ends_it_and_leaves_no_zombie(scenarios, tmp_path: Path) -> None:
    process, _ = _spawn("exec sleep 60", tmp_path)
    pid = process.Id
    assert is_alive(pid) and not process.HasExited
    process.Kill()
    assert process.WaitForExit(10000)
    assert process.ExitCode == 128 + signal.SIGKILL
    assert not Path(f"/proc/{pid}").exists(), "reaped: no zombie stays behind"


def test_an_exited_child_is_reaped_by_whoever_asks(scenarios, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    process, _ = _spawn("exit 0", tmp_path)
    pid = process.Id
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or _state(pid) == "Z", 10, "the child to end")
    assert not SpawnProbe.IsAlive(pid)  # the launcher's question, not the handle's: it reaps too
    assert not Path(f"/proc/{pid}").exists(), "no zombie after IsAlive"


def test_sigterm_reaches_it_even_when_the_spawning_thread_blocks_it(scenarios, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    # Mono and Unity block signals on their threads; the child must start with an empty mask and default actions.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        process, log = _spawn('grep -E "^Sig(Blk|Ign)" /proc/self/status; exec sleep 60', tmp_path)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        signal.signal(signal.SIGPIPE, previous)
    wait_for(lambda: "SigIgn" in log.read_text(), 10, "the child's signal state")
    masks = dict(line.split(":\t") for line in log.read_text().splitlines())
    assert int(masks["SigBlk"], 16) == 0
    assert int(masks["SigIgn"], 16) & (1 << (signal.SIGTERM - 1) | 1 << (signal.SIGPIPE - 1)) == 0
    assert SpawnProbe.Terminate(process.Id)
    assert process.WaitForExit(10000)
    assert process.ExitCode == 128 + signal.SIGTERM


def test_a_missing_or_not_executable_program_is_refused_with_the_reason(scenarios, tmp_path: Path) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    with pytest.raises(Exception, match=r"cannot start '.*nowhere': no such file or folder \(ENOENT\)"):
        SpawnProbe.Spawn(str(tmp_path / "nowhere"), [], [], str(tmp_path), str(tmp_path / "log"), False, False)
    plain = tmp_path / "plain-file"
    plain.write_text("#!/bin/sh\necho never\n")
    with pytest.raises(Exception, match=r"permission denied.*EACCES"):
        SpawnProbe.Spawn(str(plain), [], [], str(tmp_path), str(tmp_path / "log"), False, False)


def test_the_program_keeps_its_own_pid_through_the_shell_fallback(scenarios, tmp_path: Path) -> None:
    process, log = _spawn("echo $$; exec sleep 30", tmp_path, fallbacks=(True, False))
    try:
        wait_for(lambda: log.exists() and log.read_text().strip() != "", 10, "the pid line")
        assert int(log.read_text().split()[0]) == process.Id
        # The shell writes the line before it execs sleep: the same pid becomes sleep a moment later.
        wait_for(lambda: Path(f"/proc/{process.Id}/cmdline").read_bytes().split(b"\0")[0] == b"sleep", 10,
                 "the shell to exec the program in its own pid")
    finally:
        process.Kill()
        process.WaitForExit(10000)


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return text[text.rindex(")") + 2]
