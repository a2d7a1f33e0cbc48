"""Process helpers for the launcher tests (Linux /proc)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def children(pid: int) -> list[int]:
    """Direct children of `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    result, todo = [], [pid]
    while todo:
        current = todo.pop()
        result.append(current)
        todo.extend(children(current))
    return result


def engine_of(runtime_pid: int) -> list[int]:
    """The runtime's model server processes (llama.cpp's llama-server: a child, or a keeper's child)."""
    return [pid for pid in tree(runtime_pid)[1:] if _engine(pid)]


def _engine(pid: int) -> bool:
    try:
        argv = cmdline(pid)
    except OSError:
        return False
    return bool(argv) and Path(argv[0]).name.startswith("llama-server")


def cmdline(pid: int) -> list[str]:
    """The argv of `pid`."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def environ(pid: int) -> dict[str, str]:
    """The environment of `pid`."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in " ".join(cmdline(int(entry.name))) and is_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
