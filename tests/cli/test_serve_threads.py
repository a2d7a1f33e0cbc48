"""`serve` runs blocking store calls (a turn's reads, its fsynced records) on threads sized for waiting on a disk:
records held up by a slow disk do not take every thread while the next turns' reads, on the way to their first
token, queue behind them (Python's default pool has CPUs + 4 threads: 6 on a two-core machine)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

from pyruntime.cli.serve import BLOCKING_IO_WORKERS, EXIT_OK, serve
from pyruntime.settings import RuntimeSettings

STALLED_WRITES = 24  # records waiting on a slow disk at once: four times the default pool of a two-core machine


def test_a_read_runs_while_many_writes_wait_on_the_disk(tmp_path: Path) -> None:
    options = RuntimeSettings(no_model=True, session_only=True, data_dir=tmp_path / "data", grpc_port=0,
                              connect_port=0)
    seen: dict[str, Any] = {}

    async def probe() -> None:
        disk = threading.Event()
        stalled = [asyncio.ensure_future(asyncio.to_thread(disk.wait, 30)) for _ in range(STALLED_WRITES)]
        try:
            seen["read"] = await asyncio.wait_for(asyncio.to_thread(lambda: "history"), 10)
        except TimeoutError:
            seen["read"] = "queued behind the writes"
        finally:
            disk.set()
            await asyncio.gather(*stalled)
            os.kill(os.getpid(), signal.SIGTERM)  # serve's own handler: a graceful stop

    def on_ready(ready: dict[str, Any]) -> None:
        seen["probe"] = asyncio.get_running_loop().create_task(probe())

    assert asyncio.run(serve(options, on_ready=on_ready)) == EXIT_OK
    assert seen["read"] == "history"
    assert BLOCKING_IO_WORKERS > STALLED_WRITES
