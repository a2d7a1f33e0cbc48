"""`serve` moves what start-up loaded out of the garbage collector's sight once it is ready: a full collection
then walks only what turns made since, instead of stalling every turn in flight for tens of milliseconds
(docs/benchmarks.md, "Players on one server")."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path
from typing import Any

from pyruntime.cli.serve import EXIT_OK, YOUNG_COLLECTION_THRESHOLD, serve
from pyruntime.settings import RuntimeSettings


def test_serve_freezes_the_start_up_heap_once_it_is_ready(tmp_path: Path) -> None:
    options = RuntimeSettings(no_model=True, session_only=True, data_dir=tmp_path / "data", grpc_port=0,
                              connect_port=0)
    seen: dict[str, Any] = {}

    def on_ready(ready: dict[str, Any]) -> None:
        seen["frozen when ready"] = gc.get_freeze_count()
        os.kill(os.getpid(), signal.SIGTERM)  # serve's own handler: a graceful stop, once the loop runs again

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # Python's defaults (the autouse fixture restores the session's afterwards)
    assert asyncio.run(serve(options, on_ready=on_ready)) == EXIT_OK
    frozen, tracked, young = gc.get_freeze_count(), len(gc.get_objects()), gc.get_threshold()[0]
    assert seen["frozen when ready"] == 0  # announced first: a launcher watching the ports finds "ready" logged
    assert frozen > 10_000  # the modules, schemas and servers start-up made
    assert tracked < frozen // 4  # what a full collection still walks, after serving and stopping too
    assert young == YOUNG_COLLECTION_THRESHOLD > 700  # fewer young collections in a turn's way
