"""Planning and fitting the request of one attempt of a turn (contract §5, §7; docs/contract.md).

An attempt's request is the system prompt, the history (prepared by the history pipeline: windowed, pruned,
folded), the tail blocks (request instructions, memory snapshot and notes, tool availability, world state) and
the player's line. `RequestPlanner.draft` plans the memory blocks from the stored state (storing a new snapshot
when it changes) and prepares the history for the room the fixed parts leave (a `RequestDraft`); `as_sent`
renders the request with the tail and the memory notes where this conversation's last request had them
(turns/planning/tail_anchors.py), preparing the history again, with less room, while the rendered whole overflows
the context, and returns the `TurnPlan`. Both take values (the `TurnInput`, the `TurnOffer`, the attempt's
overflow retries) and return values; what the planner keeps is its own: where each conversation's tail was sent.
The pure parts are elsewhere: the arithmetic in context.py, the counting in counting.py, the rendering in
prompt.py, the blocks in memory_blocks.py.

The work between turns predicts the next turn's request with this same preparation (`predict_prefix`), so
the prediction cannot drift from what the turn sends (turns/between/prewarm.py, turns/between/next_turn.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pyruntime.errors import MemoryUnreadableError
from pyruntime.history import (
    CompactionKind,
    CompactionRequestOptions,
    CompactionTiming,
    PreparedHistory,
    prepare_scoped_turn_history,
)
from pyruntime.history.cut_report import predicting
from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.client.queue import ModelRequestQueue, Priority
from pyruntime.model.client.seam import ModelClient
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores.base import LoadStatus
from pyruntime.turns.between.folds import StagedFolds, preemptible_compaction
from pyruntime.turns.planning.context import (
    FixedPartOverflowError,
    RequestFit,
    effective_context,
    fit_history,
    fit_request,
    fixed_parts,
    history_budget,
    overflow_error,
    summary_block_overhead,
)
from pyruntime.turns.planning.counting import RequestTokens
from pyruntime.turns.planning.memory_blocks import MemoryBlocks, NoteFold, plan_memory_blocks
from pyruntime.turns.planning.memory_last import (
    anchors_of_the_block_that_moves,
    assemble_memory_last,
    place_memory_with_tail,
)
from pyruntime.turns.planning.prompt import Placement, PromptAnchors, TailBlocks, place_notes, place_tail, tail_text_of
from pyruntime.turns.planning.sessions import SessionStarts, leaves_out_earlier_sessions, without_earlier_sessions
from pyruntime.turns.planning.tail_anchors import TailAnchors
from pyruntime.turns.settings import TurnSettings
from pyruntime.turns.turn import TurnInput, TurnOffer, TurnPlan

log = logging.getLogger("pyruntime.turns")

# (turn, system prompt, how the notes fold, the memory version the head's fold was evaluated with) -> the blocks
PlanBlocks = Callable[[TurnInput, str, NoteFold, int], Awaitable[MemoryBlocks]]


@dataclass(frozen=True)
class RequestDraft:
    """An attempt's request before it is rendered: its tail blocks, the context they leave, the history prepared."""

    tail: TailBlocks
    fit: RequestFit
    prepared: PreparedHistory | None  # None: a role without chat history


class Prediction(NamedTuple):
    """The next turn's request but the player's line, its history, and the memory version it was planned with."""

    prefix: list[dict[str, Any]]
    prepared: PreparedHistory | None
    memory_version: int


class PeekedMemory:
    """`PlanBlocks` for a prediction: the stored state read once, a new snapshot kept here, never stored."""

    def __init__(self, sent_memory: Callable[[TurnInput], tuple[int, tuple[int, ...]]]) -> None:
        """`sent_memory`: the memory versions the conversation's last request carried (`RequestPlanner`'s)."""
        self._sent_memory = sent_memory
        self._states: list[AgentMemoryState | None] = []
        self.seen = 0  # the memory version the blocks were planned with

    async def __call__(self, turn: TurnInput, system_prompt: str, fold: NoteFold, fold_up_to: int) -> MemoryBlocks:
        """The blocks of `turn` from the state as first read (a prediction folds nothing into a head it made)."""
        if not turn.config.use_memory_tool:
            return plan_memory_blocks(None)
        if not self._states:
            loaded = await asyncio.to_thread(turn.store.try_load, turn.role_id)
            self._states.append(loaded.state if loaded.status is LoadStatus.LOADED
                                else AgentMemoryState() if loaded.status is LoadStatus.NOT_FOUND else None)
        state = self._states[0]
        if state is None:  # unreadable: the turn runs without the memory blocks
            return plan_memory_blocks(None)
        self.seen = state.latest_version
        head_version, sent = self._sent_memory(turn)
        blocks = plan_memory_blocks(state, fold=fold, head_version=head_version, sent_notes=sent)
        self._states[0] = _with_snapshot(state, blocks)
        return blocks


@dataclass(eq=False)
class RequestPlanner:
    """Plans, renders and fits the requests of turns against one model's context; see the module docstring.

    Built with the engine's settings and the state it keeps between turns (staged folds, session starts, anchors).
    """

    client: ModelClient  # the compaction's model calls; `AiOrchestrator.client` keeps it current
    queue: ModelRequestQueue
    counter: RequestTokens
    settings: TurnSettings
    _: dataclasses.KW_ONLY
    staged_folds: StagedFolds
    session_starts: SessionStarts
    anchors: TailAnchors
    # (role, model) context sizes already warned about
    _context_warnings: set[tuple[int, int]] = dataclasses.field(default_factory=set, init=False, repr=False)

    async def draft(self, turn: TurnInput, offer: TurnOffer, *, overflow_retries: int,
                    plan_blocks: PlanBlocks | None = None) -> RequestDraft:
        """The tail blocks, the request's fit and the history of one attempt (a retry consolidates the memory).

        Shared by the turn and the prewarm's prediction of the next one (which plans the memory
        blocks without storing them), so the prediction prepares exactly what the turn would.
        """
        plan = plan_blocks or self.memory_blocks
        request, config = turn.request, turn.config
        head_version = 0  # the memory version the head of the fold it sends was evaluated with (0: now)

        async def tail_of(fold: NoteFold) -> TailBlocks:
            blocks = await plan(turn, offer.system_prompt, fold, head_version)
            return TailBlocks(request.request_system_instructions, blocks.snapshot_block, blocks.updates_block,
                              offer.availability, request.world_state, blocks.folded, blocks.notes)

        # Memory-last sends the whole memory: the snapshot is all of it.
        whole = overflow_retries > 0 or self.settings.memory_last
        tail = await tail_of(NoteFold.INTO_SNAPSHOT if whole else NoteFold.KEEP)
        fit = self._fit(turn, offer, tail)
        prepared = None
        if config.with_chat_history:
            prepared = await self._history(turn, offer, fit, overflow_retries)
            if prepared.cut_report.compaction is not CompactionKind.NONE and not whole:
                # A compaction rewrites everything after the summary anyway: the memory notes fold into one
                # block there (where the notes' messages went), the snapshot before the summary stays. A fold
                # made between turns folds the memory its head was evaluated with; a later edit is a note.
                staged = self.staged_folds.get(turn.conversation)
                if not turn.predicted and staged is not None and staged.fold is prepared.fold:
                    head_version = staged.memory_version
                tail = await tail_of(NoteFold.INTO_HEAD)
                fit = self._fit(turn, offer, tail)
        return RequestDraft(tail, fit, prepared)

    async def as_sent(self, turn: TurnInput, offer: TurnOffer, draft: RequestDraft, *,
                      overflow_retries: int) -> TurnPlan:
        """The request as sent, its history prepared again with less room while the rendered whole overflows; a
        turn's (not a prediction's) tail and notes are kept where they went, for the conversation's next request."""
        fit, tail = draft.fit, draft.tail
        prepared, messages = await fit_history(
            fit, draft.prepared,
            prepare=lambda extra: self._history(turn, offer, fit, overflow_retries, extra),
            render=lambda p: self._assemble(turn, offer.system_prompt, tail, prepared=p),
            count=lambda sent: self.counter.request(turn.role_id, sent, offer.tools_sent),
            overflow=lambda: self._overflow(turn, offer, fit, tail),
        )
        if prepared is None:
            prepared = draft.prepared
        if not turn.predicted and prepared is not None:
            # Bounded: the least recently used conversations go first.
            self.anchors.keep(turn.conversation, self._places(turn, tail, prepared).kept)
        return TurnPlan(messages, tail, fit, prepared, self.context_tokens(turn.config))

    async def memory_blocks(self, turn: TurnInput, system_prompt: str, fold: NoteFold, fold_up_to: int
                            ) -> MemoryBlocks:
        """Plan the memory blocks from the stored state, storing a new snapshot atomically when it changes."""
        if not turn.config.use_memory_tool:
            return plan_memory_blocks(None)
        planned: list[MemoryBlocks] = []
        head_version, sent = self._sent_memory(turn)

        def change(state: AgentMemoryState) -> AgentMemoryState | None:
            blocks = plan_memory_blocks(state, fold=fold, head_version=head_version, sent_notes=sent,
                                        fold_up_to=fold_up_to if fold is NoteFold.INTO_HEAD else 0)
            planned.append(blocks)
            updated = _with_snapshot(state, blocks)
            if updated != AgentMemoryState() and updated.last_system_prompt != system_prompt:
                updated = updated.evolve(last_system_prompt=system_prompt)
            return None if updated == state else updated

        try:
            await asyncio.to_thread(_mutate_if_changed, turn, change)
        except MemoryUnreadableError:
            log.warning("memory document is unreadable: the turn runs without the memory blocks")
            return plan_memory_blocks(None)
        return planned[-1]

    def _assemble(self, turn: TurnInput, system_prompt: str, tail: TailBlocks, *,
                  prepared: PreparedHistory | None = None) -> list[dict[str, Any]]:
        places = self._places(turn, tail, prepared) if prepared else None
        # Memory-last: where the block goes is the turn's (turns/between/block_pace.py).
        stays = {"memory_with_tail": bool(turn.memory_stays)} if self.settings.memory_last else {}
        assemble = assemble_memory_last if self.settings.memory_last else self.settings.assemble
        return assemble(
            **stays,
            system_prompt=system_prompt,
            summary=prepared.summary_text if prepared else "",
            history=prepared.messages if prepared else (),
            tail=places.tail if places else tail,
            user_payload=turn.request.hint,
            system_messages_after_first=self.settings.system_messages_after_first,
            tail_after=places.tail_after if places else None,
            notes_after=places.notes_after if places else None,
        )

    def _sent_memory(self, turn: TurnInput) -> tuple[int, tuple[int, ...]]:
        """The memory versions of the head's folded block and of the notes this conversation's last request carried."""
        anchors = self.anchors.get(turn.conversation)
        if anchors is None:
            return 0, ()
        return anchors.head_version, tuple(note.version for note in anchors.notes)

    def _places(self, turn: TurnInput, tail: TailBlocks, prepared: PreparedHistory) -> Placement:
        """Where the tail and the memory notes go in this request, and the anchors to keep for the next."""
        anchors = self.anchors.get(turn.conversation)
        compacted = prepared.cut_report.compaction is not CompactionKind.NONE
        memory_last = self.settings.memory_last
        if memory_last and turn.memory_stays:
            return place_memory_with_tail(anchors, tail, tail_text_of(tail), prepared.messages,
                                          compacted=compacted)
        tail_after, tail_anchor = place_tail(anchors.tail if anchors else None, tail_text_of(tail), prepared.messages,
                                             compacted=compacted)
        if memory_last:  # the block moves: it goes last, kept as where it went for a turn whose block stays
            return Placement(tail, tail_after, (),
                             anchors_of_the_block_that_moves(tail_anchor, tail.memory, prepared.messages))
        notes_after, note_anchors = place_notes(anchors.notes if anchors else (), tail.memory_notes,
                                                prepared.messages)
        kept = PromptAnchors(tail_anchor, note_anchors, tail.memory_folded.version if tail.memory_folded else 0)
        return Placement(tail, tail_after, notes_after, kept)

    def _fit(self, turn: TurnInput, offer: TurnOffer, tail: TailBlocks) -> RequestFit:
        """The context of this request; a fixed part that leaves no room fails the turn now (no retry helps)."""
        max_ctx = self.context_tokens(turn.config)
        fixed = self.counter.request(turn.role_id, self._assemble(turn, offer.system_prompt, tail), offer.tools_sent)
        fit = fit_request(max_ctx, offer.max_tokens(turn), fixed, summary_block_overhead(self.counter.counter))
        if fit.room < 0:
            raise self._overflow(turn, offer, fit, tail)
        return fit

    def context_tokens(self, config: RoleMemoryConfig) -> int:
        """The context a request of a role may fill: the model's, or the role's when smaller (warned once)."""
        return effective_context(self.settings.model_context_tokens, config.context_tokens, self._context_warnings)

    def _overflow(self, turn: TurnInput, offer: TurnOffer, fit: RequestFit, tail: TailBlocks
                  ) -> FixedPartOverflowError:
        counter = self.counter
        tools = offer.tools_sent
        tail_text = "\n\n".join(tail.render())
        error = overflow_error(fit, fixed_parts(
            counter.fixed(turn.role_id, "system", offer.system_prompt),
            counter.fixed(turn.role_id, "tools", json.dumps(tools)) if tools else 0,
            counter.counter.count(tail_text) if tail_text else 0,
            counter.counter.count(turn.request.hint) if turn.request.hint else 0,
        ))
        log.warning("turn refused: %s", error)  # numbers and part names only
        return error

    async def _history(self, turn: TurnInput, offer: TurnOffer, fit: RequestFit, overflow_retries: int,
                       extra_tokens: int = 0) -> PreparedHistory:
        config, settings = turn.config, self.settings
        # Everything but the history, as rendered (template, tail blocks, payload, native tool schemas).
        budget = history_budget(fit, offer.max_tokens(turn), extra_tokens, overflow_retries)
        background = settings.background_compaction
        staged = self.staged_folds.get(turn.conversation) if background else None
        between = background and not turn.predicted
        prepared = await prepare_scoped_turn_history(
            turn.store,
            turn.role_id,
            config=config,
            counter=self.counter.counter,
            budget=budget,
            compact=functools.partial(preemptible_compaction, self.client, self.queue)
            if turn.predicted and background else self._compact,
            # A turn sends the fold made after the last reply once it is warm; the preparation between turns makes it.
            timing=CompactionTiming.BETWEEN_TURNS if between else CompactionTiming.IN_TURN,
            staged=staged.fold if staged is not None else None,
            staged_ready=staged.ready if staged is not None and between else True,
            llm_compaction_enabled=settings.llm_compaction_enabled,
            llm_options=settings.llm_compaction_options,
            # A borrowed (chat-source) history is short-term: it must not leave a summary behind.
            summarize=not turn.borrowed_history,
            compaction_target_ratio=settings.compaction_target_ratio,
        )
        if turn.borrowed_history or not leaves_out_earlier_sessions(config, memory_last=settings.memory_last):
            return prepared
        return without_earlier_sessions(prepared, await self._session_start(turn))

    async def _session_start(self, turn: TurnInput) -> int:
        """The store order of the conversation's last message before this runtime first served it (turns/sessions)."""
        start = self.session_starts.get(turn.conversation)
        if start is None:
            newest = await asyncio.to_thread(turn.store.get_chat_history, turn.role_id, 1)
            start = self.session_starts.begin(turn.conversation, newest[-1].order if newest else 0)
        return start

    async def _compact(self, messages: list[dict[str, str]], options: CompactionRequestOptions) -> str:
        """The auxiliary compaction completion: no tools, behind player turns in the queue."""
        async with self.queue.slot(Priority.BACKGROUND):
            completion = await self.client.chat(
                messages, temperature=options.temperature, max_tokens=options.max_output_tokens
            )
        return completion.text

    async def predict_prefix(self, turn: TurnInput, *, offer: TurnOffer, memory_stays: bool | None
                             ) -> Prediction | None:
        """The next turn's request but the player's line, and its history, as it would prepare them now; stores
        nothing (with compaction between turns, the fold it makes is the next turn's: see turns/between/next_turn.py).
        `memory_stays`: the next turn's memory-last placement (between/block_pace.py; None: no memory-last layout).

        The next player line is not known: this turn's stands in for it (its length enters the
        history budget), and this request's tail blocks and tools stand in for the next one's.
        """
        ghost = dataclasses.replace(turn, predicted=True, memory_stays=memory_stays)
        peeked = PeekedMemory(self._sent_memory)
        with predicting():
            try:
                draft = await self.draft(ghost, offer, overflow_retries=0, plan_blocks=peeked)
                # Rendered with the tail where the turn would put it (`place_tail`, the anchor this turn kept).
                plan = await self.as_sent(ghost, offer, draft, overflow_retries=0)
            except FixedPartOverflowError:
                return None
        return Prediction(plan.messages[:-1] if turn.request.hint else plan.messages, plan.prepared, peeked.seen)


def _mutate_if_changed(turn: TurnInput, change: Callable[[AgentMemoryState], AgentMemoryState | None]) -> None:
    """`change` applied to the stored state: read first, and only a state it changes is written, atomically (a
    read-modify-write under the save's locks, the inter-process one included). Most turns change nothing (the
    snapshot and the system prompt are the ones stored), and a read takes no inter-process lock."""
    loaded = turn.store.try_load(turn.role_id)
    if loaded.status is LoadStatus.LOADED and loaded.state is not None:
        current = loaded.state
    elif loaded.status is LoadStatus.NOT_FOUND:
        current = AgentMemoryState()
    else:
        current = None  # unreadable: the read-modify-write says how
    if current is None or change(current) is not None:
        turn.store.mutate(turn.role_id, change)


def _with_snapshot(state: AgentMemoryState, blocks: MemoryBlocks) -> AgentMemoryState:
    """`state` with the snapshot `blocks` sent, when it changed."""
    if not blocks.snapshot_changed:
        return state
    return state.evolve(system_prompt_memory_snapshot=blocks.snapshot,
                        system_prompt_memory_version=blocks.snapshot_version)

