"""What a hostile local process puts in a data folder: links out of it, FIFOs, devices, sockets, huge files."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

SECRET = b'{"memory":"outside secret","versionsJson":""}'
"""The bytes of the file outside the data folder that no call may read (its text never appears in an answer)."""


def make_outside(tmp_path: Path) -> Path:
    """A folder beside the data folder holding `victim.json` (SECRET), which the runtime must never read or write."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "victim.json").write_bytes(SECRET)
    return folder


def outside_state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of folder with its bytes and mtime (a write, or a created file, shows)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def plant(path: Path, kind: str, outside: Path, *, link_to: str = "victim.json") -> None:
    """Put a hostile entry of kind where a save belongs: link, dangling-link, fifo, device, socket or oversized."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        path.symlink_to(outside / link_to)
    elif kind == "dangling-link":
        path.symlink_to(outside / "created-by-runtime")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            path.symlink_to("/dev/zero")  # unprivileged: a link to the device, refused as a link
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        cwd = os.getcwd()
        os.chdir(path.parent)  # AF_UNIX paths are short (~108 bytes): bind by name
        try:
            sock.bind(path.name)
        finally:
            os.chdir(cwd)
            sock.close()
    elif kind == "oversized":
        with path.open("wb") as f:
            f.truncate(8 * 1024**3)  # sparse: reading it whole would exhaust memory
    else:
        raise AssertionError(kind)
