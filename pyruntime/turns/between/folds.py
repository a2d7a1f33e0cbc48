"""Compaction between turns: a conversation's next fold is made after the reply, off the player's path.

Folding inside a turn makes the player wait twice: for the summarizer's call (an LLM fold), and for the
model to evaluate the new head (summary and everything after it, 400-1,300 tokens, seconds on a CPU). So,
after a reply, the work between turns (`NextTurn.prepare` in turns/between/next_turn.py, run by `prewarm.Prewarms`
behind player turns in the model queue) prepares the next turn's history as that turn would: when it
reaches the trigger, that preparation makes the fold (the LLM call is background work a player's call
pre-empts); the fold is kept here (`StagedFolds`), not stored; then the next turn's prefix with the new
head is evaluated (the prewarm), and the fold is marked ready.

The next turn sends a ready fold as it was made (`CompactionTiming.BETWEEN_TURNS` in the history pipeline):
the turn reports it in its cut report and stores it once it succeeded, as a fold made in the turn (contract §5:
exactly once, persisted after the turn that sent it). A turn that comes before its fold is ready sends the
previous head while the history still fits its budget; past that it folds deterministically itself. A fold
that lost its race (its summarizer call pre-empted by a player's call, its messages or summary changed
meanwhile) is dropped whole and made again after the next turn: nothing of it is ever applied in part.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyruntime.history import CompactionRequestOptions, CutReport, Fold, PreparedHistory
from pyruntime.history.llm_fold import CompactionAbandoned
from pyruntime.model.client.queue import ModelRequestQueue, Preempted, Priority
from pyruntime.model.client.seam import ModelClient
from pyruntime.model.client.types import ChatCompletionAccumulator

MAX_STAGED_FOLDS = 1024  # conversations with a fold waiting for their next turn (a summary's size each)


@dataclass
class StagedFold:
    """A fold made between turns for a conversation's next turn.

    `ready` once its head was evaluated (or will not be).
    """

    fold: Fold
    ready: bool = False
    memory_version: int = 0  # the memory its head was prepared (and warmed) with: a later edit is a note after it


class StagedFolds:
    """The fold waiting for each conversation's next turn (bounded: the least recently used go first)."""

    def __init__(self, limit: int = MAX_STAGED_FOLDS) -> None:
        """None yet; at most `limit` kept."""
        self.limit = limit
        self._entries: OrderedDict[str, StagedFold] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, conversation: str) -> StagedFold | None:
        """The fold waiting for `conversation`'s next turn, if any."""
        return self._entries.get(conversation)

    def put(self, conversation: str, fold: Fold) -> StagedFold:
        """Keep `fold` for `conversation`'s next turn (not ready yet), replacing an older one."""
        entry = self._entries.get(conversation)
        if entry is not None and entry.fold is fold:
            return entry
        entry = self._entries[conversation] = StagedFold(fold)
        self._entries.move_to_end(conversation)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return entry

    def mark_ready(self, conversation: str, fold: Fold) -> None:
        """`fold` may be sent now (its head is warm, or no prewarm will come)."""
        entry = self._entries.get(conversation)
        if entry is not None and entry.fold is fold:
            entry.ready = True

    def stage(self, conversation: str, prepared: PreparedHistory | None, stats: CompactionStats,
              memory_version: int = 0) -> Fold | None:
        """Keep the fold the next turn's preparation made (or adopted again) for that turn, its head planned with
        memory version `memory_version`; without one, drop the conversation's old fold (it no longer applies:
        its messages or summary changed)."""
        fold = prepared.fold if prepared is not None else None
        if fold is None:
            self.discard(conversation)
            return None
        entry = self._entries.get(conversation)
        if entry is None or entry.fold is not fold:
            entry = self.put(conversation, fold)
            stats.folded += 1
        entry.memory_version = memory_version
        return fold

    @contextlib.contextmanager
    def readying(self, conversation: str, fold: Fold | None) -> Iterator[_Readying]:
        """Within it the fold's head is warmed (or not, by decision); on leaving, the fold is ready unless
        the body said otherwise (`cancel()`) or a player's call pre-empted its prewarm before it went out
        (`Preempted` before `sent()`): then a turn sends the previous head until a later prewarm warms it.
        It is ready as soon as its prewarm goes out (`sent()`): the model server then holds or is evaluating
        the new head, pre-empted or not (one that cannot stop a prompt's evaluation finishes it, and its
        single KV sequence holds the new head, no longer the old). A failure makes it ready too (no warming
        will come)."""
        readying = _Readying(lambda: self.mark_ready(conversation, fold) if fold is not None else None)
        try:
            yield readying
        except Preempted:
            raise
        except BaseException:
            if fold is not None:
                self.mark_ready(conversation, fold)
            raise
        if fold is not None and not readying.cancelled:
            self.mark_ready(conversation, fold)

    def forget(self, conversation: str) -> None:
        """Drop whatever is kept for `conversation` (its saves are being erased)."""
        self._entries.pop(conversation, None)

    def discard(self, conversation: str, fold: Fold | None = None) -> None:
        """Drop `conversation`'s fold (only if it is `fold`, when given): sent and stored, or no longer valid."""
        entry = self._entries.get(conversation)
        if entry is not None and (fold is None or entry.fold is fold):
            del self._entries[conversation]


class _Readying:
    def __init__(self, ready: Callable[[], None]) -> None:
        self._ready = ready
        self.cancelled = False

    def cancel(self) -> None:
        """The fold is not warm: leave it not ready."""
        self.cancelled = True

    def sent(self) -> None:
        """Its prewarm went out to the model server: the fold is ready now."""
        self._ready()


async def preemptible_compaction(client: ModelClient, queue: ModelRequestQueue, messages: list[dict[str, str]],
                                 options: CompactionRequestOptions) -> str:
    """The summarizer call between turns, behind player turns and pre-empted by them: streamed, so a player's
    call closes it (which stops the generation); the fold is then given up whole (`CompactionAbandoned`)."""
    accumulator = ChatCompletionAccumulator()
    try:
        async with queue.slot(Priority.BACKGROUND, preemptible=True):
            async with client.stream_chat(messages, temperature=options.temperature,
                                          max_tokens=options.max_output_tokens) as stream:
                async for delta in stream:
                    accumulator.add(delta)
    except Preempted as exc:
        raise CompactionAbandoned("a player's call took the model") from exc
    return accumulator.result().text


@dataclass
class CompactionStats:
    """What compaction between turns did since start (counts only)."""

    folded: int = 0  # folds made between turns
    sent: int = 0  # turns that sent a fold made between turns
    deferred: int = 0  # turns at their trigger that sent the previous head while their fold was prepared
    in_turn: int = 0  # folds a turn made itself (the history no longer fit without one)
    lost: int = 0  # folds dropped before they were sent (a player's call pre-empted the summarizer)

    def count_turn(self, report: CutReport | None) -> None:
        """Count what a finished turn's history did."""
        if report is None:
            return
        if report.folded_between_turns:
            self.sent += 1
        elif report.compaction_deferred:
            self.deferred += 1
        elif report.compaction:
            self.in_turn += 1
