"""A real second process holding a save's file lock, the way a paused CLI would."""
from __future__ import annotations

import subprocess
import sys

from pyruntime.stores.file_layout import file_stem
from pyruntime.stores.file_store import FileAgentMemoryStore

HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1]); lock.acquire()
print("held", flush=True)
sys.stdin.readline()  # a paused CLI: holds the lock until told to go
"""


def hold_lock_in_another_process(store: FileAgentMemoryStore, key: str) -> subprocess.Popen:
    """Start a process that holds key's file lock until `release`."""
    with store._keys.locked(file_stem(key)) as ks:  # creates the lock file where the store looks for it
        path = ks.lock_path
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen) -> None:
    """Let the holder go and wait for it to exit."""
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    proc.wait(timeout=30)
