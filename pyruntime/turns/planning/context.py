"""What one request may spend of the model's context (contract §5): counted on what is sent.

The role's context is capped at the model's (a role cannot have more than the model holds). The
fixed part of a request (system prompt, native tool schemas, tail blocks, the player's message and
the chat template around them) is counted as rendered; what is left after the completion reserve
is the history's. A fixed part that leaves nothing fails the turn at once, naming each part and its
size: shrinking the history cannot help it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyruntime.history.budget import HistoryBudget, completion_reserve, compute_history_budget, summary_token_budget
from pyruntime.history.pipeline import PreparedHistory
from pyruntime.history.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter
from pyruntime.model.client.errors import ModelError
from pyruntime.turns.planning.prompt import summary_block

log = logging.getLogger("pyruntime.turns")


class FixedPartOverflowError(ModelError):
    """The request's fixed part does not fit the context; the message names each part and its token count."""


def effective_context(model_context_tokens: int, role_context_tokens: int, warned: set[tuple[int, int]]) -> int:
    """The role's context (0 = inherit) capped at the model's; logs a warning once per (role, model) sizes."""
    if role_context_tokens <= 0:
        return model_context_tokens
    if role_context_tokens > model_context_tokens:
        pair = (role_context_tokens, model_context_tokens)
        if pair not in warned:
            warned.add(pair)
            # Sizes only: the role id may be personal data (a player's name in a custom role).
            log.warning("a role's context of %d tokens is larger than the model's %d: capped at the model's",
                        role_context_tokens, model_context_tokens)
        return model_context_tokens
    return role_context_tokens


@dataclass(frozen=True)
class RequestFit:
    """The context of one request: its size, the completion reserve, the fixed part's rendered tokens."""

    max_ctx: int
    reserve: int
    fixed_tokens: int
    summary_overhead: int = 0  # the `## Conversation Summary` block's own tokens (heading, framing, template)

    @property
    def room(self) -> int:
        """Tokens left for the history (summary + recent messages); may be negative."""
        return self.max_ctx - self.reserve - self.fixed_tokens

    def excess(self, request_tokens: int) -> int:
        """Tokens by which a whole request of `request_tokens` overflows the context with its reserve (<= 0: fits)."""
        return request_tokens + self.reserve - self.max_ctx


def fit_request(max_ctx: int, max_output_tokens: int | None, fixed_tokens: int, summary_overhead: int = 0
                ) -> RequestFit:
    """The fit of a request whose fixed part renders to `fixed_tokens`."""
    return RequestFit(max_ctx, completion_reserve(max_ctx, max_output_tokens), fixed_tokens, summary_overhead)


def summary_block_overhead(counter: TokenCounter) -> int:
    """Tokens the summary block costs besides the summary itself (its heading and framing, one message)."""
    return counter.count(summary_block("x")) - counter.count("x") + MESSAGE_OVERHEAD_TOKENS


def overflow_error(fit: RequestFit, parts: Sequence[tuple[str, int]]) -> FixedPartOverflowError:
    """The error of a fixed part that leaves no room, naming every part and its size (never content)."""
    named = ", ".join(f"{name} {tokens} tokens" for name, tokens in parts if tokens)
    return FixedPartOverflowError(
        f"the request's fixed part does not fit the context of {fit.max_ctx} tokens: {named} "
        f"({fit.fixed_tokens} tokens rendered) plus a completion reserve of {fit.reserve} tokens; "
        "shorten the largest part or raise the context"
    )


def fixed_parts(
    system_prompt_tokens: int, tool_schema_tokens: int, tail_tokens: int, payload_tokens: int
) -> list[tuple[str, int]]:
    """The named parts of a fixed part, largest first."""
    parts = [
        ("system prompt", system_prompt_tokens),
        ("tool schemas", tool_schema_tokens),
        ("tail blocks (memory, instructions, world state)", tail_tokens),
        ("player message", payload_tokens),
    ]
    return sorted(parts, key=lambda part: -part[1])


def native_tools(offered_defs: Sequence[Mapping[str, Any]], native: bool) -> list[Mapping[str, Any]] | None:
    """The tool schemas a request sends as `tools` (native mode only; structured mode puts them in a grammar)."""
    return list(offered_defs) if native and offered_defs else None


MAX_FIT_ROUNDS = 3  # history preparations per attempt while the rendered request overflows


def history_budget(fit: RequestFit, max_output_tokens: int | None, extra_tokens: int = 0,
                   overflow_attempt: int = 0) -> HistoryBudget:
    """The history budget of a request: everything but the history is the fit's rendered fixed part."""
    budget = compute_history_budget(
        model_context_tokens=fit.max_ctx,
        max_output_tokens=max_output_tokens,
        system_prompt_tokens=fit.fixed_tokens + fit.summary_overhead + extra_tokens,
        overflow_attempt=overflow_attempt,
    )
    available = max(0, fit.room - fit.summary_overhead - extra_tokens)
    if budget.history_tokens > available:
        # The formula's floor (32 tokens) would overflow a request whose fixed part leaves less: then
        # the history gets the room there is, possibly none (everything folds; the summary waits).
        budget = replace(budget, history_tokens=available,
                         summary_tokens=summary_token_budget(available, budget.max_rolled_summary_tokens))
    return budget


async def fit_history(
    fit: RequestFit,
    prepared: PreparedHistory | None,
    *,
    prepare: Callable[[int], Awaitable[PreparedHistory]],
    render: Callable[[PreparedHistory | None], list[dict[str, Any]]],
    count: Callable[[list[dict[str, Any]]], int],
    overflow: Callable[[], Exception],
) -> tuple[PreparedHistory | None, list[dict[str, Any]]]:
    """The request, its history prepared again with less room while the rendered whole overflows.

    `prepare(extra)` prepares the history as if the fixed part were `extra` tokens larger; `render`
    assembles the request; `count` counts it as sent. An overflow with no history left to shrink
    raises `overflow()`. Still over after MAX_FIT_ROUNDS: sent as is (the server decides; an
    overflow error then retries with a smaller budget).
    """
    messages = render(prepared)
    extra = 0
    for _ in range(MAX_FIT_ROUNDS):
        excess = fit.excess(count(messages))
        if excess <= 0:
            return prepared, messages
        if prepared is None or not (prepared.messages or prepared.summary_text):
            raise overflow()
        extra += excess
        log.info("request %d token(s) over the context: history prepared again with less room", excess)
        prepared = await prepare(extra)
        messages = render(prepared)
    return prepared, messages
