"""Where the hosted engine runs, privately: its 0700 folder, its key file, its address, its state folder, and the
environment it starts with.

The engine listens where only the runtime reaches it: a Unix socket in the private folder on POSIX, a private
loopback port on Windows; its key is written 0600 into that folder (never on a command line, which other users
can read). Variables llama-server would read as flags are left out of its environment.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

log = logging.getLogger("pyruntime.model.hosting.process")  # the engine's lifecycle log, as before the split

MALLOC_MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
# glibc keeps freed prompt-cache state copies in its heap; a fixed threshold gives them back to the OS
# (docs/benchmarks.md#model-server-memory-over-long-sessions; llama-server copies slot states the same way).
MALLOC_MMAP_THRESHOLD_BYTES = "131072"
# Variables llama-server reads as flags or keys (LLAMA_ARG_*, LLAMA_API_KEY, ...): a game's environment
# must not change how the engine runs nor where it writes.
_SCRUBBED_ENV_PREFIXES = ("LLAMA_",)


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (checked by binding it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is free
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_loopback_port() -> int:
    """A loopback port nothing listens on now (the engine's address where there are no Unix sockets)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def state_folder(folder: Path | None) -> Path | None:
    """`folder` (created 0700) when it is a real folder, not a link (llama-server writes through it); else None."""
    if folder is None:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir():
            raise NotADirectoryError(folder)
    except OSError:
        log.warning("the engine state folder is not a folder of its own; using the engine's private folder")
        return None
    return folder


def write_key_file(private: Path, key: str) -> Path:
    """The engine's key in `private/key`, created 0600 (a previous one replaced)."""
    key_file = private / "key"
    key_file.unlink(missing_ok=True)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(key + "\n")
    return key_file


def engine_address(private: Path, previous_port: int | None) -> tuple[str, int]:
    """(listen, port) for the engine: `private/engine.sock` (port 0) on POSIX, else a loopback port (the previous
    one again on a restart, so clients go on)."""
    if sys.platform == "win32":
        return "127.0.0.1", previous_port if previous_port is not None else free_loopback_port()
    listen = str(private / "engine.sock")
    Path(listen).unlink(missing_ok=True)  # a killed engine leaves its socket file
    return listen, 0


def engine_env() -> dict[str, str]:
    """This process's environment without llama-server's own variables, with the freed-memory threshold set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_ENV_PREFIXES)}
    env.setdefault(MALLOC_MMAP_THRESHOLD_ENV, MALLOC_MMAP_THRESHOLD_BYTES)
    return env
