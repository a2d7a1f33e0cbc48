"""Progress lines on stderr: every step says what it does, a long one says every half minute that it is alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

HEARTBEAT_S = 30.0


def log(message: str) -> None:
    """One progress line."""
    print(f"[bootstrap] {message}", file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    """68 -> '1 min 8 s'."""
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def tail(path: Path, size: int = 8192) -> str:
    """The last `size` bytes of a log file as text (empty when it does not exist yet)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class StepFailed(RuntimeError):
    """A logged command failed; the message names it and the log."""


@dataclass(frozen=True)
class Timing:
    """How long a step took: wall-clock seconds, and CPU seconds of its whole process tree (None where the OS
    does not say). On a shared machine the CPU seconds are the figure that compares."""

    wall_s: float
    cpu_s: float | None

    def __add__(self, other: Timing) -> Timing:
        cpu = None if self.cpu_s is None or other.cpu_s is None else self.cpu_s + other.cpu_s
        return Timing(self.wall_s + other.wall_s, cpu)

    def __str__(self) -> str:
        return duration(self.wall_s) + (f" ({duration(self.cpu_s)} of CPU)" if self.cpu_s is not None else "")


def _children_cpu() -> float | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_logged(argv: Sequence[str | os.PathLike[str]], logfile: Path, what: str, *,
               env: Mapping[str, str] | None = None, cwd: Path | None = None,
               status: Callable[[str], str] | None = None, heartbeat_s: float = HEARTBEAT_S) -> Timing:
    """Run argv with its output appended to logfile, saying every heartbeat_s that it is alive.

    status(log tail) adds detail to the heartbeat line (e.g. Ninja's step counter). On failure the log's last
    lines are shown and StepFailed raised; Ctrl+C stops the whole process group, not just its leader.
    """
    logfile.parent.mkdir(parents=True, exist_ok=True)
    log(f"{what} ...")
    start, cpu_start = time.monotonic(), _children_cpu()
    with logfile.open("ab") as out:
        out.write(f"\n$ {' '.join(map(str, argv))}\n".encode())
        out.flush()
        process = subprocess.Popen(list(map(str, argv)), stdout=out, stderr=subprocess.STDOUT,
                                   env=dict(env or os.environ), cwd=cwd, start_new_session=os.name != "nt")
        try:
            last = start
            while process.poll() is None:
                time.sleep(0.5)
                now = time.monotonic()
                if now - last >= heartbeat_s:
                    last = now
                    detail = status(tail(logfile)) if status else ""
                    log(f"  still {what}: {duration(now - start)}{', ' + detail if detail else ''} ...")
        except BaseException:
            _stop(process)
            raise
    elapsed = time.monotonic() - start
    if process.returncode != 0:
        sys.stderr.write(tail(logfile, 6000).split("\n", 1)[-1] + "\n")
        raise StepFailed(f"{what} failed (exit {process.returncode}) after {duration(elapsed)}; full log: {logfile}")
    cpu_end = _children_cpu()
    return Timing(elapsed, None if cpu_start is None or cpu_end is None else cpu_end - cpu_start)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        if os.name != "nt":
            os.killpg(process.pid, signal.SIGTERM)
        else:
            process.terminate()
        process.wait(timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
