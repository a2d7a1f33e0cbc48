"""Fixtures of the history pipeline tests: the tiny real GGUF model and small builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyruntime.history.budget import HistoryBudget, compute_history_budget
from pyruntime.history.messages import HistoryMessage
from tests.support.tiny_model import write_tiny_model


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight llama GGUF, written once per session."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


def dialogue(count: int, *, size: int = 0, prefix: str = "message") -> list[HistoryMessage]:
    """`count` alternating user/assistant messages with distinct contents."""
    return [
        HistoryMessage("user" if i % 2 == 0 else "assistant", f"{prefix} {i}" + (" " + "w" * size if size else ""))
        for i in range(count)
    ]


def roomy_budget(**kwargs: int) -> HistoryBudget:
    """A budget where token limits do not bind (an 8192-token context)."""
    return compute_history_budget(model_context_tokens=8192, **kwargs)
