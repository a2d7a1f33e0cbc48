"""One compaction, computed: the summarizer's fold with the rules for taking it, else the deterministic fold, capped
to the stored summary's limit, as a `Fold` value the turn that sends it applies (`pipeline.py` decides when).

Pure but for the summarizer call it is handed (`compact`); the cut-report lines it logs travel with the `Fold`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pyruntime.history import cut_report as cuts
from pyruntime.history.budget import summary_cut_tokens
from pyruntime.history.cut_report import ClippedBullet, CompactionKind
from pyruntime.history.fold import SummaryShape, deterministic_fold, limit_summary_tokens
from pyruntime.history.fold_marker import Anchor, anchor_of, marker_anchors, with_marker
from pyruntime.history.llm_fold import (
    ChatCompletionFn,
    LlmCompactionOptions,
    build_compaction_payload,
    clip_summary,
    run_compaction,
    salient_terms,
    summary_rejection,
)
from pyruntime.history.messages import HistoryMessage
from pyruntime.history.prune import strip_think
from pyruntime.history.tokens import TokenCounter, count_message_tokens


@dataclass(frozen=True)
class Fold:
    """One compaction: the stored summary it leaves and what it accounts for, applied by the turn that sends it."""

    base: str | None  # the stored summary it folds onto (marker included; None: none)
    covered: tuple[Anchor, ...]  # the stored messages after `base`'s fold point it accounts for, oldest first
    folded: int  # how many of `covered` it folded; the rest were deferred to the next compaction
    summary: str  # the new stored summary (body + marker)
    body: str  # its body (marker stripped)
    kind: CompactionKind
    fell_back: bool = False
    clipped: tuple[ClippedBullet, ...] = ()
    chars_dropped: int = 0  # summary chars cut by MaxSummaryChars or the stored limit
    stored_cut_tokens: int = 0  # tokens the stored limit cut
    records: tuple[logging.LogRecord, ...] = field(default=(), compare=False, repr=False)  # its cut-report lines

    def applies_to(self, prior_summary: str | None, unfolded: Sequence[HistoryMessage]) -> bool:
        """True when it was made from this summary and these messages (none changed since): it can be sent."""
        if (self.base or None) != (prior_summary or None) or len(unfolded) < len(self.covered):
            return False
        # A prefix match: unfolded may hold newer messages past what the fold covered.
        return all(anchor_of(m) == a for m, a in zip(unfolded, self.covered, strict=False))



async def compute_fold(
    prior_summary: str | None,
    prior_body: str,
    messages: Sequence[HistoryMessage],
    fold_start: int,
    covered: Sequence[HistoryMessage],
    to_fold: list[HistoryMessage],
    *,
    counter: TokenCounter,
    compact: ChatCompletionFn | None,
    options: LlmCompactionOptions,
    stored_limit: int,
    summary_bound: int,
    compaction_target_ratio: float,
    llm_wanted: bool,
) -> Fold:
    """Fold `to_fold` (the prompt copy of `covered`) onto the prior summary: the LLM fold when `compact` is given
    (deterministic on its failure), else deterministic; its cut-report lines are kept with it."""
    with cuts.capturing() as records:
        fold_point = len(covered)
        folded_body: str | None = None
        fell_back = False
        kind = CompactionKind.DETERMINISTIC
        clipped: tuple[ClippedBullet, ...] = ()
        chars_dropped = 0
        if compact is not None:
            payload = build_compaction_payload(prior_body, to_fold, options)
            deferred = len(to_fold) - payload.consumed
            cuts.log_compaction_payload(
                payload.lines, payload.clipped_lines, payload.chars_dropped, len(payload.text),
                options.max_payload_chars, deferred, options.max_per_message_chars,
            )
            folded_body, reason = await run_compaction(compact, payload, options)
            clip = None
            if folded_body is not None:
                clip = clip_summary(folded_body, options.max_summary_chars)
                # Only where the model can write the summary: smaller than what it replaces, keeping the
                # player's names and numbers; a small model's repetitions or inventions fall back to the fold.
                consumed = to_fold[: payload.consumed]
                replaced = (counter.count(prior_body) if prior_body else 0) + sum(
                    count_message_tokens(counter, m.content) for m in consumed)
                reason = summary_rejection(clip[0], replaced, counter.count(clip[0]), salient_terms(consumed))
                if reason:
                    folded_body = None
            if folded_body is None or clip is None:
                cuts.log_compaction_fallback(reason)
                fell_back = True
            else:
                kind = CompactionKind.LLM
                # The marker stops at the last line sent; the next compaction folds the rest.
                fold_point = payload.consumed
                folded_body, total, dropped = clip
                if dropped:
                    chars_dropped += dropped
                    cuts.log_summary_clipped(total, total - dropped, dropped, options.max_summary_chars)
        elif llm_wanted:
            fell_back = True  # the turn could not wait for the summarizer: folded deterministically
            cuts.log_compaction_fallback("the fold was due in the turn (the player does not wait for the summarizer)")
        if folded_body is None:
            shape = SummaryShape(counter, limit_tokens=summary_bound,
                                 target_ratio=compaction_target_ratio if compaction_target_ratio < 1.0 else 1.0)
            result = deterministic_fold(prior_body, to_fold, shape)
            folded_body = result.body
            clipped = tuple(result.clipped)
            cuts.log_fold(len(to_fold), len(result.clipped), result.chars_total, result.chars_kept,
                          result.chars_dropped, result.bullet_chars)
            if result.condensed is not None:
                c = result.condensed
                chars_dropped += c.chars_removed
                cuts.log_summary_condensed(c.shortened, c.dropped, c.tokens_before, c.tokens_after, summary_bound)

        # The stored summary's own limit (MaxRolledSummaryTokens, else one that only the role and the
        # model set): the request's budget cuts only the copy sent.
        capped = limit_summary_tokens(folded_body, counter, stored_limit)
        if capped.tokens_dropped and compaction_target_ratio < 1.0:
            # Hysteresis for the summary too: it sits near the prompt's start, and a fold that only appends to it
            # keeps the model's cached state of its older lines; a cut at every fold past the limit would not.
            hysteresis_limit = summary_cut_tokens(stored_limit, compaction_target_ratio)
            capped = limit_summary_tokens(folded_body, counter, hysteresis_limit)
        chars_dropped += capped.chars_dropped
        body = capped.text
    return Fold(
        base=prior_summary or None,
        covered=tuple(anchor_of(m) for m in covered),
        folded=fold_point,
        summary=with_marker(body, marker_anchors(messages, fold_start + fold_point)),
        body=body,
        kind=kind,
        fell_back=fell_back,
        clipped=clipped,
        chars_dropped=chars_dropped,
        stored_cut_tokens=capped.tokens_dropped,
        records=tuple(records),
    )


def fold_inputs(messages: Sequence[HistoryMessage], kept: dict[int, HistoryMessage]) -> list[HistoryMessage]:
    """The messages to fold as the prompt copy has them (`<think>` stripped); pruned ones included."""
    out = []
    for index, message in enumerate(messages):
        if index in kept:
            out.append(kept[index])
        elif message.is_assistant:
            out.append(replace(message, content=strip_think(message.content)))
        else:
            out.append(message)
    return out
