"""Visible cuts: the machine-readable cut report of a turn and the log lines naming the numbers (contract §5).

Log lines carry counts only: never content, message ids, role ids or keys.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from coreai.v1 import orchestrator_pb2
from pyruntime.proto_fields import to_message

log = logging.getLogger("pyruntime.history")

# Set while a later turn's history is only predicted (turns/between/prewarm.py): nothing is cut then, so
# the lines would report cuts twice. A context variable: other turns running meanwhile still log.
_PREDICTING: ContextVar[bool] = ContextVar("pyruntime_history_predicting", default=False)
# Set while a fold is computed: its lines are kept with it and written by the turn that sends it (a fold
# made between turns is reported with the turn that applies it, like one made in that turn).
_CAPTURING: ContextVar[list[logging.LogRecord] | None] = ContextVar("pyruntime_history_capturing", default=None)


def _write_now(record: logging.LogRecord) -> bool:
    captured = _CAPTURING.get()
    if captured is not None:
        captured.append(record)
        return False
    return not _PREDICTING.get()


log.addFilter(_write_now)


@contextlib.contextmanager
def predicting() -> Iterator[None]:
    """Within it (this task and the threads it starts), the cut-report log lines are not written."""
    token = _PREDICTING.set(True)
    try:
        yield
    finally:
        _PREDICTING.reset(token)


@contextlib.contextmanager
def capturing() -> Iterator[list[logging.LogRecord]]:
    """Within it, the cut-report lines are collected into the list yielded instead of written (see `replay`)."""
    records: list[logging.LogRecord] = []
    token = _CAPTURING.set(records)
    try:
        yield records
    finally:
        _CAPTURING.reset(token)


def replay(records: Iterable[logging.LogRecord]) -> None:
    """Write lines `capturing` kept (dropped again while predicting)."""
    for record in records:
        log.handle(record)


class CompactionKind(enum.IntEnum):
    """Which compaction ran in a turn (mirrors `coreai.v1.CompactionKind`)."""

    NONE = orchestrator_pb2.COMPACTION_KIND_NONE
    DETERMINISTIC = orchestrator_pb2.COMPACTION_KIND_DETERMINISTIC
    LLM = orchestrator_pb2.COMPACTION_KIND_LLM


@dataclass(frozen=True)
class ClippedBullet:
    """A folded message whose bullet was clipped at 280 chars."""

    message_id: str
    chars_kept: int
    chars_dropped: int


@dataclass
class CutReport:
    """What of the stored history did not reach the model verbatim in one turn (`coreai.v1.CutReport`).

    Ids are content hashes (`HistoryMessage.id`), never content. `folded_ids` lists only what this
    turn folded; messages folded by earlier turns are counted in `already_folded`.
    """

    stored_messages: int = 0
    sent_verbatim: int = 0
    pruned_ids: list[str] = field(default_factory=list)
    folded_ids: list[str] = field(default_factory=list)
    deferred_ids: list[str] = field(default_factory=list)
    left_out_ids: list[str] = field(default_factory=list)
    clipped_bullets: list[ClippedBullet] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    compaction: CompactionKind = CompactionKind.NONE
    compaction_fell_back: bool = False
    summary_tokens_sent: int = 0
    summary_chars_dropped: int = 0
    overflow_retries: int = 0
    lossy: bool = False
    already_folded: int = 0  # stored messages an earlier turn folded
    # Compaction between turns: the history reached its trigger and this turn sent the previous
    # head, the fold being prepared in the background; or the fold this turn sent was prepared after the last.
    compaction_deferred: bool = False
    folded_between_turns: bool = False
    # Stored messages of earlier sessions the turn left out (RoleMemoryConfig.send_earlier_sessions).
    earlier_session_ids: list[str] = field(default_factory=list)

    def to_proto(self) -> orchestrator_pb2.CutReport:
        """The `coreai.v1.CutReport` message."""
        bullets = [to_message(c, orchestrator_pb2.ClippedBullet) for c in self.clipped_bullets]
        return to_message(self, orchestrator_pb2.CutReport, clipped_bullets=bullets, compaction=int(self.compaction))


def log_fold(folded: int, clipped: int, chars_total: int, chars_kept: int, chars_dropped: int,
             bullet_chars: int = 280) -> None:
    """One Info line per deterministic fold."""
    log.info(
        "Folded %d message(s) into the rolling summary; %d bullet(s) clipped to %d chars: "
        "%d chars total -> %d kept, %d dropped",
        folded, clipped, bullet_chars, chars_total, chars_kept, chars_dropped,
    )


def log_summary_condensed(shortened: int, dropped: int, tokens_before: int, tokens_after: int, bound: int) -> None:
    """One Info line when a deterministic summary past its bound had its oldest lines condensed."""
    log.info(
        "Rolling summary condensed, oldest lines first: %d line(s) shortened, %d dropped: "
        "~%d -> ~%d tokens (bound %d)",
        shortened, dropped, tokens_before, tokens_after, bound,
    )


def log_compaction_payload(
    lines: int, clipped: int, chars_dropped: int, payload_chars: int, max_payload_chars: int, deferred: int,
    max_line_chars: int,
) -> None:
    """One line per LLM compaction call: Info, or Warning when messages were deferred."""
    text = (
        "LLM compaction payload: %d line(s) sent, %d clipped to %d chars (%d chars dropped); "
        "%d of %d payload chars"
    )
    args: list[object] = [lines, clipped, max_line_chars, chars_dropped, payload_chars, max_payload_chars]
    if deferred:
        log.warning(text + "; %d message(s) deferred to the next compaction", *args, deferred)
    else:
        log.info(text, *args)


def log_summary_clipped(chars_total: int, chars_kept: int, chars_dropped: int, limit: int) -> None:
    """Warning for a compacted summary clipped to MaxSummaryChars."""
    log.warning(
        "Compacted summary clipped to %d chars (the hidden fold marker not counted): "
        "%d chars total -> %d kept, %d dropped",
        limit, chars_total, chars_kept, chars_dropped,
    )


def log_summary_cut(by_cap: int, by_reserve: int, reserve: int, sent: int) -> None:
    """Warning for a rolling summary shortened (leading `…`) by the cap and/or the request reserve."""
    log.warning(
        "Rolling summary cut: ~%d token(s) by the context manager's MaxRolledSummaryTokens cap, "
        "~%d token(s) to fit the %d-token request reserve; ~%d tokens sent",
        by_cap, by_reserve, reserve, sent,
    )


def log_compaction_fallback(reason: str) -> None:
    """Warning when the LLM-assisted fold fell back to the deterministic one (reason names no content)."""
    log.warning("LLM compaction fell back to the deterministic fold: %s", reason)


def log_history_window(
    *,
    stored: int,
    verbatim: int,
    pruned: int,
    folded: int,
    summary_tokens: int,
    deferred: int,
    left_out: int,
    window_cap: int | None,
) -> None:
    """One line per turn when stored messages do not reach the model verbatim; Warning when any were lost."""
    if verbatim >= stored:
        return
    text = f"history window: {stored} stored message(s) -> {verbatim} sent verbatim"
    if pruned:
        text += f", {pruned} pruned (superseded tool results / exact duplicates / reasoning-only turns)"
    if folded:
        text += f", {folded} folded into the rolling summary (~{summary_tokens} tokens sent)"
    if deferred:
        text += f", {deferred} deferred to the next compaction"
    if left_out:
        text += f", {left_out} left out by the window with no rolling summary"
    if window_cap is not None:
        text += f"; ≥1 older message(s) not sent (MaxChatHistoryMessages={window_cap})"
    lost = left_out > 0 or window_cap is not None
    log.log(logging.WARNING if lost else logging.INFO, text)
