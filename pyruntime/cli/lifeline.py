"""Never orphaned: notice when the launching game process dies, or when its end of standard input closes.

`serve --parent-pid PID` watches PID with the most exact tool the OS has:

- Linux: a pidfd (`os.pidfd_open`): readable once the process has exited - a zombie counts as exited,
  and a recycled pid can never be mistaken for it;
- Windows: a process handle (`OpenProcess(SYNCHRONIZE)`), signalled once the process has exited;
- elsewhere (macOS, BSDs, Linux before 5.3): `kill(pid, 0)` polls, plus `getppid()` - when PID is our
  own parent, the kernel re-parents us the moment it dies, even while it is an unreaped zombie.

A watcher thread polls every `interval` seconds and calls `on_exit` once. `--exit-on-stdin-eof` is the
same contract through a pipe: the launcher holds the write end, and the OS closes it however the
launcher dies.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

DEFAULT_INTERVAL_S = 0.2  # well inside the 2 s contract, and ~5 wake-ups a second cost nothing


class ProcessWatch(Protocol):
    """Answers whether one process, named when the watch was made, has exited."""

    def exited(self) -> bool:
        """True once the watched process has exited (for good: it never turns false again)."""
        ...

    def close(self) -> None:
        """Release what the watch holds (a descriptor or a handle)."""
        ...


class PidfdWatch:
    """Linux >= 5.3: a pidfd becomes readable when its process exits; immune to pid reuse."""

    _fd: int | None

    def __init__(self, pid: int) -> None:
        """Open a pidfd for `pid`; ProcessLookupError when no such process runs."""
        if sys.platform != "linux":  # also how a type checker learns that os.pidfd_open is Linux-only
            raise OSError(errno.ENOSYS, "pidfd_open needs Linux")
        self._fd = os.pidfd_open(pid)

    def exited(self) -> bool:
        """True once the process has exited (zombie or reaped)."""
        if self._fd is None:
            return True
        readable, _, _ = select.select([self._fd], [], [], 0)
        return bool(readable)

    def close(self) -> None:
        """Close the pidfd."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class PollWatch:
    """Any POSIX system: `kill(pid, 0)`, a zombie check where /proc exists, and re-parenting."""

    def __init__(self, pid: int) -> None:
        """Watch `pid`; ProcessLookupError when no such process runs."""
        self._pid = pid
        self._is_parent = os.getppid() == pid
        self._gone = False
        if not self._alive():
            raise ProcessLookupError(f"no process {pid}")

    def _alive(self) -> bool:
        if self._is_parent and os.getppid() != self._pid:
            return False  # re-parented: our parent exited (it may still be an unreaped zombie)
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, owned by another user
        return not _is_zombie(self._pid)

    def exited(self) -> bool:
        """True once the process has exited (latched: a recycled pid cannot bring it back)."""
        if not self._gone:
            self._gone = not self._alive()
        return self._gone

    def close(self) -> None:
        """Nothing to release."""


def _is_zombie(pid: int) -> bool:
    """True when /proc says `pid` is a zombie (False where there is no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    close = stat.rfind(")")
    return close > 0 and stat[close + 2:close + 3] == "Z"


class WindowsWatch:
    """Windows: a process handle with SYNCHRONIZE is signalled when the process exits.

    While the handle is held, the pid cannot be reused.
    """

    _SYNCHRONIZE = 0x00100000
    _PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
    _WAIT_TIMEOUT = 0x102
    _kernel32: Any
    _handle: int | None

    def __init__(self, pid: int) -> None:
        """Open a handle to `pid`; ProcessLookupError when it cannot be opened."""
        if sys.platform != "win32":  # also how a type checker learns that what follows is Windows-only
            raise OSError("a process handle watch needs Windows")
        import ctypes
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        kernel32.OpenProcess.restype = wintypes.HANDLE
        kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
        kernel32.WaitForSingleObject.restype = wintypes.DWORD
        kernel32.WaitForSingleObject.argtypes = (wintypes.HANDLE, wintypes.DWORD)
        kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
        self._kernel32 = kernel32
        self._handle = kernel32.OpenProcess(self._SYNCHRONIZE | self._PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
        if not self._handle:
            raise ProcessLookupError(f"cannot open process {pid} (Windows error {ctypes.get_last_error()})")

    def exited(self) -> bool:
        """True once the process has exited."""
        if not self._handle:
            return True
        return int(self._kernel32.WaitForSingleObject(self._handle, 0)) != self._WAIT_TIMEOUT

    def close(self) -> None:
        """Close the process handle."""
        if self._handle:
            self._kernel32.CloseHandle(self._handle)
            self._handle = None


def watch_process(pid: int) -> ProcessWatch:
    """The most exact watch this OS offers for `pid`; ProcessLookupError when it does not run."""
    if pid <= 0:
        raise ProcessLookupError(f"not a process id: {pid}")
    if sys.platform == "win32":
        return WindowsWatch(pid)
    if hasattr(os, "pidfd_open"):
        try:
            return PidfdWatch(pid)
        except OSError as exc:  # ENOSYS on kernels before 5.3; ProcessLookupError stays what it is
            if isinstance(exc, ProcessLookupError):
                raise
    return PollWatch(pid)


class _Watcher:
    """One daemon thread that polls checks and calls `on_exit(reason)` once, for the first that fires."""

    def __init__(self, on_exit: Callable[[str], None], interval: float) -> None:
        self._on_exit = on_exit
        self._interval = interval
        self._done = threading.Event()
        self._fired = threading.Lock()

    def fire(self, reason: str) -> None:
        """Call on_exit(reason), the first time only."""
        if self._fired.acquire(blocking=False):
            self._done.set()
            self._on_exit(reason)

    def poll(self, watch: ProcessWatch, reason: str) -> None:
        """Check `watch` every interval until it fires or the watcher stops; the watch is closed here."""
        try:
            while not self._done.wait(self._interval):
                if watch.exited():
                    self.fire(reason)
                    return
        finally:
            watch.close()

    def stop(self) -> None:
        """No call after this one: a late EOF or exit is ignored."""
        self._fired.acquire(blocking=False)
        self._done.set()


def _read_until_eof(fd: int, on_eof: Callable[[], None]) -> None:
    """Read (and drop) whatever comes on `fd` until EOF or an error, then call `on_eof`."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass  # a broken pipe is the launcher gone, too
    on_eof()


@contextlib.contextmanager
def lifelines(
    on_exit: Callable[[str], None],
    *,
    parent_pid: int | None = None,
    stdin_eof: bool = False,
    interval: float = DEFAULT_INTERVAL_S,
) -> Iterator[None]:
    """While inside: call `on_exit(reason)` once when `parent_pid` exits or standard input reaches EOF.

    Raises ProcessLookupError at entry when `parent_pid` does not run, ValueError when `stdin_eof` is
    asked for but there is no standard input.
    """
    watcher = _Watcher(on_exit, interval)
    stdin_fd = _stdin_fd() if stdin_eof else None
    watch = watch_process(parent_pid) if parent_pid is not None else None
    if watch is not None:  # the thread owns the watch from here and closes it
        threading.Thread(target=watcher.poll, args=(watch, "the parent process exited"),
                         name="parent-watch", daemon=True).start()
    try:
        if stdin_fd is not None:
            # Blocked in read() for the life of the process; a daemon thread, so it never holds up the exit.
            threading.Thread(target=_read_until_eof, args=(stdin_fd, lambda: watcher.fire("standard input closed")),
                             name="stdin-watch", daemon=True).start()
        yield
    finally:
        watcher.stop()


def _stdin_fd() -> int:
    """The descriptor of standard input; ValueError when the process has none."""
    stream = sys.stdin
    if stream is None:
        raise ValueError("--exit-on-stdin-eof needs a standard input, and this process has none")
    try:
        return stream.fileno()
    except (OSError, ValueError) as exc:
        raise ValueError("--exit-on-stdin-eof needs a standard input with a file descriptor") from exc
