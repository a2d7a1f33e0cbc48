"""The deterministic fold and the summary's bounds: bullets of folded messages appended to the prior summary,
older lines condensed past the summary's limit, and the token limiter for the stored summary.

The hidden fold marker the summary ends with, and finding the fold point again from it, are `fold_marker.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pyruntime.history.cut_report import ClippedBullet
from pyruntime.history.messages import (
    CLIP_ELLIPSIS,
    HistoryMessage,
    clip_marked,
    one_line,
    utf16_len,
    utf16_prefix,
)
from pyruntime.history.tokens import TokenCounter, count_message_tokens

SUMMARY_HEADER = "Previous conversation summary:"
MAX_BULLET_CHARS = 280
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
    bullet_chars: int = MAX_BULLET_CHARS  # what the new bullets were clipped to (a player's line: twice that)
    condensed: Condensed | None = None  # older lines shortened or dropped to keep the summary within its bound

    @property
    def chars_dropped(self) -> int:
        """Content chars the bullet clipping removed."""
        return self.chars_total - self.chars_kept


@dataclass(frozen=True)
class SummaryShape:
    """How small a deterministic summary stays: a share of what it replaces, and a bound.

    `fold_share`: the bullets of one fold cost at most this share of the tokens their messages cost
    verbatim, so the summary is smaller than what it replaces (the longest lines are clipped first, an
    NPC's before the player's; none below `min_bullet_chars`). `limit_tokens`: a summary past it has its
    oldest lines condensed first (shortened in `condense_steps`, then dropped) down to `limit_tokens *
    target_ratio`, so the folds after it append again (their prefix stays cached) until it is reached again.
    """

    counter: TokenCounter
    fold_share: float = 0.5
    min_bullet_chars: int = 48
    limit_tokens: int = 0  # 0: no bound (the stored limit still cuts)
    target_ratio: float = 0.5
    condense_steps: tuple[int, ...] = (120, 48)


def deterministic_fold(prior_body: str, messages: Sequence[HistoryMessage],
                       shape: SummaryShape | None = None) -> FoldResult:
    """`Previous conversation summary:`, the existing summary's lines, then one bullet per non-blank message.

    With a `shape`, the new bullets are clipped to its share of what they replace and the summary is
    condensed, oldest lines first, when it passes its bound (see `SummaryShape`); without one, the
    design note's fold (each bullet clipped at 280 chars, nothing condensed).
    """
    existing = summary_lines(prior_body)
    cap = MAX_BULLET_CHARS
    bullets = [b for b in (render_bullet(m) for m in messages) if b is not None]
    if shape is not None and bullets:
        verbatim = sum(count_message_tokens(shape.counter, m.content) for m in messages if one_line(m.content))
        cap, bullets = _bullets_within(messages, shape, int(verbatim * shape.fold_share))
    lines = ([existing] if existing else []) + [b.line for b in bullets]
    condensed = None
    if shape is not None and shape.limit_tokens > 0:
        lines, condensed = condense_lines("\n".join(lines).splitlines(), shape, fresh=len(bullets))
    return FoldResult(
        body="\n".join([SUMMARY_HEADER, *lines]),
        bullets=len(bullets),
        clipped=tuple(b.clipped for b in bullets if b.clipped is not None),
        chars_total=sum(b.chars_total for b in bullets),
        chars_kept=sum(b.chars_kept for b in bullets),
        bullet_chars=cap if any(b.clipped is not None for b in bullets) else MAX_BULLET_CHARS,
        condensed=condensed,
    )


def _bullet_cap(message: HistoryMessage, cap: int) -> int:
    """A player's (or a tool's) line keeps twice an NPC's: what the player said is what a game must not lose."""
    return cap if message.is_assistant else min(MAX_BULLET_CHARS, 2 * cap)


def _bullets_within(
    messages: Sequence[HistoryMessage], shape: SummaryShape, allowance: int
) -> tuple[int, list[Bullet]]:
    """(cap, bullets): the largest cap whose bullets cost at most `allowance` tokens (`shape.min_bullet_chars` at
    least)."""

    whole = [render_bullet(m) for m in messages]

    def bullets_at(cap: int) -> list[Bullet]:
        out = []
        for message, full in zip(messages, whole, strict=True):
            if full is None:
                continue
            clipped = render_bullet(message, _bullet_cap(message, cap))
            # A clip whose marker costs what it saves keeps the line whole.
            out.append(clipped if clipped is not None and shape.counter.count(clipped.line) < shape.counter.count(
                full.line) else full)
        return out

    def cost(bullets: list[Bullet]) -> int:
        return sum(shape.counter.count(b.line) + 1 for b in bullets)  # + the newline

    widest = bullets_at(MAX_BULLET_CHARS)
    if cost(widest) <= allowance:
        return MAX_BULLET_CHARS, widest
    lo, hi = shape.min_bullet_chars, MAX_BULLET_CHARS - 1  # the answer is in [lo, hi]; lo if none fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(bullets_at(mid)) <= allowance:
            lo = mid
        else:
            hi = mid - 1
    return lo, bullets_at(lo)


_BULLET_LINE = re.compile(r"- ([^:\n]{1,64}): (.*)")
_CLIPPED_TAIL = re.compile(r"…\[\+(\d+) chars\]$")
_DROPPED_LINES = re.compile(r"…\[\+(\d+) earlier lines?\]")


@dataclass(frozen=True)
class Condensed:
    """What condensing a summary did: lines shortened, lines dropped, tokens before and after, chars removed."""

    shortened: int
    dropped: int
    tokens_before: int
    tokens_after: int
    chars_removed: int


def _shorten(line: str, cap: int) -> tuple[str, int] | None:
    """A line with its content clipped to `cap` chars (its earlier clip counted in), None if not longer.

    A bullet keeps its `- role: `; any other line (an earlier LLM summary's text) is clipped as a whole.
    """
    if _DROPPED_LINES.fullmatch(line):
        return None
    match = _BULLET_LINE.fullmatch(line)
    prefix, content = (f"- {match.group(1)}: ", match.group(2)) if match is not None else ("", line)
    earlier = 0
    tail = _CLIPPED_TAIL.search(content)
    if tail is not None:
        earlier = int(tail.group(1))
        content = content[: tail.start()]
    if utf16_len(content) <= cap:
        return None
    kept = utf16_prefix(content, cap).rstrip()
    removed = utf16_len(content) - utf16_len(kept)
    return f"{prefix}{kept}{CLIP_ELLIPSIS}[+{earlier + removed} chars]", removed


def condense_lines(lines: list[str], shape: SummaryShape, fresh: int = 0) -> tuple[list[str], Condensed | None]:
    """The summary lines (header excluded) within `shape.limit_tokens`: unchanged while they fit, else condensed,
    oldest lines first, to `limit_tokens * target_ratio`: the older lines shortened step by step, then dropped (a
    leading `…[+N earlier lines]` counts them); the `fresh` newest lines (this fold's) only when nothing older is
    left."""
    counter = shape.counter

    def total(ls: list[str]) -> int:
        return counter.count("\n".join([SUMMARY_HEADER, *ls]))

    before = total(lines)
    if before <= shape.limit_tokens:
        return lines, None
    target = max(1, int(shape.limit_tokens * min(1.0, max(0.0, shape.target_ratio))))
    lines = list(lines)
    dropped_before = 0
    if lines:
        earlier = _DROPPED_LINES.fullmatch(lines[0])
        if earlier is not None:
            dropped_before = int(earlier.group(1))
            lines = lines[1:]
    fresh = min(fresh, len(lines))
    costs = [counter.count(line) + 1 for line in lines]
    goal = target - counter.count(SUMMARY_HEADER) - counter.count(f"{CLIP_ELLIPSIS}[+{len(lines)} earlier lines]") - 1
    shortened = dropped = chars = 0

    def marked() -> list[str]:
        count = dropped + dropped_before
        if not count:
            return lines
        return [f"{CLIP_ELLIPSIS}[+{count} earlier line{'s' if count != 1 else ''}]", *lines]

    def over() -> bool:
        return sum(costs) > goal or total(marked()) > target  # the estimate first, then the exact count

    def shorten(end: int) -> None:
        nonlocal shortened, chars
        for cap in shape.condense_steps:
            for index in range(end):
                if sum(costs) <= goal:
                    return
                short = _shorten(lines[index], cap)
                if short is None:
                    continue
                cost = counter.count(short[0]) + 1
                if cost >= costs[index]:
                    continue  # its clip marker costs what it saves
                lines[index], removed = short
                costs[index] = cost
                shortened += 1
                chars += removed

    for protected in (fresh, 0):  # the older lines first; this fold's only when nothing older is left
        shorten(len(lines) - protected)
        while len(lines) > protected and over():
            chars += utf16_len(lines[0])
            costs.pop(0)
            lines.pop(0)
            dropped += 1
        if not over():
            break
    out = marked()
    return out, Condensed(shortened, dropped, before, total(out), chars)


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
