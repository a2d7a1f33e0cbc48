"""Shared fixtures. Fixtures of one area live in that area's conftest or tests/support."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from tests.support.postgres import postgres_cluster, postgres_url  # noqa: E402,F401  (fixtures for every area)
