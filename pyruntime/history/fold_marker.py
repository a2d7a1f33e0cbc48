"""The hidden fold marker of a stored summary and the fold point found again from it.

A stored summary is `body + "\\n" + [fold:v2:o1:h1,o2:h2,…]`: the identities (store order and
content hash, newest first) of the last stored messages the summary accounts for, so the next turn
knows where folding stopped. The store's order is unique per key, so two equal messages (a repeated
greeting) can never be taken for each other; the hash guards against an order reused by a
different history (a session-only history after a restart). The marker is stripped before any
prompt use. Older saves carry `[fold:v1:h1,…]` (content hashes only) or no marker; both are still
read, and the first turn that finds their fold point rewrites the marker as v2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from pyruntime.history.messages import HistoryMessage, one_line

MAX_MARKER_HASHES = 8
MARKER_VERSION = 2
_HASH = "[0-9a-f]{12}"
_ANCHOR = rf"\d{{1,19}}:{_HASH}"
_MARKER_V2 = re.compile(rf"\[fold:v2:({_ANCHOR}(?:,{_ANCHOR}){{0,7}})\]")
_MARKER_V1 = re.compile(rf"\[fold:v1:({_HASH}(?:,{_HASH}){{0,7}})\]")
_LEGACY_CLIP = re.compile(r"(?:\.\.\.|…(?:\[\+\d+ chars\])?)$")


class Anchor(NamedTuple):
    """One folded message's identity: its store order (0 = unknown: match by content) and content hash."""

    order: int
    id: str

    def matches(self, message: HistoryMessage) -> bool:
        """Is `message` the one this anchor names (same content, and same order when both know it)?"""
        if self.order and message.order and self.order != message.order:
            return False
        return self.id == message.id


def anchor_of(message: HistoryMessage) -> Anchor:
    """The anchor naming `message`."""
    return Anchor(message.order, message.id)


def _parse_marker(line: str) -> tuple[int, tuple[Anchor, ...]] | None:
    match = _MARKER_V2.fullmatch(line)
    if match is not None:
        parts = (item.split(":") for item in match.group(1).split(","))
        return 2, tuple(Anchor(int(order), digest) for order, digest in parts)
    match = _MARKER_V1.fullmatch(line)
    if match is not None:
        return 1, tuple(Anchor(0, digest) for digest in match.group(1).split(","))
    return None


def split_marker_versioned(summary: str | None) -> tuple[str, tuple[Anchor, ...], int]:
    """(body, anchors newest first, marker version: 0 none, 1 content hashes, 2 order + hash)."""
    if not summary:
        return "", (), 0
    text = summary.rstrip()
    head, _, last = text.rpartition("\n")
    parsed = _parse_marker(last.strip())
    if parsed is None:
        return text, (), 0
    return head.rstrip(), parsed[1], parsed[0]


def split_marker(summary: str | None) -> tuple[str, tuple[Anchor, ...]]:
    """(body, anchors newest first) of a stored summary; no marker -> (summary, ())."""
    body, anchors, _ = split_marker_versioned(summary)
    return body, anchors


def strip_fold_marker(summary: str | None) -> str:
    """The summary as a prompt may show it: without the marker line."""
    return split_marker(summary)[0]


def fold_marker(anchors: Sequence[Anchor]) -> str:
    """The (v2) marker line of up to 8 anchors, newest first."""
    return "[fold:v2:" + ",".join(f"{a.order}:{a.id}" for a in anchors[:MAX_MARKER_HASHES]) + "]"


def marker_anchors(messages: Sequence[HistoryMessage], fold_point: int) -> list[Anchor]:
    """Anchors of the (up to 8) stored messages just before `fold_point`, newest first."""
    start = max(0, fold_point - MAX_MARKER_HASHES)
    return [anchor_of(messages[i]) for i in range(fold_point - 1, start - 1, -1)]


def with_marker(body: str, anchors: Sequence[Anchor]) -> str:
    """The stored form: body, then the marker line (the marker alone when the body is blank)."""
    marker = fold_marker(anchors)
    return f"{body}\n{marker}" if body else marker


def _chain_matches(messages: Sequence[HistoryMessage], point: int, anchors: Sequence[Anchor]) -> bool:
    """Do the messages before `point` match the anchors (as many as are still stored)?"""
    return all(anchors[j].matches(messages[point - 1 - j]) for j in range(min(point, len(anchors))))


def find_fold_point(messages: Sequence[HistoryMessage], summary: str | None) -> int:
    """How many leading stored messages the summary already accounts for.

    v2 marker whose newest anchor has an order: the stored message with that order (orders are unique
    per key), checked against the hash and the older anchors still stored. Not found, or not
    matching (the order belongs to another history): 0, every stored message is new. A trimmed-away
    anchor means every remaining message is newer, so 0 is right then too.

    Anchors without an order (v1 markers, legacy rows), or messages without one: content matching,
    which is ambiguous when 8+ messages repeat; the EARLIEST full match wins then, so a message is at worst folded
    twice, never lost.
    A marker of fewer than 8 anchors can only sit that far from the start (the list only loses rows).
    """
    body, anchors = split_marker(summary)
    if not anchors:
        return _legacy_fold_point(messages, body)
    newest = anchors[0]
    if newest.order > 0 and any(m.order for m in messages):
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].order == newest.order:
                return index + 1 if _chain_matches(messages, index + 1, anchors) else 0
        return 0
    if len(anchors) < MAX_MARKER_HASHES:
        # The fold reached the start of the list then: the point is at most len(anchors), the largest wins.
        for point in range(min(len(messages), len(anchors)), 0, -1):
            if _chain_matches(messages, point, anchors):
                return point
        return 0
    for point in range(MAX_MARKER_HASHES, len(messages) + 1):  # a full match: the earliest wins
        if _chain_matches(messages, point, anchors):
            return point
    # Only a partial match near the start: the store dropped the oldest folded rows.
    for point in range(min(len(messages), MAX_MARKER_HASHES - 1), 0, -1):
        if _chain_matches(messages, point, anchors):
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
