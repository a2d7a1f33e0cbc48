"""Earlier sessions: the saved history a small model does not see.

A session is this runtime's lifetime for a conversation (a game's play session): the messages stored
before the runtime first served the conversation are its earlier sessions. SmolLM2-135M, asked in a
new session about what the player told it before, recalled 32 of the memory eval's 65 questions with
the earlier sessions' raw lines in its prompt, 37 with them left out and its memory last
(bench/recall_layouts.py, docs/benchmarks.md#recall-layouts): the lines pull it into continuing its own old
replies, and the memory already carries their facts. So for the memory-last layout (the writer
design's models) with memory on, the earlier sessions' verbatim messages are left out; a summary of
them stays; a role that asks for its whole history (`send_earlier_sessions=True`) gets it.

Pure, but `SessionStarts`, the bounded per-conversation record of where this session began.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import replace

from pyruntime.history.pipeline import PreparedHistory
from pyruntime.policy import RoleMemoryConfig

log = logging.getLogger("pyruntime.turns")

MAX_CONVERSATIONS = 4096  # conversations whose session start is remembered (an int each)


def leaves_out_earlier_sessions(config: RoleMemoryConfig, *, memory_last: bool) -> bool:
    """Whether a turn of this role leaves the earlier sessions' verbatim messages out of its prompt."""
    if config.send_earlier_sessions is not None:
        return not config.send_earlier_sessions
    return memory_last and config.use_memory_tool


def without_earlier_sessions(prepared: PreparedHistory, last_earlier_order: int) -> PreparedHistory:
    """`prepared` without the verbatim messages stored at or before `last_earlier_order` (reported in its cut report).

    A message without a store order (0: a legacy row) is from an earlier session too. Tool calls and
    their results share a session, so they are never separated.
    """
    earlier = [m for m in prepared.messages if m.order <= last_earlier_order]
    if not earlier:
        return prepared
    kept = [m for m in prepared.messages if m.order > last_earlier_order]
    report = replace(prepared.cut_report, sent_verbatim=len(kept),
                     earlier_session_ids=[*prepared.cut_report.earlier_session_ids, *(m.id for m in earlier)])
    log.info("history: %d stored message(s) of earlier sessions left out of the prompt (the memory carries them)",
             len(earlier))
    return replace(prepared, messages=kept, cut_report=report)


class SessionStarts:
    """Per conversation, the store order of its last message before this runtime first served it."""

    def __init__(self, capacity: int = MAX_CONVERSATIONS) -> None:
        """Empty; the least recently used conversations go first past `capacity`."""
        self._starts: OrderedDict[str, int] = OrderedDict()
        self._capacity = capacity

    def get(self, conversation: str) -> int | None:
        """The last earlier order, None when this session has not begun here yet."""
        order = self._starts.get(conversation)
        if order is not None:
            self._starts.move_to_end(conversation)
        return order

    def forget(self, conversation: str) -> None:
        """Drop where the conversation's session began (its saves are being erased)."""
        self._starts.pop(conversation, None)

    def begin(self, conversation: str, last_stored_order: int) -> int:
        """Record where the session began (the newest stored order now, 0 for none); returns it."""
        self._starts[conversation] = last_stored_order
        self._starts.move_to_end(conversation)
        while len(self._starts) > self._capacity:
            self._starts.popitem(last=False)
        return last_stored_order
