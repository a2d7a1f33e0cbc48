"""Helpers of the history pipeline tests: small builders (the tiny real GGUF model is tests/conftest.py's)."""

from __future__ import annotations

from pyruntime.history.budget import HistoryBudget, compute_history_budget
from pyruntime.history.messages import HistoryMessage


def dialogue(count: int, *, size: int = 0, prefix: str = "message") -> list[HistoryMessage]:
    """`count` alternating user/assistant messages with distinct contents."""
    return [
        HistoryMessage("user" if i % 2 == 0 else "assistant", f"{prefix} {i}" + (" " + "w" * size if size else ""))
        for i in range(count)
    ]


def roomy_budget(**kwargs: int) -> HistoryBudget:
    """A budget where token limits do not bind (an 8192-token context)."""
    return compute_history_budget(model_context_tokens=8192, **kwargs)
