"""Processes that take, delete and retake one lock file as fast as they can (the runtime's `lockfile`), each adding one
to a counter file while it holds the lock: a read-modify-write only a real lock keeps whole, so a lost update shows two
holders at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HAMMER = """
import sys, time
from pathlib import Path
from pyruntime.catalog import lockfile
from pyruntime.stores import confined
folder_path, counter, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
done = 0
with confined.open_folder(folder_path, None) as folder:
    while done < rounds:
        try:
            with lockfile.held(folder, "x.lock"):
                value = int(counter.read_text())
                time.sleep(0.0005)
                counter.write_text(str(value + 1))
                done += 1
        except lockfile.LockBusy:
            time.sleep(0.0001)
"""


def start_hammers(folder: Path, counter: Path, rounds: int, count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes, each adding `rounds` to `counter` under the lock file `folder/x.lock`."""
    return [subprocess.Popen([sys.executable, "-c", HAMMER, str(folder), str(counter), str(rounds)], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(count)]
