"""The deterministic fold, the hidden fold marker, fold-point re-detection and the summary token limiter.

A stored summary is `body + "\\n" + [fold:v1:h1,h2,…]`: the hashes (newest first) of the last
stored messages the summary accounts for, so the next turn knows where folding stopped. The
marker is stripped before any prompt use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pyruntime.history.cut_report import ClippedBullet
from pyruntime.history.messages import CLIP_ELLIPSIS, HistoryMessage, clip_marked, one_line, utf16_len
from pyruntime.history.tokens import TokenCounter

SUMMARY_HEADER = "Previous conversation summary:"
MAX_BULLET_CHARS = 280
MAX_MARKER_HASHES = 8
_MARKER = re.compile(r"\[fold:v1:([0-9a-f]{12}(?:,[0-9a-f]{12}){0,7})\]")
_LEGACY_CLIP = re.compile(r"(?:\.\.\.|…(?:\[\+\d+ chars\])?)$")


def split_marker(summary: str | None) -> tuple[str, tuple[str, ...]]:
    """(body, hashes newest first) of a stored summary; no marker -> (summary, ())."""
    if not summary:
        return "", ()
    text = summary.rstrip()
    head, _, last = text.rpartition("\n")
    match = _MARKER.fullmatch(last.strip())
    if match is None:
        return text, ()
    return head.rstrip(), tuple(match.group(1).split(","))


def strip_fold_marker(summary: str | None) -> str:
    """The summary as a prompt may show it: without the marker line."""
    return split_marker(summary)[0]


def fold_marker(hashes: Sequence[str]) -> str:
    """The marker line of up to 8 hashes, newest first."""
    return f"[fold:v1:{','.join(hashes[:MAX_MARKER_HASHES])}]"


def marker_hashes(messages: Sequence[HistoryMessage], fold_point: int) -> list[str]:
    """Hashes of the (up to 8) stored messages just before `fold_point`, newest first."""
    start = max(0, fold_point - MAX_MARKER_HASHES)
    return [messages[i].id for i in range(fold_point - 1, start - 1, -1)]


def with_marker(body: str, hashes: Sequence[str]) -> str:
    """The stored form: body, then the marker line (the marker alone when the body is blank)."""
    marker = fold_marker(hashes)
    return f"{body}\n{marker}" if body else marker


def find_fold_point(messages: Sequence[HistoryMessage], summary: str | None) -> int:
    """How many leading stored messages the summary already accounts for.

    The latest position whose preceding messages match the marker wins (all hashes, or as many as
    the list holds after the store dropped its oldest rows); a marker of fewer than 8 hashes can
    only sit that far from the start. Nothing matching -> 0: every folded message left the store,
    so all stored messages are new. Ambiguity needs a run of 8+ repeating messages; the latest
    match then counts content the summary already holds as folded, rather than folding it twice.
    """
    body, hashes = split_marker(summary)
    if not hashes:
        return _legacy_fold_point(messages, body)
    ids = [m.id for m in messages]
    # Fewer than 8 hashes: the fold reached the start of the list then, and the list only loses rows.
    highest = len(ids) if len(hashes) >= MAX_MARKER_HASHES else min(len(ids), len(hashes))
    for point in range(highest, 0, -1):
        if all(ids[point - 1 - j] == hashes[j] for j in range(min(point, len(hashes)))):
            return point
    return 0


def _legacy_fold_point(messages: Sequence[HistoryMessage], body: str) -> int:
    """A summary without a marker (older saves): probe for the stored message of its last bullet."""
    bullets = [line for line in body.splitlines() if line.startswith("- ")]
    if not bullets:
        return 0
    last = bullets[-1].rstrip()
    stem = _LEGACY_CLIP.sub("", last).rstrip()
    clipped = stem != last
    for point in range(len(messages), 0, -1):
        m = messages[point - 1]
        rendered = f"- {m.role.strip()}: {one_line(m.content)}"
        if rendered == last or (clipped and len(stem) >= 20 and rendered.startswith(stem)):
            return point
    return 0


def summary_lines(body: str) -> str:
    """An existing summary body as the first lines of a new one (its header not repeated)."""
    text = body.strip()
    if text.startswith(SUMMARY_HEADER):
        text = text[len(SUMMARY_HEADER) :].lstrip("\n").strip()
    return text


@dataclass(frozen=True)
class Bullet:
    """One folded message rendered as `- {role}: {content}` (content flattened and clipped)."""

    line: str
    chars_total: int
    chars_kept: int
    clipped: ClippedBullet | None


def render_bullet(message: HistoryMessage, limit: int = MAX_BULLET_CHARS) -> Bullet | None:
    """The bullet of a message, None for a blank one."""
    content = one_line(message.content)
    if not content:
        return None
    text, dropped = clip_marked(content, limit)
    total = utf16_len(content)
    clipped = ClippedBullet(message.id, total - dropped, dropped) if dropped else None
    return Bullet(f"- {message.role.strip()}: {text}", total, total - dropped, clipped)


@dataclass(frozen=True)
class FoldResult:
    """A deterministic fold: the new summary body (no marker) and its numbers."""

    body: str
    bullets: int
    clipped: tuple[ClippedBullet, ...]
    chars_total: int
    chars_kept: int

    @property
    def chars_dropped(self) -> int:
        """Content chars the bullet clipping removed."""
        return self.chars_total - self.chars_kept


def deterministic_fold(prior_body: str, messages: Sequence[HistoryMessage]) -> FoldResult:
    """`Previous conversation summary:`, the existing summary's lines, then one bullet per non-blank message."""
    lines = [SUMMARY_HEADER]
    existing = summary_lines(prior_body)
    if existing:
        lines.append(existing)
    bullets = [b for b in (render_bullet(m) for m in messages) if b is not None]
    lines.extend(b.line for b in bullets)
    return FoldResult(
        body="\n".join(lines),
        bullets=len(bullets),
        clipped=tuple(b.clipped for b in bullets if b.clipped is not None),
        chars_total=sum(b.chars_total for b in bullets),
        chars_kept=sum(b.chars_kept for b in bullets),
    )


@dataclass(frozen=True)
class SummaryCut:
    """A summary limited to a token budget: the newest suffix that fits, prefixed `…`."""

    text: str
    tokens: int
    tokens_dropped: int
    chars_dropped: int


def limit_summary_tokens(text: str, counter: TokenCounter, max_tokens: int) -> SummaryCut:
    """`text` if it fits `max_tokens`, else `…` + its newest suffix fitting one token short of the cap.

    One token short, so the cut summary (recounted next turn) is not cut again.
    """
    if not text:
        return SummaryCut("", 0, 0, 0)
    total = counter.count(text)
    if total <= max_tokens:
        return SummaryCut(text, total, 0, 0)
    target = max_tokens - 1

    def fits(start: int) -> bool:
        return counter.count(CLIP_ELLIPSIS + text[start:].lstrip()) <= target

    if target < 1 or not fits(len(text)):
        return SummaryCut("", 0, total, utf16_len(text))
    lo, hi = 0, len(text)  # hi always fits
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    kept = text[hi:].lstrip()
    cut = CLIP_ELLIPSIS + kept
    tokens = counter.count(cut)
    return SummaryCut(cut, tokens, max(0, total - tokens), utf16_len(text) - utf16_len(kept))
