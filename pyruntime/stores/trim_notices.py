"""Trims made visible: the event an append's trim makes, its log line, and the store's callback for it.

A row leaves a key's history when an append pushes it out of a window: a chat message past the newest
`chat_cap` chat messages, any row past the newest `transcript_cap` rows (contract §3.1), persisted and
session-only rows alike. Each append that does so makes one `TrimEvent` and one log line with the counts
and caps (never the key or any content). The store runs its callback for the event only after it let go
of the key's lock, so a callback may read or write the same key; events reach the callback in the order
the trims happened, each once, on the thread of the append that caused it (or of the one that is
delivering when it was queued).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrimEvent:
    """An append pushed rows out of a key's history windows."""

    key: str
    chat_dropped: int  # chat messages that left the chat window
    chat_kept: int  # chat messages in the window now
    chat_cap: int
    transcript_dropped: int  # rows (chat messages among them) that left the transcript window
    transcript_kept: int
    transcript_cap: int
    session_only: bool = False  # the append was persist=False (a session-only row did the pushing)


def trim_of_append(key: str, chat_before: int, rows_before: int, new_chat: int, new_rows: int, chat_cap: int,
                   transcript_cap: int, *, session_only: bool = False) -> TrimEvent | None:
    """The trim an append of new_rows (new_chat of them chat messages) makes, from the rows the history held
    before it (stale rows not yet compacted away included); None when nothing left a window."""
    chat_after, rows_after = chat_before + new_chat, rows_before + new_rows
    chat_dropped = max(0, chat_after - chat_cap) - max(0, chat_before - chat_cap)
    rows_dropped = max(0, rows_after - transcript_cap) - max(0, rows_before - transcript_cap)
    if chat_dropped <= 0 and rows_dropped <= 0:
        return None
    return TrimEvent(key, chat_dropped, min(chat_after, chat_cap), chat_cap, rows_dropped,
                     min(rows_after, transcript_cap), transcript_cap, session_only)


class TrimNotices:
    """One store's trims: logged when they happen, delivered to its callback once the key is unlocked."""

    def __init__(self, callback: Callable[[TrimEvent], None] | None) -> None:
        self._callback = callback
        self._queue: deque[TrimEvent] = deque()
        self._guard = threading.Lock()
        self._delivering = False

    def add(self, event: TrimEvent, *, first_for_key: bool) -> None:
        """Log a trim and queue its event (the caller holds the key's lock): a warning the first time a key is
        trimmed in this store, as the design note's cap warns once, then one info line per trim."""
        logger.log(
            logging.WARNING if first_for_key else logging.INFO,
            "History reached its cap: %d chat message(s) left the window of %d (%d kept), %d row(s) left the "
            "transcript window of %d (%d kept)%s",
            event.chat_dropped, event.chat_cap, event.chat_kept, event.transcript_dropped, event.transcript_cap,
            event.transcript_kept, "; a session-only append" if event.session_only else "",
        )
        if self._callback is not None:
            with self._guard:
                self._queue.append(event)

    def deliver(self) -> None:
        """Run the callback for every queued event, in order (the caller holds no key lock).

        Only one thread delivers at a time: a call while another delivers (or from inside the callback)
        leaves its events to that delivery, which runs until the queue is empty.
        """
        with self._guard:
            if self._delivering or not self._queue:
                return
            self._delivering = True
        try:
            while True:
                with self._guard:
                    if not self._queue:
                        self._delivering = False
                        return
                    event = self._queue.popleft()
                self._run(event)
        except BaseException:
            with self._guard:
                self._delivering = False
            raise

    def _run(self, event: TrimEvent) -> None:
        assert self._callback is not None
        try:
            self._callback(event)
        except Exception as exc:  # noqa: BLE001 - the game's callback must not fail the store or stop later events
            logger.warning("A history trim callback raised %s; the trim itself is done", type(exc).__name__)
