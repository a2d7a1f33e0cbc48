"""Fixtures of the lifeline tests (parent watch, stdin EOF, signals on every OS, the model child's tie)."""

from __future__ import annotations

from tests.support.fixtures import tiny_model_path  # noqa: F401 - fixture re-exported for this directory
