"""Admission of turns: a bound on turns in flight, overall and per conversation, refused with RESOURCE_EXHAUSTED.

The model runs one generation at a time, so every admitted turn waits behind the others. Without a
bound, clients that fire and forget (200 turns seen) make a new turn wait minutes. The per-
conversation cap (a conversation = role + scope + actor, the storage key) keeps one busy NPC or
player from taking every place, so the others still get in.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from pyruntime.service.status import ServiceError, StatusCode

DEFAULT_MAX_TURNS = 16
DEFAULT_MAX_TURNS_PER_CONVERSATION = 4


class TurnAdmission:
    """Counts admitted turns; `admit(key)` refuses beyond `max_turns` overall or `max_per_key` for one key."""

    def __init__(self, max_turns: int = DEFAULT_MAX_TURNS,
                 max_per_key: int = DEFAULT_MAX_TURNS_PER_CONVERSATION) -> None:
        """Limits of at least 1; max_per_key above max_turns means no per-key limit."""
        if max_turns < 1 or max_per_key < 1:
            raise ValueError("turn limits must be at least 1")
        self.max_turns = max_turns
        self.max_per_key = max_per_key
        self._lock = threading.Lock()
        self._total = 0
        self._per_key: dict[str, int] = {}

    @property
    def in_flight(self) -> int:
        """Turns admitted and not finished."""
        return self._total

    @contextlib.contextmanager
    def admit(self, key: str) -> Iterator[None]:
        """Hold a place for one turn of key for the body; RESOURCE_EXHAUSTED when there is none."""
        with self._lock:
            if self._total >= self.max_turns:
                raise ServiceError(StatusCode.RESOURCE_EXHAUSTED,
                                   f"the runtime already has {self._total} turns in flight (limit {self.max_turns}); "
                                   "retry when one has finished")
            held = self._per_key.get(key, 0)
            if held >= self.max_per_key:
                raise ServiceError(StatusCode.RESOURCE_EXHAUSTED,
                                   f"this conversation already has {held} turns in flight "
                                   f"(limit {self.max_per_key}); wait for them before sending more")
            self._total += 1
            self._per_key[key] = held + 1
        try:
            yield
        finally:
            with self._lock:
                self._total -= 1
                left = self._per_key[key] - 1
                if left:
                    self._per_key[key] = left
                else:
                    del self._per_key[key]  # bounded by the turns in flight, never by players seen
