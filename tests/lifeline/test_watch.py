"""Process watches and lifelines against real processes: alive, SIGKILLed (zombie and reaped), missing pid,
stdin EOF."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pyruntime.cli.lifeline import PidfdWatch, PollWatch, lifelines, watch_process
from tests.unity_layer.processes import wait_for

BOUND_S = 15.0  # a bound for noisy machines, not a speed claim (bench/bench_lifeline.py measures that)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


WATCHES = [PollWatch] + ([PidfdWatch] if hasattr(os, "pidfd_open") else [])


@pytest.mark.parametrize("watch_class", WATCHES, ids=lambda c: c.__name__)
def test_a_watch_sees_a_sigkilled_process_as_exited_while_it_is_still_an_unreaped_zombie(watch_class) -> None:
    sleeper = _sleeper()
    try:
        watch = watch_class(sleeper.pid)
        assert not watch.exited()
        sleeper.kill()  # SIGKILL; not reaped yet: a zombie still holds the pid
        wait_for(watch.exited, BOUND_S, "the watch to see the SIGKILL")
        assert Path(f"/proc/{sleeper.pid}").exists()  # it really was a zombie when the watch fired
        sleeper.wait()
        assert watch.exited()  # latched once exited
        watch.close()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("watch_class", WATCHES, ids=lambda c: c.__name__)
def test_a_watch_refuses_a_pid_that_does_not_run(watch_class) -> None:
    with pytest.raises(ProcessLookupError):
        watch_class(_dead_pid())


def test_watch_process_picks_the_exact_watch_of_this_os_and_refuses_bad_pids() -> None:
    watch = watch_process(os.getpid())
    try:
        assert isinstance(watch, PidfdWatch if hasattr(os, "pidfd_open") else PollWatch)
        assert not watch.exited()
    finally:
        watch.close()
    for pid in (0, -1, _dead_pid()):
        with pytest.raises(ProcessLookupError):
            watch_process(pid)


def test_the_poll_watch_sees_its_own_parent_die_through_re_parenting(tmp_path: Path) -> None:
    """macOS's path: a child watching its parent with PollWatch notices the parent's SIGKILL."""
    seen = tmp_path / "seen"
    child_code = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from pyruntime.cli.lifeline import PollWatch
        watch = PollWatch(os.getppid())
        open({str(tmp_path / 'watching')!r}, 'w').close()
        deadline = time.monotonic() + 60
        while not watch.exited() and time.monotonic() < deadline:
            time.sleep(0.05)
        open({str(seen)!r}, 'w').write(str(watch.exited()))
    """)
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time;"
                               f" subprocess.Popen([sys.executable, '-c', {child_code!r}]);"
                               " time.sleep(120)"])
    try:
        wait_for((tmp_path / "watching").exists, 60, "the child to start watching")
        parent.kill()  # not reaped until after the check: the child sees a zombie parent
        wait_for(seen.exists, BOUND_S, "the child to see its parent die")
        wait_for(lambda: seen.read_text() != "", 5, "the child's answer")
        assert seen.read_text() == "True"
    finally:
        parent.kill()
        parent.wait()


def test_lifelines_call_once_when_the_parent_dies_and_never_after_leaving() -> None:
    sleeper = _sleeper()
    reasons: list[str] = []
    fired = threading.Event()

    def on_exit(reason: str) -> None:
        reasons.append(reason)
        fired.set()

    try:
        with lifelines(on_exit, parent_pid=sleeper.pid, interval=0.05):
            assert not fired.wait(0.3)
            sleeper.kill()
            assert fired.wait(BOUND_S)
        assert reasons == ["the parent process exited"]
    finally:
        sleeper.kill()
        sleeper.wait()

    late = _sleeper()
    try:
        with lifelines(on_exit, parent_pid=late.pid, interval=0.05):
            pass
        late.kill()
        late.wait()
        threading.Event().wait(0.3)  # several intervals: a watch still running would have fired by now
        assert reasons == ["the parent process exited"]  # nothing new after leaving
    finally:
        late.kill()
        late.wait()


def test_lifelines_call_when_standard_input_reaches_eof(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "rb", buffering=0)
    monkeypatch.setattr(sys, "stdin", reader)  # a real pipe standing in for the launcher's
    fired = threading.Event()
    reasons: list[str] = []

    def lost(reason: str) -> None:
        reasons.append(reason)
        fired.set()

    try:
        with lifelines(lost, stdin_eof=True):
            os.write(write_end, b"data is read and dropped\n")
            assert not fired.wait(0.3)
            os.close(write_end)
            assert fired.wait(BOUND_S)
        assert reasons == ["standard input closed"]
    finally:
        reader.close()


def test_lifelines_refuse_a_missing_parent_and_a_missing_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProcessLookupError):
        with lifelines(lambda r: None, parent_pid=_dead_pid()):
            pass
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(ValueError, match="standard input"):
        with lifelines(lambda r: None, stdin_eof=True):
            pass
