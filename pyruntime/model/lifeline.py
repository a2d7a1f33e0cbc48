"""The model child dies with the runtime on every OS.

- Linux and macOS: the child watches its parent (`llama_server._exit_when_orphaned`: `getppid()`
  changes the moment the runtime dies, SIGKILL included). PR_SET_PDEATHSIG is not used: it fires when
  the *thread* that spawned the child ends, and serve spawns from a worker thread.
- Windows: a parent's death changes nothing the child can see, so the runtime puts the child in a job
  object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE and never closes the job's handle; the OS closes it
  when the runtime dies (however it dies), which kills the child.

Spawn options also keep console signals (Ctrl+C) away from the child: the runtime stops it in order.
"""

from __future__ import annotations

import ctypes
import logging
import subprocess
import sys
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


def child_popen_options() -> dict[str, Any]:
    """Popen keyword arguments for the model child: its own process group/session, so Ctrl+C reaches only us."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    return {"start_new_session": True}


def tie_child_to_this_process(process: subprocess.Popen[Any]) -> None:
    """Make the OS kill `process` when this process dies (Windows: a kill-on-close job; elsewhere the child watches)."""
    if sys.platform != "win32":
        return
    try:
        _kill_with_us_on_windows(int(process._handle))  # type: ignore[attr-defined]  # Popen's process handle
    except OSError as exc:  # e.g. Windows 7 inside a job that allows no nesting: stop() still stops it
        log.warning("model server not tied to the runtime (%s, error %s): it may outlive a killed runtime",
                    exc.strerror, exc.errno)


def _kill_with_us_on_windows(process_handle: int) -> None:
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
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
