"""Shared fixtures. Fixtures of one area live in that area's conftest or tests/support."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from tests.support.postgres import postgres_cluster, postgres_url  # noqa: E402,F401  (fixtures for every area)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The CLI run in-process (serve, chat) configures the root logger; later tests must not inherit it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
