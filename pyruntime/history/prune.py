"""Pruning of the prompt copy of the history (contract §5); the stored messages are never changed."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyruntime.history.messages import HistoryMessage

MAX_TOOL_RESULT_MESSAGES = 3

# Closed blocks, plus an unclosed one that runs to the end (a reply cut off while reasoning).
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.IGNORECASE | re.DOTALL)


class PruneReason(enum.Enum):
    """Why a message left the prompt copy."""

    DUPLICATE = "exact duplicate"
    REASONING_ONLY = "reasoning-only turn"
    SUPERSEDED_TOOL_RESULT = "superseded tool result"
    OLD_TOOL_RESULT = "older tool result"
    TOOL_PARTNER_PRUNED = "tool call or result whose partner was pruned"


@dataclass(frozen=True)
class PrunedHistory:
    """The prompt copy: kept (index into the input, message as sent) and pruned (index, reason)."""

    kept: tuple[tuple[int, HistoryMessage], ...]
    pruned: tuple[tuple[int, PruneReason], ...]


def strip_think(content: str) -> str:
    """`content` without `<think>…</think>` blocks."""
    return _THINK.sub("", content).strip() if "<think" in content.lower() else content


def _entries(content: str) -> frozenset[str]:
    """The entries of a tool-result message: its non-blank lines, trimmed."""
    return frozenset(line.strip() for line in content.splitlines() if line.strip())


def prune_history(messages: Sequence[HistoryMessage]) -> PrunedHistory:
    """Apply the four pruning rules to a copy of `messages` (oldest first)."""
    pruned: dict[int, PruneReason] = {}

    # Exact consecutive duplicates (same role, trimmed content and call): the first one stays.
    for i in range(1, len(messages)):
        prev, cur = messages[i - 1], messages[i]
        if (
            cur.role.strip() == prev.role.strip()
            and cur.content.strip() == prev.content.strip()
            and cur.tool_call_id == prev.tool_call_id
        ):
            pruned[i] = PruneReason.DUPLICATE

    # Tool results (duplicates aside): superseded by a newer one that repeats every entry, then only the newest 3.
    results = [i for i, m in enumerate(messages) if m.is_tool_result and i not in pruned]
    entries = {i: _entries(messages[i].content) for i in results}
    for pos, i in enumerate(results):
        mine = entries[i]
        if mine and any(mine <= entries[j] for j in results[pos + 1 :]):
            pruned[i] = PruneReason.SUPERSEDED_TOOL_RESULT
    remaining = [i for i in results if i not in pruned]
    for i in remaining[:-MAX_TOOL_RESULT_MESSAGES]:
        pruned[i] = PruneReason.OLD_TOOL_RESULT

    # <think> stripped from every assistant turn but the newest; a reasoning-only one is dropped.
    assistants = [i for i, m in enumerate(messages) if m.is_assistant]
    newest_assistant = assistants[-1] if assistants else -1
    sent: dict[int, HistoryMessage] = {}
    for i in assistants:
        if i == newest_assistant or i in pruned:
            continue
        stripped = strip_think(messages[i].content)
        if stripped == messages[i].content:
            continue
        if not stripped and messages[i].tool_call_id is None:
            pruned[i] = PruneReason.REASONING_ONLY
        else:
            sent[i] = replace(messages[i], content=stripped)

    # Never separate a tool call from its result: a call id that lost all its calls or all its
    # results loses its remaining members too.
    for call_id in {m.tool_call_id for m in messages if m.tool_call_id is not None}:
        members = [i for i, m in enumerate(messages) if m.tool_call_id == call_id]
        results = [i for i in members if messages[i].is_tool_result]
        calls = [i for i in members if not messages[i].is_tool_result]
        lost = (results and all(i in pruned for i in results)) or (calls and all(i in pruned for i in calls))
        if lost:
            for i in members:
                pruned.setdefault(i, PruneReason.TOOL_PARTNER_PRUNED)

    kept = tuple((i, sent.get(i, m)) for i, m in enumerate(messages) if i not in pruned)
    return PrunedHistory(kept=kept, pruned=tuple(sorted(pruned.items())))
