"""The work between turns (docs/design/compaction.md): after a reply, the next turn is prepared off the player's path.

Behind player turns in the model queue, and after this turn's writer pass (turns/writer/passes.py) on an engine of
one slot (beside it on several, and once more after the edit it made), the next turn's request for the same
conversation is predicted with the turn's own preparation
(`RequestPlanner.predict_prefix`); with compaction between turns, the fold that preparation makes is staged
for the next turn (turns/between/folds.py); with the prewarm, the predicted prefix is evaluated when it differs
from what llama.cpp holds (turns/between/prewarm.py). The next turn never waits for any of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from pyruntime.history.llm_fold import CompactionAbandoned
from pyruntime.history.tokens import count_message_tokens
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.model.client.seam import ModelClient
from pyruntime.turns.between.block_pace import BlockPace
from pyruntime.turns.between.folds import CompactionStats, StagedFolds
from pyruntime.turns.between.prewarm import (
    Prewarms,
    in_own_slot,
    needs_prewarm,
    prompt_cache_has_room,
    send_prewarm,
    worth_prewarming,
)
from pyruntime.turns.planning.planner import RequestPlanner
from pyruntime.turns.settings import TurnSettings
from pyruntime.turns.turn import RoundsOutcome, TurnInput, TurnOffer, TurnPlan
from pyruntime.turns.writer.passes import MemoryPassOutcome

log = logging.getLogger("pyruntime.turns")


@dataclass(eq=False)
class NextTurn:
    """Starts the work between turns after each completed turn; see the module docstring.

    Built with the engine's settings and the state it shares (prewarms, folds, recent conversations, pace).
    """

    client: ModelClient  # the prewarm's requests; `AiOrchestrator.client` keeps it current
    queue: ModelRequestQueue
    planner: RequestPlanner
    settings: TurnSettings
    _: KW_ONLY
    prewarms: Prewarms
    staged_folds: StagedFolds
    compaction_stats: CompactionStats
    prompt_cache_status: Callable[[], Mapping[str, object]] | None
    recent_conversations: deque[str]  # the conversations of the last turns, newest last
    block_pace: BlockPace  # told when the prewarms run and how long they take (turns/between/block_pace.py)

    def prepare(self, turn: TurnInput, offer: TurnOffer, plan: TurnPlan, outcome: RoundsOutcome,
                memory_pass: asyncio.Future[MemoryPassOutcome] | None) -> None:
        """Prepare the next turn behind player turns, after this turn's writer pass: make its fold (between turns),
        then evaluate its prefix (the prewarm); turns/between/folds.py, turns/between/prewarm.py. `plan`: the
        request this completed turn sent last, `outcome` what its rounds said and did."""
        settings = self.settings
        background = settings.background_compaction
        if not (settings.prewarm or background):
            return
        if not turn.config.with_chat_history or turn.borrowed_history:
            return  # no history (or a borrowed one that is not kept): the next prefix is this one's
        llm_fold = settings.llm_compaction_enabled and turn.config.use_llm_context_compaction
        if llm_fold and not background:
            # Predicting the head would take the compaction's own model call, and its summary is not
            # deterministic: the prewarm could not know what the next turn will send.
            return
        # Native tools: the server renders the schemas into the prompt its own way (no prewarm can match it).
        warm = settings.prewarm and not offer.tools_sent
        if not warm and not (background and self._fold_may_come(turn, plan, outcome)):
            return  # nothing to warm and no fold to make: preparing the next turn now would be thrown away
        conversation = turn.conversation
        sent = plan.messages

        async def work(still_due: Callable[[], bool]) -> int | None:
            if memory_pass is None or not self.pass_in_another_slot:
                displaced = False
                if memory_pass is not None:
                    # One slot: the pass's request replaces this turn's prompt in the engine's KV cache, and the
                    # prewarm's request would wait behind it anyway; this waits for its edit too.
                    await asyncio.wait({memory_pass})
                    displaced = _made_model_calls(memory_pass)
                return await attempt(still_due, displaced=displaced, stage=True)
            # Several slots: warm the next prefix with the memory as it is while the pass decides, then once
            # more after an edit it made (the changed memory block), unless that first attempt staged a fold.
            evaluated = await attempt(still_due, displaced=False, stage=True)
            await asyncio.wait({memory_pass})
            if folded or not _stored(memory_pass) or not still_due():
                return evaluated
            again = await attempt(still_due, displaced=False, stage=False)
            return again if evaluated is None else evaluated + (again or 0)

        folded = False  # the first attempt staged a fold: its head is what the next turn sends, warmed once

        async def attempt(still_due: Callable[[], bool], *, displaced: bool, stage: bool) -> int | None:
            nonlocal folded
            if not still_due():
                return None  # the next turn has started: the work after it prepares the one after
            # The next turn is placed as its pace stands now (block_pace.py), which may differ from this one's.
            stays = self.block_pace.next_stays(conversation) if turn.memory_stays is not None else None
            try:
                predicted = await self.planner.predict_prefix(turn, offer=offer, memory_stays=stays)
            except CompactionAbandoned:
                self.compaction_stats.lost += 1  # a player's call took the model: made again after the next turn
                return None
            prefix, prepared, memory_seen = predicted if predicted is not None else (None, None, 0)
            fold = self.staged_folds.stage(conversation, prepared, self.compaction_stats, memory_seen) \
                if background and stage else None
            folded = folded or fold is not None
            with self.staged_folds.readying(conversation, fold) as ready:
                if not warm or prefix is None:
                    return None
                if not still_due():
                    ready.cancel()  # not warmed: the turn that superseded it sends the previous head
                    return None
                if not needs_prewarm(prefix, sent, displaced=displaced):
                    return None
                # Asked only now: most turns are warm already, and the status is a request to the model server.
                recent = tuple(self.recent_conversations)
                if not in_own_slot(self.queue.capacity, recent, conversation) and \
                        not worth_prewarming(await self._prompt_cache_room(), recent, conversation):
                    return None  # no prewarm will come: the next turn evaluates the head
                evaluated = await self._timed_prewarm(conversation, prefix, still_due, ready.sent,
                                                      moved_block=stays is False)
                if evaluated is None:
                    ready.cancel()  # superseded while it waited for the model
                return evaluated

        self.prewarms.start(conversation, work)

    def _fold_may_come(self, turn: TurnInput, plan: TurnPlan, outcome: RoundsOutcome) -> bool:
        """Whether the next turn's history may reach its compaction trigger: unless this turn's was below it by more
        than twice what this turn adds to it (the next turn's budget may be a little smaller: a longer line, a grown
        memory block). A fold missed by a margin that was too small costs little: the next turn finds its history at
        the trigger, sends it whole while it fits, and its own work after the reply makes the fold."""
        headroom = plan.prepared.fold_headroom if plan.prepared is not None else None
        if headroom is None:
            return True
        added = [turn.request.hint, outcome.text]
        tokens = sum(count_message_tokens(self.planner.counter.counter, text) for text in added)
        messages = len(added) + len(outcome.rounds)
        return headroom.tokens <= 2 * tokens or (headroom.messages is not None and headroom.messages <= 2 * messages)

    async def _timed_prewarm(self, conversation: str, prefix: list[dict[str, Any]], still_due: Callable[[], bool],
                             on_sent: Callable[[], None], *, moved_block: bool) -> int | None:
        """`send_prewarm`, its time in the model told to the block pace (did the next line come before it ended?);
        `moved_block`: the prefix has the memory-last block moved before the next line."""
        started: list[float] = []

        def sent() -> None:
            started.append(time.monotonic())
            self.block_pace.prewarm_started(conversation)
            on_sent()

        try:
            return await send_prewarm(self.client, self.queue, prefix, still_due, on_sent=sent,
                                      conversation=conversation)
        finally:
            if started:
                self.block_pace.prewarm_ended(conversation, time.monotonic() - started[0],
                                              moved_block=moved_block)

    @property
    def pass_in_another_slot(self) -> bool:
        """Whether the writer pass and the prewarm run at once: an engine of several slots, two background calls.

        The pass then runs in a slot of its own (model/client/slots.py: requests that name no conversation share one),
        the conversation's slot keeps what this turn sent, and the prewarm goes out with the memory as it is
        rather than after the pass: a player who answers quickly finds the history and the memory block warm.
        An edit the pass makes later changes the memory block before the player's line (the memory-last layout)
        or comes as a note: the next turn evaluates that change, not the whole block and the last exchange again
        (docs/design/compaction.md#compaction-between-turns).
        """
        return self.queue.capacity > 1 and self.queue.background_capacity > 1

    async def _prompt_cache_room(self) -> bool | None:
        """`prewarm.prompt_cache_has_room` of the hosted server now; False when it cannot tell (no prewarm then)."""
        if self.prompt_cache_status is None:
            return None
        try:
            return prompt_cache_has_room(await asyncio.to_thread(self.prompt_cache_status))
        except Exception as exc:  # noqa: BLE001 - a status the server cannot give only skips a prewarm
            log.info("prewarm skipped: no prompt cache status (%s)", type(exc).__name__)
            return False


def _made_model_calls(memory_pass: asyncio.Future[MemoryPassOutcome]) -> bool:
    """Whether a finished writer pass sent a request (its prompt then replaced the conversation's in one slot)."""
    return not memory_pass.cancelled() and memory_pass.exception() is None and memory_pass.result().model_calls > 0


def _stored(memory_pass: asyncio.Future[MemoryPassOutcome]) -> bool:
    """Whether a finished writer pass changed the memory."""
    return not memory_pass.cancelled() and memory_pass.exception() is None and bool(memory_pass.result().stored)
