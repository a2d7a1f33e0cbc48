"""One in-process run of the real CLI (`coreai-runtime ARGS...`), as the `cli` fixture (tests/conftest.py) runs it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class CliRun:
    """Exit code and captured output of one CLI call."""

    rc: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as one JSON document."""
        return json.loads(self.out)
