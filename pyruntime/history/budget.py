"""The history token budget of one request (contract §5)."""

from __future__ import annotations

from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError

MIN_COMPLETION_RESERVE = 64
FIXED_OVERHEAD_TOKENS = 64
MIN_HISTORY_TOKENS = 32
MAX_OVERFLOW_RETRIES = 3
OVERFLOW_SHRINK = 0.75
# Compaction with hysteresis: once the history reaches its trigger, fold down to half the
# window and half the verbatim room, so about half a window of turns append only before the next
# fold and the summary, and the model's cached prompt after it, stay unchanged meanwhile.
COMPACTION_TARGET_RATIO = 0.5
# The deterministic summary's bound: this share of the history a bare request could hold
# (760 tokens of SmolLM2's 8192-token context), so a long conversation's prompt stops growing well below
# the naive game's whole history; past it the oldest lines are condensed first (fold.SummaryShape).
DETERMINISTIC_SUMMARY_SHARE = 1 / 8


@dataclass(frozen=True)
class HistoryBudget:
    """Token budgets of one request: the history (summary + recent messages) and the summary's share."""

    max_ctx: int
    completion_reserve: int
    fixed_tokens: int
    history_tokens: int
    summary_tokens: int  # SummaryTokenBudget
    overflow_attempt: int = 0
    max_rolled_summary_tokens: int = 0  # the explicit cap (0 = none), so cuts can be attributed to it
    # What the STORED summary may hold: it depends on the role and the model, never on one request's
    # payload, so a long hint or an overflow retry cannot shorten the stored summary for good.
    stored_summary_tokens: int = 0
    # Where a deterministic summary starts condensing its oldest lines (0: only the stored limit cuts).
    summary_bound_tokens: int = 0


def completion_reserve(max_ctx: int, max_output_tokens: int | None) -> int:
    """`clamp(max_output, 64, max_ctx/2)` if set, else `min(max(64, max_ctx/4), max_ctx/2)`."""
    half = max_ctx // 2
    if max_output_tokens is not None and max_output_tokens > 0:
        return min(max(max_output_tokens, MIN_COMPLETION_RESERVE), half)
    return min(max(MIN_COMPLETION_RESERVE, max_ctx // 4), half)


def summary_token_budget(history_tokens: int, max_rolled_summary_tokens: int = 0) -> int:
    """`SummaryTokenBudget = min(history // 3, MaxRolledSummaryTokens if > 0)`."""
    share = history_tokens // 3
    return min(share, max_rolled_summary_tokens) if max_rolled_summary_tokens > 0 else share


def stored_summary_tokens(max_ctx: int, max_rolled_summary_tokens: int = 0) -> int:
    """The stored summary's limit: the explicit cap, else a third of the history a bare request could hold."""
    if max_rolled_summary_tokens > 0:
        return max_rolled_summary_tokens
    bare = max(MIN_HISTORY_TOKENS, max_ctx - completion_reserve(max_ctx, None) - FIXED_OVERHEAD_TOKENS)
    return summary_token_budget(bare)


def summary_bound_tokens(max_ctx: int, max_rolled_summary_tokens: int = 0) -> int:
    """The deterministic summary's bound: `DETERMINISTIC_SUMMARY_SHARE` of a bare request's history, within the
    stored limit (an explicit MaxRolledSummaryTokens below it wins)."""
    bare = max(MIN_HISTORY_TOKENS, max_ctx - completion_reserve(max_ctx, None) - FIXED_OVERHEAD_TOKENS)
    stored = stored_summary_tokens(max_ctx, max_rolled_summary_tokens)
    return max(1, min(stored, int(bare * DETERMINISTIC_SUMMARY_SHARE)))


def summary_cut_tokens(stored_limit: int, compaction_target_ratio: float = 1.0) -> int:
    """What a stored summary over its limit is cut down to: the limit itself, or with hysteresis (ratio < 1)
    that share of it, as the history is, so the folds after a cut append to it until it reaches the limit again.

    One fold of a 30-message window adds ~600 SmolLM2 tokens of bullets to a ~2,000-token limit: a cut to
    3/4 of the limit was taken again at every fold (measured), a cut to half lets the next fold append.
    """
    if compaction_target_ratio >= 1.0:
        return stored_limit
    return max(1, int(stored_limit * max(0.0, compaction_target_ratio)))


def _non_negative(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative integer, got {value!r}")


def compute_history_budget(
    *,
    model_context_tokens: int,
    context_tokens: int = 0,
    max_output_tokens: int | None = None,
    system_prompt_tokens: int = 0,
    user_payload_tokens: int = 0,
    tool_schema_tokens: int = 0,
    overflow_attempt: int = 0,
    max_rolled_summary_tokens: int = 0,
) -> HistoryBudget:
    """The budget policy of contract §5; `context_tokens` (the role's ContextTokens, 0 = inherit) wins over the
    model's."""
    for name, value in (
        ("model_context_tokens", model_context_tokens),
        ("context_tokens", context_tokens),
        ("system_prompt_tokens", system_prompt_tokens),
        ("user_payload_tokens", user_payload_tokens),
        ("tool_schema_tokens", tool_schema_tokens),
        ("overflow_attempt", overflow_attempt),
        ("max_rolled_summary_tokens", max_rolled_summary_tokens),
    ):
        _non_negative(name, value)
    if overflow_attempt > MAX_OVERFLOW_RETRIES:
        raise InvalidArgumentError(f"overflow_attempt must be at most {MAX_OVERFLOW_RETRIES}, got {overflow_attempt}")
    max_ctx = context_tokens or model_context_tokens
    if max_ctx <= 0:
        raise InvalidArgumentError("the context size must be positive (role ContextTokens or the model's)")
    reserve = completion_reserve(max_ctx, max_output_tokens)
    fixed = system_prompt_tokens + user_payload_tokens + tool_schema_tokens + FIXED_OVERHEAD_TOKENS
    history = max(MIN_HISTORY_TOKENS, max_ctx - reserve - fixed)
    if overflow_attempt:
        history = max(1, int(history * OVERFLOW_SHRINK**overflow_attempt))
    return HistoryBudget(
        max_ctx=max_ctx,
        completion_reserve=reserve,
        fixed_tokens=fixed,
        history_tokens=history,
        summary_tokens=summary_token_budget(history, max_rolled_summary_tokens),
        overflow_attempt=overflow_attempt,
        max_rolled_summary_tokens=max_rolled_summary_tokens,
        stored_summary_tokens=stored_summary_tokens(max_ctx, max_rolled_summary_tokens),
        summary_bound_tokens=summary_bound_tokens(max_ctx, max_rolled_summary_tokens),
    )
