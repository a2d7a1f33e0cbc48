"""Recording a turn into the role's history (contract §7): the user hint once, tool rows, the reply.

Tool results are recorded per `ToolResultMemory`: as transcript rows (tool call k=2, tool result
k=3) and, per round, as one `tool` chat message with one line per result, so they replay (as a user
message) in later turns. Building the rows is pure (`turn_rows`); `record_turn` writes them in one
durable append, so a turn costs one history write and one fsync however many rows it leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyruntime.history.messages import clip_marked, one_line, utf16_len, utf16_prefix
from pyruntime.history.prune import strip_think
from pyruntime.policy import ToolResultMemory
from pyruntime.stores.base import TranscriptEntry, TranscriptKind, chat_kind
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.turns.rounds.rules import ExecutedCall

log = logging.getLogger("pyruntime.turns")

COMPACT_LINE_CHARS = 240
FULL_DETAIL_CHARS = 2000
TOOL_CHAT_ROLE = "tool"
TOOL_RESULTS_HEADER = "Tool results:"


def truncate_middle(text: str, limit: int = FULL_DETAIL_CHARS) -> tuple[str, int]:
    """`text` if it fits `limit` UTF-16 units, else head + `...[truncated N chars]...` + tail; returns (text, N)."""
    total = utf16_len(text)
    if total <= limit:
        return text, 0
    head = utf16_prefix(text, limit // 2)
    tail = utf16_prefix(text[::-1], limit - utf16_len(head))[::-1]
    dropped = total - utf16_len(head) - utf16_len(tail)
    return f"{head}...[truncated {dropped} chars]...{tail}", dropped


@dataclass(frozen=True)
class RecordedResult:
    """One tool result as it goes into the history."""

    call: ExecutedCall
    line: str  # the one-line entry of the `tool` chat message
    transcript_content: str  # the k=3 row's content
    chars_total: int
    chars_dropped: int


def recorded_result(call: ExecutedCall, mode: ToolResultMemory) -> RecordedResult | None:
    """The history form of one result under `mode`, or None when the mode does not keep it."""
    success = call.outcome.success
    if mode is ToolResultMemory.NONE or (mode is ToolResultMemory.ERRORS_ONLY and success):
        return None
    status = "ok" if success else "error"
    if mode is ToolResultMemory.FULL:
        content = call.outcome.content
        kept, dropped = truncate_middle(content)
        return RecordedResult(call, f"{call.name} ({status}): {one_line(kept)}", kept, utf16_len(content), dropped)
    full_line = f"{call.name} ({status}): {one_line(call.outcome.summary or call.outcome.content)}"
    line, dropped = clip_marked(full_line, COMPACT_LINE_CHARS)
    return RecordedResult(call, line, line, utf16_len(full_line), dropped)


@dataclass(frozen=True)
class TurnRecord:
    """What a turn leaves in the history; `reply` None = no assistant message (the turn did not complete).

    A completed turn's reply is recorded even when empty.
    """

    hint: str
    rounds: Sequence[Sequence[ExecutedCall]] = ()
    reply: str | None = None


def _chat_row(role: str, content: str) -> TranscriptEntry:
    return TranscriptEntry(chat_kind(role), role, content, is_chat_message=True)


@dataclass(frozen=True)
class TurnRows:
    """The history rows of one turn and the numbers of the tool results they keep (for the log line)."""

    rows: list[TranscriptEntry]
    results: int = 0
    chars_total: int = 0
    chars_dropped: int = 0


def turn_rows(record: TurnRecord, mode: ToolResultMemory) -> TurnRows:
    """The rows of a turn, in order: the hint, per round the call/result rows and `tool` message, the reply.

    No rows without a hint, so no assistant message is ever stored without its user message.
    """
    if not record.hint:
        return TurnRows([])
    rows = [_chat_row("user", record.hint)]
    entries = total = dropped = 0
    for calls in record.rounds:
        rows += [
            TranscriptEntry(TranscriptKind.TOOL_CALL, c.name, c.arguments_json, call_id=c.call_id or None)
            for c in calls
        ]
        results = [r for r in (recorded_result(c, mode) for c in calls) if r is not None]
        rows += [
            TranscriptEntry(TranscriptKind.TOOL_RESULT, r.call.name, r.transcript_content,
                            call_id=r.call.call_id or None)
            for r in results
        ]
        if results:
            lines = "\n".join(r.line for r in results)
            rows.append(_chat_row(TOOL_CHAT_ROLE, f"{TOOL_RESULTS_HEADER}\n{lines}"))
            entries += len(results)
            total += sum(r.chars_total for r in results)
            dropped += sum(r.chars_dropped for r in results)
    if record.reply is not None:
        # An empty (or reasoning-only) reply is recorded as an empty assistant message, as the design
        # note's orchestrator does: the history keeps its user/assistant alternation.
        rows.append(_chat_row("assistant", strip_think(record.reply)))
    return TurnRows(rows, entries, total, dropped)


def record_turn(
    store: ScopedAgentMemoryStore, role_id: str, record: TurnRecord, mode: ToolResultMemory, *, persist: bool
) -> None:
    """Append the turn's rows to the role's history in ONE all-or-nothing append (one write, one fsync).

    Should that append fail, the hint alone is tried once more: the user's words are kept whenever
    they can be (the failed append wrote nothing, so the hint is still recorded at most once).
    """
    made = turn_rows(record, mode)
    if not made.rows:
        return
    try:
        store.append_transcript(role_id, made.rows, persist)
    except Exception as exc:
        if len(made.rows) == 1:
            raise
        log.warning("recording the turn failed (%s); recording the user hint alone", type(exc).__name__)
        store.append_transcript(role_id, made.rows[:1], persist)
        raise
    if made.results:
        log.info("tool results stored in history: %d entries, %d chars total -> %d kept, %d dropped",
                 made.results, made.chars_total, made.chars_total - made.chars_dropped, made.chars_dropped)
