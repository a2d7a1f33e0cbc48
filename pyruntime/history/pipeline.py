"""One turn's history: fold-point detection, pruning, compaction, the summary to send, the cut report (contract §5).

The pipeline reads nothing and writes nothing by itself: it gets the stored messages and the prior
summary, and hands back a `PreparedHistory` whose new summary reaches the store only through
`commit()`, which the turn calls after it succeeded (a failed overflow retry persists nothing).

A compaction is a `Fold`: computed by the turn that sends it (`CompactionTiming.IN_TURN`, the design
note's way), or between turns: after a reply, the runtime prepares the next turn's history
in the background, which computes the fold; the next turn sends that `Fold` (`staged`) as computed,
and until it is ready, sends the previous summary while the history still fits its budget
(`CompactionTiming.BETWEEN_TURNS`). Either way the fold reaches the store only with the turn that sent it.

`prepare_turn_history` is one decision over one list of dispositions; computing a fold (`compaction.py`), the
fold's text (`fold.py`), the budget and the cut report are apart.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyruntime.errors import InvalidArgumentError
from pyruntime.history import cut_report as cuts
from pyruntime.history.budget import HistoryBudget
from pyruntime.history.compaction import Fold, compute_fold, fold_inputs
from pyruntime.history.cut_report import CutReport
from pyruntime.history.fold import limit_summary_tokens
from pyruntime.history.fold_marker import (
    MARKER_VERSION,
    find_fold_point,
    marker_anchors,
    split_marker_versioned,
    with_marker,
)
from pyruntime.history.llm_fold import (
    ChatCompletionFn,
    LlmCompactionOptions,
)
from pyruntime.history.messages import HistoryMessage, as_history_messages
from pyruntime.history.prune import prune_history
from pyruntime.history.tokens import TokenCounter, count_message_tokens
from pyruntime.policy import RoleMemoryConfig


class Disposition(enum.Enum):
    """What became of one stored message in this turn."""

    ALREADY_FOLDED = "already folded"  # an earlier turn folded it
    SENT = "sent verbatim"
    PRUNED = "pruned"
    FOLDED = "folded"  # folded by this turn
    DEFERRED = "deferred"  # the compaction payload had no room; the next compaction folds it
    LEFT_OUT = "left out"  # not sent and not summarized (a loss, logged as a warning)


class CompactionTiming(enum.Enum):
    """When a compaction is computed: by the turn that sends it, or between turns."""

    IN_TURN = "in turn"  # fold when the trigger is reached, in the turn (an LLM fold's call too)
    # The turn sends the `Fold` prepared after the previous reply once it is ready; until then the previous
    # summary while the history fits its budget (and the window's slack); folds in the turn only past that,
    # deterministically (the player never waits for a summarizer call).
    BETWEEN_TURNS = "between turns"


# How far past MaxChatHistoryMessages a turn may send the history verbatim while its fold is prepared between
# turns (a share of the window): a player faster than the fold gets the previous head a few turns more.
DEFER_WINDOW_SLACK = 0.5


@dataclass(frozen=True)
class FoldHeadroom:
    """How far a history was below its compaction trigger: the tokens it could still gain without reaching it, and
    the messages (None: no message cap)."""

    tokens: int
    messages: int | None


NEVER_FOLDS = FoldHeadroom(tokens=1 << 62, messages=None)  # a history without a rolling summary is never folded


@dataclass
class PreparedHistory:
    """The history of one turn: recent messages (verbatim), the summary text, the cut report, the pending summary."""

    messages: list[HistoryMessage]
    summary_text: str  # marker stripped, within SummaryTokenBudget; "" when none
    cut_report: CutReport
    pending_summary: str | None  # the new stored summary (marker included); None = unchanged
    dispositions: tuple[Disposition, ...]  # one per stored message, oldest first
    history_tokens: int  # tokens the summary and the verbatim messages cost
    fold: Fold | None = None  # the compaction this history applies (made now or between turns), if any
    # Below the trigger (and nothing staged): how far; None when it reached it, or a fold is staged or applied.
    fold_headroom: FoldHeadroom | None = None
    _save: Callable[[str], None] | None = field(default=None, repr=False)
    _committed: bool = field(default=False, repr=False)

    def commit(self) -> bool:
        """Persist the pending summary after the turn succeeded; returns whether anything was saved (once)."""
        if self._committed or self.pending_summary is None:
            return False
        if self._save is None:
            raise InvalidArgumentError("this history was prepared without a summary store to commit to")
        self._save(self.pending_summary)
        self._committed = True
        return True


def _verbatim_start(tokens: Sequence[int], max_messages: int, room: int) -> int:
    """Start of the newest messages that fit `room` tokens, at most `max_messages` (0 = no cap).

    The newest message stays verbatim unless it alone is larger than the room: sending it would
    overflow the context on every attempt, so it is folded (summarized) like the rest.
    """
    start, used = len(tokens), 0
    while start > 0:
        cost = tokens[start - 1]
        full = max_messages > 0 and len(tokens) - start >= max_messages
        if full or used + cost > room:
            break
        used += cost
        start -= 1
    return start


def _target_messages(max_messages: int, ratio: float) -> int:
    """The message window to fold down to (0 = no cap stays no cap; at least one message)."""
    if max_messages <= 0:
        return 0
    return max(1, int(max_messages * max(0.0, ratio)))


def _align_to_tool_groups(kept: Sequence[HistoryMessage], start: int) -> int:
    """Move the verbatim start so no tool call is separated from its result (shrinking unless nothing would stay)."""
    for _ in range(len(kept) + 1):
        before = {m.tool_call_id for m in kept[:start] if m.tool_call_id is not None}
        split = before & {m.tool_call_id for m in kept[start:] if m.tool_call_id is not None}
        if not split:
            return start
        members = [i for i, m in enumerate(kept) if m.tool_call_id in split]
        start = members[-1] + 1 if members[-1] + 1 < len(kept) else members[0]
    return start


async def prepare_turn_history(
    stored: Sequence[Any],
    prior_summary: str | None,
    *,
    config: RoleMemoryConfig,
    counter: TokenCounter,
    budget: HistoryBudget,
    compact: ChatCompletionFn | None = None,
    llm_compaction_enabled: bool = False,
    llm_options: LlmCompactionOptions | None = None,
    summarize: bool = True,
    save_summary: Callable[[str], None] | None = None,
    compaction_target_ratio: float = 1.0,
    timing: CompactionTiming = CompactionTiming.IN_TURN,
    staged: Fold | None = None,
    staged_ready: bool = True,
) -> PreparedHistory:
    """Assemble one turn's history from the stored messages (oldest first) and the prior stored summary.

    `compact` is used only when `llm_compaction_enabled` (the global switch) and the role's
    `use_llm_context_compaction` are both on. `summarize=False` runs without a rolling summary:
    the newest `max_chat_history_messages` are sent, older ones are reported as left out.
    `compaction_target_ratio` (< 1: hysteresis) folds down to that share of the message window and
    of the verbatim room once compaction triggers, so the following turns append only and the
    summary (and the model's cached prompt after it) stays unchanged until the next trigger; a stored
    summary over its limit is then cut below it (`budget.summary_cut_tokens`), so later folds append.
    `staged`: a fold prepared between turns; sent as it is when it still applies (same summary, same
    messages) and `staged_ready` (its head evaluated already) or when the history no longer fits without
    it. `timing`: see `CompactionTiming`.
    """
    messages = as_history_messages(stored)
    if not summarize:
        return _prepare_without_summary(messages, config=config, counter=counter, budget=budget)
    options = llm_options or LlmCompactionOptions()
    report = CutReport(stored_messages=len(messages), overflow_retries=budget.overflow_attempt)
    prior_body, _, marker_version = split_marker_versioned(prior_summary)
    fold_start = find_fold_point(messages, prior_summary) if prior_summary else 0
    unfolded = messages[fold_start:]
    pruned = prune_history(unfolded)
    kept_index = [i for i, _ in pruned.kept]
    kept = [m for _, m in pruned.kept]
    tokens = [count_message_tokens(counter, m.content) for m in kept]
    report.tokens_before = sum(count_message_tokens(counter, m.content) for m in unfolded) + (
        counter.count(prior_body) if prior_body else 0
    )

    disposition = [Disposition.ALREADY_FOLDED] * fold_start + [Disposition.SENT] * len(unfolded)
    for i, _ in pruned.pruned:
        disposition[fold_start + i] = Disposition.PRUNED

    reserve = budget.summary_tokens
    stored_limit = budget.stored_summary_tokens or reserve
    prior_cut = limit_summary_tokens(prior_body, counter, reserve)
    ratio = config.effective_compaction_trigger_ratio
    max_messages = config.max_chat_history_messages
    trigger = (max_messages > 0 and len(kept) > max_messages) or (
        sum(tokens) + prior_cut.tokens >= ratio * budget.history_tokens
    )
    headroom = None if trigger or staged is not None else FoldHeadroom(
        int(ratio * budget.history_tokens) - (sum(tokens) + prior_cut.tokens),
        max_messages - len(kept) if max_messages > 0 else None)
    between_turns = timing is CompactionTiming.BETWEEN_TURNS and budget.overflow_attempt == 0
    # Everything unfolded fits as it is (the budget, and the window with its slack): a turn may wait for its fold.
    slack_window = max_messages + max(1, int(max_messages * DEFER_WINDOW_SLACK)) if max_messages > 0 else 0
    fits_unfolded = sum(tokens) + prior_cut.tokens <= budget.history_tokens and (
        not slack_window or len(kept) <= slack_window)

    fold: Fold | None = None
    waiting = False  # for a fold prepared between turns: the previous head is sent meanwhile
    if staged is not None and staged.applies_to(prior_summary, unfolded):
        if staged_ready or not between_turns or not fits_unfolded:
            remainder = [t for t, i in zip(tokens, kept_index, strict=True) if i >= len(staged.covered)]
            sent_summary = limit_summary_tokens(staged.body, counter, reserve).tokens
            if sum(remainder) + sent_summary <= budget.history_tokens:
                fold = staged
        else:
            waiting = True  # its head is being evaluated: sent by a later turn
    if fold is None and not waiting and trigger and kept:
        room = budget.history_tokens - reserve
        start = _verbatim_start(tokens, max_messages, room)
        if compaction_target_ratio < 1.0 and start < len(kept):
            target = _verbatim_start(tokens, _target_messages(max_messages, compaction_target_ratio),
                                     int(room * max(0.0, compaction_target_ratio)))
            # The newest message stays verbatim whenever it fits the full room (the design note's "at least the
            # newest one", contract §5).
            start = max(start, min(target, len(kept) - 1))
        start = _align_to_tool_groups(kept, start)
        if start > 0 and between_turns and fits_unfolded:
            waiting = True  # folded after this turn's reply, sent by a later turn
        elif start > 0:
            # Everything before the first verbatim message is folded, pruned messages included: a
            # superseded or older tool result, a duplicate, reaches the summary when it ages out.
            verbatim_from = kept_index[start] if start < len(kept) else len(unfolded)
            use_llm = (compact is not None and llm_compaction_enabled and config.use_llm_context_compaction
                       and not between_turns)  # a fold the turn must make now is deterministic: no summarizer wait
            fold = await compute_fold(
                prior_summary, prior_body, messages, fold_start, unfolded[:verbatim_from],
                fold_inputs(unfolded[:verbatim_from], dict(pruned.kept)),
                counter=counter, compact=compact if use_llm else None, options=options,
                stored_limit=stored_limit, summary_bound=budget.summary_bound_tokens,
                compaction_target_ratio=compaction_target_ratio,
                llm_wanted=use_llm or (between_turns and compact is not None and llm_compaction_enabled
                                       and config.use_llm_context_compaction),
            )

    report.compaction_deferred = waiting and trigger
    body = prior_body
    pending_summary: str | None = None
    if fold is not None:
        cuts.replay(fold.records)
        body = fold.body
        pending_summary = fold.summary
        report.compaction = fold.kind
        report.compaction_fell_back = fold.fell_back
        report.clipped_bullets = list(fold.clipped)
        report.summary_chars_dropped += fold.chars_dropped
        report.folded_between_turns = fold is staged
        for position in range(len(fold.covered)):
            slot = fold_start + position
            if position < fold.folded:
                disposition[slot] = Disposition.FOLDED
                report.folded_ids.append(unfolded[position].id)
            else:
                disposition[slot] = Disposition.DEFERRED
                report.deferred_ids.append(unfolded[position].id)
    elif fold_start > 0 and marker_version < MARKER_VERSION:
        # An older marker (content hashes) or none: rewrite it as identities once this turn succeeds.
        pending_summary = with_marker(prior_body, marker_anchors(messages, fold_start))

    summary_cut = limit_summary_tokens(body, counter, reserve)
    verbatim = [m for i, m in pruned.kept if disposition[fold_start + i] is Disposition.SENT]
    stored_cut_tokens = fold.stored_cut_tokens if fold is not None else 0
    if stored_cut_tokens or summary_cut.tokens_dropped:
        cuts.log_summary_cut(stored_cut_tokens, summary_cut.tokens_dropped, reserve, summary_cut.tokens)
        report.summary_chars_dropped += summary_cut.chars_dropped

    report.pruned_ids = [m.id for m, d in zip(messages, disposition, strict=True) if d is Disposition.PRUNED]
    report.sent_verbatim = len(verbatim)
    report.summary_tokens_sent = summary_cut.tokens
    history_tokens = sum(
        t for t, (i, _) in zip(tokens, pruned.kept, strict=True) if disposition[fold_start + i] is Disposition.SENT
    )
    history_tokens += summary_cut.tokens
    report.tokens_after = history_tokens
    report.already_folded = fold_start
    report.lossy = report.summary_chars_dropped > 0
    cuts.log_history_window(
        stored=len(messages),
        verbatim=len(verbatim),
        pruned=len(report.pruned_ids),
        folded=disposition.count(Disposition.FOLDED) + fold_start,
        summary_tokens=summary_cut.tokens,
        deferred=len(report.deferred_ids),
        left_out=0,
        window_cap=None,
    )
    return PreparedHistory(
        messages=verbatim,
        summary_text=summary_cut.text,
        cut_report=report,
        pending_summary=pending_summary,
        dispositions=tuple(disposition),
        history_tokens=history_tokens,
        fold=fold,
        fold_headroom=headroom if fold is None else None,
        _save=save_summary,
    )


def _prepare_without_summary(
    messages: list[HistoryMessage], *, config: RoleMemoryConfig, counter: TokenCounter, budget: HistoryBudget
) -> PreparedHistory:
    """No rolling summary: the newest messages that fit the window and the budget; the rest is left out."""
    window = config.max_chat_history_messages
    over_cap = window > 0 and len(messages) > window
    first = len(messages) - window if over_cap else 0
    considered = messages[first:]
    pruned = prune_history(considered)
    kept_index = [i for i, _ in pruned.kept]
    kept = [m for _, m in pruned.kept]
    tokens = [count_message_tokens(counter, m.content) for m in kept]
    start = _align_to_tool_groups(kept, _verbatim_start(tokens, window, budget.history_tokens)) if kept else 0
    disposition = [Disposition.LEFT_OUT] * len(messages)
    for i, _ in pruned.pruned:
        disposition[first + i] = Disposition.PRUNED
    for position in range(start, len(kept)):
        disposition[first + kept_index[position]] = Disposition.SENT
    left_out = [m.id for m, d in zip(messages, disposition, strict=True) if d is Disposition.LEFT_OUT]
    history_tokens = sum(tokens[start:])
    report = CutReport(
        stored_messages=len(messages),
        sent_verbatim=len(kept) - start,
        pruned_ids=[considered[i].id for i, _ in pruned.pruned],
        left_out_ids=left_out,
        tokens_before=sum(count_message_tokens(counter, m.content) for m in messages),
        tokens_after=history_tokens,
        overflow_retries=budget.overflow_attempt,
        lossy=bool(left_out),
    )
    cuts.log_history_window(
        stored=len(messages),
        verbatim=report.sent_verbatim,
        pruned=len(pruned.pruned),
        folded=0,
        summary_tokens=0,
        deferred=0,
        left_out=len(left_out),
        window_cap=window if over_cap else None,
    )
    return PreparedHistory(
        messages=kept[start:],
        summary_text="",
        cut_report=report,
        pending_summary=None,
        dispositions=tuple(disposition),
        history_tokens=history_tokens,
        fold_headroom=NEVER_FOLDS,
    )


async def prepare_scoped_turn_history(store: Any, role_id: str, **kwargs: Any) -> PreparedHistory:
    """`prepare_turn_history` over a `ScopedAgentMemoryStore`: reads the history once, commits to its summary store."""
    config: RoleMemoryConfig = kwargs["config"]
    summarize = kwargs.get("summarize", True)
    window = config.max_chat_history_messages
    # With a summary every stored message may still need folding; without one, one extra row shows the cap.
    limit = 0 if summarize or window <= 0 else window + 1
    stored = store.get_chat_history(role_id, limit)
    prior = store.load_summary(role_id) if summarize else None
    return await prepare_turn_history(
        stored, prior, **kwargs,
        # The summary of session-only chat stays in process memory like that chat: nothing of it reaches a file.
        save_summary=lambda summary: store.save_summary(role_id, summary, persist=config.persist_chat_history),
    )
