"""Fixtures of the isolation tests: the tiny model (the engine check) and the shared ones of tests/support."""

from __future__ import annotations

from tests.support.fixtures import tiny_model_path  # noqa: F401 - fixture re-exported for this directory
