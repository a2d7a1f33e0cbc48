"""Slot affinity (pure): which of llama-server's parallel slots each conversation uses.

A conversation keeps its slot while it is warm, so its KV cache stays where its next turn finds it
(llama-server alone would pick a slot by prompt similarity, and NPCs sharing a persona prefix would
land in each other's slots). A conversation without a slot takes the least recently used idle one;
llama-server then moves that slot's previous conversation into its host prompt cache and loads the
newcomer's state from there, if it has one (`--cache-ram`): cold NPCs are what the cache holds, and
they are what it evicts first, never a live conversation's state.

A request that keeps less than half of what its conversation's slot holds (a compaction replaced
the head, a prewarm predicted a new one) supersedes that state: llama-server would copy it into the
host cache, where nothing would ever use it again. `SlotUse.erase_first` says to drop it instead.

A new head can also be evaluated beside the state it replaces (`acquire(..., beside=True)`, the prewarm of a
fold made between turns): in an empty slot, reserved for that conversation, while its own slot keeps the
previous head for a turn that comes first (it sends the previous head and finds it warm). The conversation
moves to the new slot only when such a request completes (`release(use, completed=True)`); the old slot is
then empty, and its dead state is erased before it is used again.

Conversations are named by a digest (`conversation_id`), never by their key: keys carry player ids.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ANONYMOUS = "anonymous"  # requests that name no conversation (memory writer, compaction) share one slot
SUPERSEDED_KEEP = 0.5  # llama-server's own rule: a new prompt that keeps less than half of a slot's state


def conversation_id(key: str) -> str:
    """A stable name for a conversation's storage key that does not reveal it (SHA-256, 64 hex digits; the same
    digest as the turn engine's `tail_anchors.conversation_digest`)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def prompt_fingerprint(messages: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, int], ...]:
    """Per message: a digest and its size in characters (what a slot's prompt is compared by)."""
    out = []
    for message in messages:
        text = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
        out.append((hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(), len(text)))
    return tuple(out)


def kept_fraction(old: Sequence[tuple[str, int]], new: Sequence[tuple[str, int]]) -> float:
    """How much of the `old` prompt (by size) the `new` one starts with, whole messages only."""
    total = sum(size for _, size in old)
    if total == 0:
        return 1.0
    kept = 0
    for (old_digest, size), (new_digest, _) in zip(old, new, strict=False):  # the shorter prompt ends it
        if old_digest != new_digest:
            break
        kept += size
    return kept / total


class NoSlotBeside(Exception):
    """A request asked to be evaluated beside its conversation's state, and it cannot be: no slot is empty, or the
    conversation holds no state that the request would replace. Nothing was sent; send it as usual."""


@dataclass(frozen=True)
class SlotUse:
    """One request's slot: send it as `id_slot`; `erase_first`: drop the slot's superseded state before."""

    slot: int
    conversation: str
    erase_first: bool = False


class SlotAffinity:
    """The slots of one llama-server process: who holds each, what it was last sent, what is in flight."""

    def __init__(self, slots: int) -> None:
        """`slots` empty slots."""
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self._clock = itertools.count(1)
        self._holder: list[str | None] = [None] * slots
        self._sent: list[tuple[tuple[str, int], ...]] = [()] * slots
        self._used: list[int] = [0] * slots
        self._in_flight: list[int] = [0] * slots
        self._next_of: list[str | None] = [None] * slots  # evaluates this conversation's next head (beside)
        self._dead: list[bool] = [False] * slots  # holds a state nobody will use (erase before reuse)

    def reset(self) -> None:
        """Every slot empty (the engine restarted)."""
        self.__init__(self.slots)  # type: ignore[misc]

    def acquire(self, conversation: str | None, messages: Sequence[Mapping[str, Any]], *,
                beside: bool = False) -> SlotUse:
        """The slot for a request of `conversation` (None: the anonymous one); call `release` when it ends.

        `beside`: a new head for the conversation's next turn, evaluated in an empty slot while its own keeps
        the previous head (`NoSlotBeside` when that cannot be; see the module docstring).
        """
        name = conversation or ANONYMOUS
        fingerprint = prompt_fingerprint(messages)
        own = self.slot_of(name)
        ahead = self.next_head_of(name)
        if beside:
            slot, erase = self._beside(name, own, ahead, fingerprint)
        elif own is not None and ahead is not None and self._in_flight[ahead] == 0 and \
                kept_fraction(self._sent[own], fingerprint) < SUPERSEDED_KEEP <= \
                kept_fraction(self._sent[ahead], fingerprint):
            slot, erase = ahead, False  # the new head, where it was evaluated beside: it moves there on completion
        else:
            slot, erase = self._own(name, own, fingerprint)
        self._sent[slot] = fingerprint
        self._used[slot] = next(self._clock)
        self._in_flight[slot] += 1
        return SlotUse(slot, name, erase)

    def _own(self, name: str, own: int | None, fingerprint: tuple[tuple[str, int], ...]) -> tuple[int, bool]:
        """The conversation's own slot (taking the coldest when it has none), and whether to erase it first."""
        if own is not None:
            return own, self._in_flight[own] == 0 and kept_fraction(self._sent[own], fingerprint) < SUPERSEDED_KEEP
        slot = self._coldest()
        erase = self._dead[slot] or self._next_of[slot] is not None  # a dead state, or another's unfinished head
        self._holder[slot], self._next_of[slot], self._dead[slot] = name, None, False
        return slot, erase

    def _beside(self, name: str, own: int | None, ahead: int | None,
                fingerprint: tuple[tuple[str, int], ...]) -> tuple[int, bool]:
        """The slot a new head of `name` is evaluated in beside its own, and whether to erase it first."""
        if own is None or kept_fraction(self._sent[own], fingerprint) >= SUPERSEDED_KEEP:
            raise NoSlotBeside("the conversation holds no state this request would replace")
        if ahead is not None:
            if self._in_flight[ahead]:
                raise NoSlotBeside("a new head of this conversation is being evaluated already")
            return ahead, kept_fraction(self._sent[ahead], fingerprint) < SUPERSEDED_KEEP
        empty = [s for s in range(self.slots) if self._holder[s] is None and self._next_of[s] is None
                 and self._in_flight[s] == 0]
        if not empty:
            raise NoSlotBeside("no slot is empty")
        slot = min(empty, key=lambda s: self._used[s])
        erase, self._dead[slot], self._next_of[slot] = self._dead[slot], False, name
        return slot, erase

    def release(self, use: SlotUse, *, completed: bool = False) -> None:
        """The request on `use.slot` ended; `completed`: it ran to its end (a new head evaluated beside is now
        the conversation's state, and the slot of the previous one is empty)."""
        self._in_flight[use.slot] = max(0, self._in_flight[use.slot] - 1)
        if completed and self._next_of[use.slot] == use.conversation:
            previous = self.slot_of(use.conversation)
            if previous is not None:
                self._holder[previous], self._sent[previous] = None, ()
                self._dead[previous] = True
            self._holder[use.slot], self._next_of[use.slot] = use.conversation, None

    def forget(self, slot: int) -> None:
        """The slot's state is gone (an error cleared it): the next request there starts it afresh."""
        self._holder[slot], self._next_of[slot], self._dead[slot] = None, None, False
        self._sent[slot] = ()

    def assign(self, conversation: str, slot: int) -> None:
        """`conversation`'s state is in `slot` (restored from disk at start)."""
        for other in range(self.slots):
            if self._holder[other] == conversation:
                self._holder[other] = None
        self._holder[slot], self._next_of[slot], self._dead[slot] = conversation, None, False
        self._sent[slot] = ()
        self._used[slot] = next(self._clock)

    def slot_of(self, conversation: str) -> int | None:
        """The slot `conversation` holds, or None."""
        for slot, holder in enumerate(self._holder):
            if holder == conversation:
                return slot
        return None

    def next_head_of(self, conversation: str) -> int | None:
        """The slot a new head of `conversation` is (or was being) evaluated in beside its own, or None."""
        for slot, name in enumerate(self._next_of):
            if name == conversation:
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

    def _coldest(self) -> int:
        """An empty slot, else the least recently used idle one, else the least recently used one (a slot with
        a new head evaluated beside counts as held)."""
        idle = [s for s in range(self.slots) if self._in_flight[s] == 0]
        pool = idle or list(range(self.slots))
        return min(pool, key=lambda s: (self._holder[s] is not None or self._next_of[s] is not None, self._used[s]))
