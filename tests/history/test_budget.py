"""The budget policy of contract §5, with concrete numbers."""

from __future__ import annotations

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.history.budget import completion_reserve, compute_history_budget, summary_token_budget


def test_default_reserve_is_a_quarter_of_the_context() -> None:
    budget = compute_history_budget(model_context_tokens=8192, system_prompt_tokens=100, user_payload_tokens=20)
    assert budget.completion_reserve == 2048
    assert budget.fixed_tokens == 184  # 100 + 20 + 0 + 64
    assert budget.history_tokens == 8192 - 2048 - 184
    assert budget.summary_tokens == (8192 - 2048 - 184) // 3


@pytest.mark.parametrize(
    ("max_ctx", "max_output", "expected"),
    [(8192, 10, 64), (8192, 1000, 1000), (8192, 10000, 4096), (100, None, 50), (400, None, 100), (200, None, 64)],
)
def test_completion_reserve(max_ctx: int, max_output: int | None, expected: int) -> None:
    assert completion_reserve(max_ctx, max_output) == expected


def test_role_context_tokens_win_over_the_model_context() -> None:
    budget = compute_history_budget(model_context_tokens=8192, context_tokens=1024, max_output_tokens=200)
    assert budget.max_ctx == 1024
    assert budget.history_tokens == 1024 - 200 - 64


def test_history_never_goes_below_32() -> None:
    budget = compute_history_budget(model_context_tokens=512, system_prompt_tokens=5000)
    assert budget.history_tokens == 32
    assert budget.summary_tokens == 10


def test_overflow_retries_shrink_by_three_quarters_per_attempt() -> None:
    base = compute_history_budget(model_context_tokens=8192).history_tokens
    assert base == 6080
    shrunk = [compute_history_budget(model_context_tokens=8192, overflow_attempt=a).history_tokens for a in (1, 2, 3)]
    assert shrunk == [4560, 3420, 2565]
    with pytest.raises(InvalidArgumentError, match="at most 3"):
        compute_history_budget(model_context_tokens=8192, overflow_attempt=4)


def test_summary_budget_takes_the_explicit_cap_when_smaller() -> None:
    assert summary_token_budget(6080, 0) == 2026
    assert summary_token_budget(6080, 500) == 500
    assert summary_token_budget(6080, 5000) == 2026
    assert compute_history_budget(model_context_tokens=8192, max_rolled_summary_tokens=300).summary_tokens == 300


@pytest.mark.parametrize(
    "bad",
    [
        {"model_context_tokens": 0},
        {"model_context_tokens": -1},
        {"model_context_tokens": 8192, "system_prompt_tokens": -5},
    ],
)
def test_bad_input_is_refused(bad: dict[str, int]) -> None:
    with pytest.raises(InvalidArgumentError):
        compute_history_budget(**bad)
