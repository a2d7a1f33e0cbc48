"""Slot affinity (pure): which of llama-server's parallel slots each conversation uses.

A conversation keeps its slot while it is warm, so its KV cache stays where its next turn finds it
(llama-server alone would pick a slot by prompt similarity, and NPCs sharing a persona prefix would
land in each other's slots). A conversation without a slot takes an empty one, else the least recently
used idle one. A slot's state is only ever used by the conversation that made it: when a slot changes
hands, its previous conversation's state is parked under that conversation's own name
(`SlotUse.park`, `parked_states.py`) and the newcomer gets its own parked state back (`SlotUse.restore`)
or starts the slot afresh, reusing nothing of what was there, even where the prompts are identical.
llama-server's own host cache, which hands any request the cached state its prompt starts like, is off.

A request that keeps less than half of what its conversation's slot holds (a compaction replaced
the head, a prewarm predicted a new one) supersedes that state: parking it would keep a state nothing
would use again. `SlotUse.erase_first` says to drop it instead.

Conversations are named by a digest (`conversation_id`), never by their key: keys carry player ids.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ANONYMOUS = "anonymous"  # requests that name no conversation (memory writer, compaction) share one slot
SUPERSEDED_KEEP = 0.5  # a new prompt that keeps less than half of a slot's state supersedes it


def conversation_id(key: str) -> str:
    """A stable name for a conversation's storage key that does not reveal it (SHA-256, 64 hex digits; the same
    digest as the turn engine's `tail_anchors.conversation_digest`)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def prompt_fingerprint(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Per message: its JSON text (what a slot's prompt is compared by, to the character)."""
    return tuple(json.dumps(message, sort_keys=True, ensure_ascii=False, default=str) for message in messages)


def kept_fraction(old: Sequence[str], new: Sequence[str]) -> float:
    """How much of the `old` prompt (in characters) the `new` one starts with.

    To the character, as llama-server keeps a slot's state up to the first token that differs: a fold that appends
    to the summary keeps the system prompt and the summary's start, most of the state (whole messages only, it
    kept the system prompt alone, and the runtime erased the state that a fold's prewarm would have reused).
    """
    total = sum(len(text) for text in old)
    if total == 0:
        return 1.0
    kept = 0
    for old_text, new_text in zip(old, new, strict=False):  # the shorter prompt ends it
        if old_text != new_text:
            kept += len(os.path.commonprefix((old_text, new_text)))
            break
        kept += len(old_text)
    return kept / total


@dataclass(frozen=True)
class SlotUse:
    """One request's slot, sent as `id_slot`, and what must happen to the slot before the request.

    `erase_first`: drop the slot's superseded state. `park`: the conversation whose state the slot held; save it
    under that conversation's name first. `arrived`: the request's conversation was not in this slot; then
    `restore` says to load its parked state, and without one the slot starts afresh (nothing in it is reused).
    """

    slot: int
    conversation: str
    erase_first: bool = False
    park: str | None = None
    arrived: bool = False
    restore: bool = False


class SlotAffinity:
    """The slots of one llama-server process: who holds each, what it was last sent, what is in flight."""

    def __init__(self, slots: int) -> None:
        """`slots` empty slots."""
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self._clock = itertools.count(1)
        self._holder: list[str | None] = [None] * slots
        self._sent: list[tuple[str, ...]] = [()] * slots
        self._used: list[int] = [0] * slots
        self._in_flight: list[int] = [0] * slots
        self._made_by: list[str | None] = [None] * slots  # whose request ran in each slot last (kept after errors)
        # Conversations whose state was parked when their slot changed hands -> what they last sent.
        self._parked: dict[str, tuple[str, ...]] = {}

    def reset(self) -> None:
        """Every slot empty and nothing parked (the engine restarted)."""
        self.__init__(self.slots)  # type: ignore[misc]

    def acquire(self, conversation: str | None, messages: Sequence[Mapping[str, Any]]) -> SlotUse | None:
        """The slot for a request of `conversation` (None: the anonymous one); call `release` when it ends.

        None when the conversation holds no slot and every slot is busy: a slot changes hands only while idle
        (its holder's state is saved first), so the caller waits for a `release` and asks again.
        """
        name = conversation or ANONYMOUS
        fingerprint = prompt_fingerprint(messages)
        slot = self.slot_of(name)
        if slot is None:
            slot = self._coldest()
            if slot is None:
                return None
            park = self._holder[slot]
            if park is not None:
                self._parked[park] = self._sent[slot]
            self._holder[slot] = name
            parked = self._parked.pop(name, None)
            restore = parked is not None and kept_fraction(parked, fingerprint) >= SUPERSEDED_KEEP
            use = SlotUse(slot, name, park=park, arrived=True, restore=restore)
        else:
            erase = self._in_flight[slot] == 0 and kept_fraction(self._sent[slot], fingerprint) < SUPERSEDED_KEEP
            use = SlotUse(slot, name, erase)
        self._sent[slot] = fingerprint
        self._made_by[slot] = name
        self._used[slot] = next(self._clock)
        self._in_flight[slot] += 1
        return use

    def release(self, use: SlotUse) -> None:
        """The request on `use.slot` ended."""
        self._in_flight[use.slot] = max(0, self._in_flight[use.slot] - 1)

    def forget(self, slot: int) -> None:
        """The slot's state is gone (an error cleared it): the next request there starts it afresh."""
        self._holder[slot] = None
        self._sent[slot] = ()

    def forget_conversation(self, conversation: str) -> list[int]:
        """`conversation`'s states are being erased: nothing of it is parked, and the slots to erase (the one it
        holds, and any whose last request was its) are returned, empty from now on."""
        self._parked.pop(conversation, None)
        slots = [s for s in range(self.slots) if conversation in (self._holder[s], self._made_by[s])]
        for slot in slots:
            self.forget(slot)
            self._made_by[slot] = None
        return slots

    def unpark(self, conversation: str) -> None:
        """`conversation`'s parked state is gone (evicted for room, or never saved): it comes back afresh."""
        self._parked.pop(conversation, None)

    def is_parked(self, conversation: str) -> bool:
        """Whether `conversation` has a state parked outside the slots."""
        return conversation in self._parked

    def assign(self, conversation: str, slot: int) -> None:
        """`conversation`'s state is in `slot` (restored from disk at start)."""
        self._parked.pop(conversation, None)
        for other in range(self.slots):
            if self._holder[other] == conversation:
                self._holder[other] = None
        self._holder[slot] = conversation
        self._sent[slot] = ()
        self._used[slot] = next(self._clock)

    def slot_of(self, conversation: str) -> int | None:
        """The slot `conversation` holds, or None."""
        for slot, holder in enumerate(self._holder):
            if holder == conversation:
                return slot
        return None

    def holders(self) -> dict[int, str]:
        """Slot -> the conversation it holds (slots that hold one)."""
        return {slot: holder for slot, holder in enumerate(self._holder) if holder is not None}

    def last_used(self, slot: int) -> int:
        """A counter value: larger is more recent (0: never used)."""
        return self._used[slot]

    @property
    def in_flight(self) -> int:
        """Requests running on any slot now."""
        return sum(self._in_flight)

    def _coldest(self) -> int | None:
        """An empty idle slot, else the least recently used idle one; None when every slot is busy."""
        idle = [s for s in range(self.slots) if self._in_flight[s] == 0]
        if not idle:
            return None
        return min(idle, key=lambda s: (self._holder[s] is not None, self._used[s]))
