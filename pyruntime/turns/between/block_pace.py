"""Whether a conversation's memory-last block moves before each player line or stays where it was sent.

The two placements of `memory_last.assemble_memory_last` trade recall for work between turns. Right
before the player's line, SmolLM2-135M answered 17 of the memory eval's 25 second questions of a session;
one exchange back, 10 (`bench/memory_eval.py`, docs/benchmarks.md#the-memory-block-moves-stays-auto).
But moving the block costs it and the last exchange again after every reply: the prewarm evaluates them
while the player reads, which takes milliseconds on a GPU and 1-2 s on a 2-core CPU, and a player who
answers sooner waits for that evaluation in the conversation's slot (TTFT p50 2-3x the naive game's).

So the block moves while the model keeps up with the player and stays once it does not: a turn that
starts while its conversation's prewarm is still being evaluated makes the block stay for that
conversation; `RECOVERY_TURNS` turns in a row that start more than `RECOVERY_FACTOR` times the last
block move's evaluation after the reply make it move again. Pure bookkeeping on the times it is given.

A switch takes effect on the turn after the one that decides it: a turn is placed as the prewarm before
it predicted (`next_stays`), so it finds its prefix evaluated. Placed by its own decision, the turn that
came during a prewarm of the moved block waited for that prewarm and then evaluated the block and the
exchanges after its old place again (161 tokens, 6x a 200-turn session's median, bench_npcs.py), and the
first turn that moved it again paid the same.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_CONVERSATIONS = 4096  # conversations whose pace is remembered (least recently seen dropped first)
RECOVERY_TURNS = 3
RECOVERY_FACTOR = 2.0


@dataclass
class _Pace:
    stays: bool = False
    slow_turns: int = 0  # turns in a row that left the model ample time (while the block stays)
    prewarms: int = 0  # prewarm requests of this conversation being evaluated now
    move_s: float | None = None  # how long the last prewarm that moved the block took
    reply_at: float | None = None  # when the last turn ended


class BlockPace:
    """Per conversation: does the memory-last block stay where it was sent (True) or move before each line.

    `fixed`: always that answer (`AiOrchestrator(memory_last_stays=True/False)`); None: by the player's pace.
    """

    def __init__(self, fixed: bool | None = None, limit: int = MAX_CONVERSATIONS) -> None:
        """No conversation seen yet; every one starts with the block that moves."""
        self.fixed = fixed
        self.limit = limit
        self._paces: OrderedDict[str, _Pace] = OrderedDict()
        self.turns_stayed = self.turns_moved = 0  # turns of the memory-last layout, by where their block went

    def forget(self, conversation: str) -> None:
        """Drop the conversation's pace (its saves are being erased)."""
        self._paces.pop(conversation, None)

    def _pace(self, conversation: str) -> _Pace:
        pace = self._paces.get(conversation)
        if pace is None:
            pace = self._paces[conversation] = _Pace()
            while len(self._paces) > self.limit:
                self._paces.popitem(last=False)
        self._paces.move_to_end(conversation)
        return pace

    def turn_started(self, conversation: str, now: float) -> bool:
        """A turn of `conversation` starts at `now`: whether its block stays, as the work before it predicted; what
        its pace decides now is the next turn's (see the module docstring)."""
        stays = self.next_stays(conversation)
        self._decide(conversation, now)
        if stays:
            self.turns_stayed += 1
        else:
            self.turns_moved += 1
        return stays

    def next_stays(self, conversation: str) -> bool:
        """Whether the block stays on the conversation's next turn, as its pace stands now (what a prewarm predicts)."""
        if self.fixed is not None:
            return self.fixed
        pace = self._paces.get(conversation)
        return pace is not None and pace.stays

    def _decide(self, conversation: str, now: float) -> None:
        if self.fixed is not None:
            return
        pace = self._pace(conversation)
        if pace.prewarms:  # the player came before the model had evaluated what the last reply left
            pace.stays, pace.slow_turns = True, 0
        elif pace.stays:
            ample = (pace.move_s is not None and pace.reply_at is not None
                     and now - pace.reply_at > RECOVERY_FACTOR * pace.move_s)
            pace.slow_turns = pace.slow_turns + 1 if ample else 0
            if pace.slow_turns >= RECOVERY_TURNS:
                pace.stays, pace.slow_turns = False, 0

    def turn_ended(self, conversation: str, now: float) -> None:
        """A turn of `conversation` ended at `now` (its reply is the player's to read)."""
        if self.fixed is None:
            self._pace(conversation).reply_at = now

    def prewarm_started(self, conversation: str) -> None:
        """A prewarm of `conversation` goes to the model."""
        if self.fixed is None:
            self._pace(conversation).prewarms += 1

    def prewarm_ended(self, conversation: str, seconds: float, *, moved_block: bool) -> None:
        """That prewarm is done after `seconds`; `moved_block`: it evaluated the block moved after the last reply."""
        if self.fixed is None:
            pace = self._pace(conversation)
            pace.prewarms = max(0, pace.prewarms - 1)
            if moved_block:
                pace.move_s = seconds
