"""The model server (llama.cpp's llama-server, a native binary) dies with the runtime on every OS.

- Linux: the kernel kills it when its parent dies (PR_SET_PDEATHSIG = SIGKILL, set by util-linux's
  `setpriv --pdeathsig KILL` before it execs the server: no Python code runs between fork and exec,
  which in a process with gRPC threads is unsafe, and gRPC logs each such fork). That signal fires
  when the *thread* that spawned the child ends, so every model server is spawned from one thread
  that lives as long as the runtime (`spawn_model_server`), never from a worker or watchdog thread.
- macOS (no such signal), and Linux without `setpriv`: the binary runs under `model/hosting/keeper.py`, a
  small Python process that watches the runtime (`getppid()` changes the moment it dies, SIGKILL
  included) and kills the server then; both share one process group, which the runtime kills as one.
- Windows: a parent's death changes nothing the child can see, so the runtime puts the child in a job
  object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and never closes the job's handle; the OS closes it
  when the runtime dies (however it dies), which kills the child.

Spawn options also keep console signals (Ctrl+C) away from the child: the runtime stops it in order.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

_JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
_JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
_jobs: list[int] = []  # job handles held open on purpose for the life of this process


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class _IoCounters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class JobLimits(ctypes.Structure):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION (144 bytes on 64-bit Windows)."""

    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


class _Spawner:
    """The one thread that spawns model servers on Linux, so their PR_SET_PDEATHSIG lasts as long as we do."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, job: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="model-spawner", daemon=True)
                self._thread.start()
        answer: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._jobs.put((job, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def _loop(self) -> None:
        while True:
            job, answer = self._jobs.get()
            try:
                answer.put((True, job()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                answer.put((False, exc))


_SPAWNER = _Spawner()


def keeper_command(command: Sequence[str]) -> list[str]:
    """The command that runs `command` under the keeper (hosting/keeper.py; macOS), this interpreter or frozen
    executable."""
    return [sys.executable, "-m", "pyruntime.model.hosting.keeper", str(os.getpid()), "--", *command]


_SETPRIV_FOLDERS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")  # a game's launcher may hand us a bare PATH


def setpriv() -> str | None:
    """util-linux's setpriv, on PATH or where distributions install it; None when there is none."""
    found = shutil.which("setpriv")
    if found:
        return found
    return next((f"{folder}/setpriv" for folder in _SETPRIV_FOLDERS if os.access(f"{folder}/setpriv", os.X_OK)), None)


def lifeline_kind() -> str:
    """How the model server is tied to this process here: `pdeathsig`, `keeper` or `job` (see the docstring)."""
    if sys.platform == "win32":
        return "job"
    if sys.platform.startswith("linux") and setpriv():
        return "pdeathsig"
    return "keeper"


def spawn_model_server(command: Sequence[str], *, kind: str | None = None, **popen: Any) -> subprocess.Popen[bytes]:
    """Start the model server so that it dies with this process however it dies (see the module docstring)."""
    options = {**child_popen_options(), **popen}
    kind = kind or lifeline_kind()
    if kind == "pdeathsig":
        tied = [setpriv() or "setpriv", "--pdeathsig", "KILL", "--", *command]
        process: subprocess.Popen[bytes] = _SPAWNER.run(lambda: subprocess.Popen(tied, **options))
        return process
    if kind == "keeper":
        return subprocess.Popen(keeper_command(command), **options)
    process = subprocess.Popen(list(command), **options)
    tie_child_to_this_process(process)
    return process


def kill_model_server(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the server (and a keeper with it: one process group); Windows: TerminateProcess."""
    if process.args and "pyruntime.model.hosting.keeper" in list(process.args):  # type: ignore[arg-type]
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    process.kill()


def child_popen_options() -> dict[str, Any]:
    """Popen keyword arguments for the model child: its own process group/session, so Ctrl+C reaches only us."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def tie_child_to_this_process(process: subprocess.Popen[Any]) -> None:
    """Make the OS kill `process` when this process dies (Windows: a kill-on-close job; elsewhere the child watches)."""
    if sys.platform != "win32":
        return
    try:
        _kill_with_us_on_windows(int(process._handle))  # Popen's process handle
    except OSError as exc:  # e.g. Windows 7 inside a job that allows no nesting: stop() still stops it
        log.warning("model server not tied to the runtime (%s, error %s): it may outlive a killed runtime",
                    exc.strerror, exc.errno)


def _kill_with_us_on_windows(process_handle: int) -> None:
    if sys.platform != "win32":  # (mypy checks as Linux: the Win32 calls below exist on Windows only)
        raise OSError("job objects exist on Windows only")
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.CreateJobObjectW.restype = wintypes.HANDLE
    kernel32.CreateJobObjectW.argtypes = (ctypes.c_void_p, wintypes.LPCWSTR)
    kernel32.SetInformationJobObject.restype = wintypes.BOOL
    kernel32.SetInformationJobObject.argtypes = (wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD)
    kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    kernel32.AssignProcessToJobObject.argtypes = (wintypes.HANDLE, wintypes.HANDLE)
    job = kernel32.CreateJobObjectW(None, None)
    if not job:
        raise OSError(ctypes.get_last_error(), "CreateJobObject failed")
    limits = JobLimits()
    limits.BasicLimitInformation.LimitFlags = _JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    if not kernel32.SetInformationJobObject(job, _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                            ctypes.byref(limits), ctypes.sizeof(limits)):
        raise OSError(ctypes.get_last_error(), "SetInformationJobObject failed")
    if not kernel32.AssignProcessToJobObject(job, process_handle):
        raise OSError(ctypes.get_last_error(), "AssignProcessToJobObject failed")
    _jobs.append(job)  # never closed: closing it is what kills the child
