"""Planning and fitting the request of one attempt of a turn (contract §5, §7; docs/contract.md).

An attempt's request is the system prompt, the history (prepared by the history pipeline: windowed, pruned,
folded), the tail blocks (request instructions, memory snapshot and notes, tool availability, world state) and
the player's line. `RequestPlanner` plans the memory blocks from the stored state (storing a new snapshot when
it changes), prepares the history for the room the fixed parts leave, renders the request with the tail and
the memory notes where this conversation's last request had them (turns/planning/tail_anchors.py) and prepares the
history again, with less room, while the rendered whole overflows the context. The pure parts are elsewhere:
the arithmetic in context.py, the rendering in prompt.py, the blocks in memory_blocks.py.

The work between turns predicts the next turn's request with this same preparation (`predict_prefix`), so
the prediction cannot drift from what the turn sends (turns/between/prewarm.py, turns/between/next_turn.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pyruntime.errors import MemoryUnreadableError
from pyruntime.history import (
    CompactionKind,
    CompactionRequestOptions,
    CompactionTiming,
    LlmCompactionOptions,
    PreparedHistory,
    TokenCounter,
    prepare_scoped_turn_history,
)
from pyruntime.history.cut_report import predicting
from pyruntime.history.tokens import GENERATION_PROMPT_TOKENS, MESSAGE_OVERHEAD_TOKENS, count_chat_tokens
from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.client.queue import ModelRequestQueue, Priority
from pyruntime.model.client.seam import ModelClient
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
from pyruntime.turns.planning.memory_blocks import MemoryBlocks, NoteFold, plan_memory_blocks
from pyruntime.turns.planning.memory_last import anchors_of_the_block_that_moves, place_memory_with_tail
from pyruntime.turns.planning.prompt import Placement, PromptAnchors, TailBlocks, place_notes, place_tail, tail_text_of
from pyruntime.turns.planning.sessions import SessionStarts, leaves_out_earlier_sessions, without_earlier_sessions
from pyruntime.turns.planning.tail_anchors import TailAnchors, conversation_digest
from pyruntime.turns.turn_state import PromptParts, TurnState

log = logging.getLogger("pyruntime.turns")

FIXED_COUNT_CACHE_SIZE = 256  # (role, part) entries of the system-prompt / tool-schema token counts

PlanBlocks = Callable[[TurnState, str, NoteFold], Awaitable[MemoryBlocks]]
AssembleMessages = Callable[..., list[dict[str, Any]]]  # `prompt.assemble_messages`'s signature


class Prediction(NamedTuple):
    """The next turn's request but the player's line, its history, and the memory version it was planned with."""

    prefix: list[dict[str, Any]]
    prepared: PreparedHistory | None
    memory_version: int


class RequestPlanner:
    """Plans, renders and fits the requests of turns against one model's context; see the module docstring."""

    def __init__(
        self,
        client: ModelClient,
        queue: ModelRequestQueue,
        *,
        token_counter: TokenCounter,
        model_context_tokens: int,
        system_messages_after_first: bool,
        assemble: AssembleMessages,
        memory_last: bool,
        background_compaction: bool,
        staged_folds: StagedFolds,
        llm_compaction_enabled: bool,
        llm_compaction_options: LlmCompactionOptions,
        compaction_target_ratio: float,
        session_starts: SessionStarts,
        anchors: TailAnchors,
    ) -> None:
        """Take the orchestrator's settings and the state it shares (folds staged between turns, session starts)."""
        self.client = client  # the compaction's model calls; `AiOrchestrator.client` keeps it current
        self.queue = queue
        self.token_counter = token_counter
        self.model_context_tokens = model_context_tokens
        self.system_messages_after_first = system_messages_after_first
        self._assemble_messages = assemble
        self.memory_last = memory_last
        self.background_compaction = background_compaction
        self.staged_folds = staged_folds
        self.llm_compaction_enabled = llm_compaction_enabled
        self.llm_compaction_options = llm_compaction_options
        self.compaction_target_ratio = compaction_target_ratio
        self.session_starts = session_starts
        self.anchors = anchors
        # The system prompt and tool schemas of a role are byte-identical turn after turn (contract §7):
        # their token counts are kept per role and reused while the text is unchanged.
        self._fixed_counts: dict[tuple[str, str], tuple[str, int]] = {}
        self._context_warnings: set[tuple[int, int]] = set()  # (role, model) context sizes already warned about

    async def prepare(self, turn: TurnState, parts: PromptParts, consolidate: bool,
                      plan_blocks: PlanBlocks) -> tuple[TailBlocks, RequestFit]:
        """The tail blocks, the request's fit and the history of one attempt (`consolidate`: an overflow retry).

        Shared by the turn and the prewarm's prediction of the next one (which plans the memory
        blocks without storing them), so the prediction prepares exactly what the turn would.
        """
        request, config = turn.request, turn.config

        async def tail_of(fold: NoteFold) -> TailBlocks:
            blocks = await plan_blocks(turn, parts.system_prompt, fold)
            return TailBlocks(request.request_system_instructions, blocks.snapshot_block, blocks.updates_block,
                              parts.availability, request.world_state, blocks.folded, blocks.notes)

        whole = consolidate or self.memory_last  # memory-last sends the whole memory: the snapshot is all of it
        tail = await tail_of(NoteFold.INTO_SNAPSHOT if whole else NoteFold.KEEP)
        fit = self._fit(turn, parts.system_prompt, tail, parts.tools_sent)
        if config.with_chat_history:
            turn.prepared = await self._history(turn, fit)
            turn.cut_report = turn.prepared.cut_report
            if turn.prepared.cut_report.compaction is not CompactionKind.NONE and not whole:
                # A compaction rewrites everything after the summary anyway: the memory notes fold into one
                # block there (where the notes' messages went), the snapshot before the summary stays. A fold
                # made between turns folds the memory its head was evaluated with; a later edit is a note.
                staged = self.staged_folds.get(conversation_digest(turn.store.key(turn.role_id)))
                if not turn.predicted and staged is not None and staged.fold is turn.prepared.fold:
                    turn.head_memory_version = staged.memory_version
                tail = await tail_of(NoteFold.INTO_HEAD)
                fit = self._fit(turn, parts.system_prompt, tail, parts.tools_sent)
        return tail, fit

    def peek_memory_blocks(self) -> PlanBlocks:
        """`memory_blocks` for a prediction: the stored state read once, a new snapshot kept here, not stored."""
        states: list[AgentMemoryState | None] = []

        async def plan(turn: TurnState, system_prompt: str, fold: NoteFold) -> MemoryBlocks:
            if not turn.config.use_memory_tool:
                return plan_memory_blocks(None)
            if not states:
                loaded = await asyncio.to_thread(turn.store.try_load, turn.role_id)
                states.append(loaded.state if loaded.status is LoadStatus.LOADED
                              else AgentMemoryState() if loaded.status is LoadStatus.NOT_FOUND else None)
            state = states[0]
            if state is None:  # unreadable: the turn runs without the memory blocks
                return plan_memory_blocks(None)
            turn.memory_seen = state.latest_version
            head_version, sent = self._sent_memory(turn)
            blocks = plan_memory_blocks(state, fold=fold, head_version=head_version, sent_notes=sent)
            states[0] = _with_snapshot(state, blocks)
            return blocks

        return plan

    async def memory_blocks(self, turn: TurnState, system_prompt: str, fold: NoteFold) -> MemoryBlocks:
        """Plan the memory blocks from the stored state, storing a new snapshot atomically when it changes."""
        if not turn.config.use_memory_tool:
            return plan_memory_blocks(None)
        planned: list[MemoryBlocks] = []
        head_version, sent = self._sent_memory(turn)

        def change(state: AgentMemoryState) -> AgentMemoryState | None:
            blocks = plan_memory_blocks(state, fold=fold, head_version=head_version, sent_notes=sent,
                                        fold_up_to=turn.head_memory_version if fold is NoteFold.INTO_HEAD else 0)
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

    def _assemble(self, turn: TurnState, system_prompt: str, tail: TailBlocks, *,
                  prepared: PreparedHistory | None = None) -> list[dict[str, Any]]:
        places = self._places(turn, tail, prepared) if prepared else None
        # Memory-last: where the block goes is the turn's (turns/between/block_pace.py).
        stays = {"memory_with_tail": bool(turn.memory_stays)} if self.memory_last else {}
        return self._assemble_messages(
            **stays,
            system_prompt=system_prompt,
            summary=prepared.summary_text if prepared else "",
            history=prepared.messages if prepared else (),
            tail=places.tail if places else tail,
            user_payload=turn.request.hint,
            system_messages_after_first=self.system_messages_after_first,
            tail_after=places.tail_after if places else None,
            notes_after=places.notes_after if places else None,
        )

    def _conversation_anchors(self, turn: TurnState) -> PromptAnchors | None:
        return self.anchors.get(conversation_digest(turn.store.key(turn.role_id)))

    def _sent_memory(self, turn: TurnState) -> tuple[int, tuple[int, ...]]:
        """The memory versions of the head's folded block and of the notes this conversation's last request carried."""
        anchors = self._conversation_anchors(turn)
        if anchors is None:
            return 0, ()
        return anchors.head_version, tuple(note.version for note in anchors.notes)

    def _places(self, turn: TurnState, tail: TailBlocks, prepared: PreparedHistory) -> Placement:
        """Where the tail and the memory notes go in this request, and the anchors to keep for the next."""
        anchors = self._conversation_anchors(turn)
        compacted = prepared.cut_report.compaction is not CompactionKind.NONE
        if self.memory_last and turn.memory_stays:
            return place_memory_with_tail(anchors, tail, tail_text_of(tail), prepared.messages,
                                          compacted=compacted)
        tail_after, tail_anchor = place_tail(anchors.tail if anchors else None, tail_text_of(tail), prepared.messages,
                                             compacted=compacted)
        if self.memory_last:  # the block moves: it goes last, kept as where it went for a turn whose block stays
            return Placement(tail, tail_after, (),
                             anchors_of_the_block_that_moves(tail_anchor, tail.memory, prepared.messages))
        notes_after, note_anchors = place_notes(anchors.notes if anchors else (), tail.memory_notes,
                                                prepared.messages)
        kept = PromptAnchors(tail_anchor, note_anchors, tail.memory_folded.version if tail.memory_folded else 0)
        return Placement(tail, tail_after, notes_after, kept)

    def keep_tail_anchor(self, turn: TurnState, tail: TailBlocks) -> None:
        """Remember where this turn's tail and notes went (bounded: the least recently used conversations go first)."""
        if turn.prepared is None:
            return
        key = conversation_digest(turn.store.key(turn.role_id))
        self.anchors.keep(key, self._places(turn, tail, turn.prepared).kept)

    def request_tokens(self, turn: TurnState, messages: Sequence[dict[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Prompt tokens of a request as sent: rendered by the model's template when the counter can."""
        counter = self.token_counter
        if callable(getattr(counter, "count_messages", None)):
            return count_chat_tokens(counter, messages, tools)
        # The estimate, with the role's byte-identical system prompt and schemas counted once (cached).
        total = GENERATION_PROMPT_TOKENS + MESSAGE_OVERHEAD_TOKENS * len(messages)
        for index, message in enumerate(messages):
            text = message["content"]
            total += self._fixed_count(turn.role_id, "system", text) if index == 0 else counter.count(text)
        if tools:
            total += self._fixed_count(turn.role_id, "tools", json.dumps(tools))
        return total

    def _fit(self, turn: TurnState, system_prompt: str, tail: TailBlocks,
             tools: Sequence[Mapping[str, Any]] | None) -> RequestFit:
        """The context of this request; a fixed part that leaves no room fails the turn now (no retry helps)."""
        max_ctx = effective_context(self.model_context_tokens, turn.config.context_tokens, self._context_warnings)
        fixed = self.request_tokens(turn, self._assemble(turn, system_prompt, tail), tools)
        fit = fit_request(max_ctx, turn.max_tokens(), fixed, summary_block_overhead(self.token_counter))
        if fit.room < 0:
            raise self._overflow(turn, fit, system_prompt, tail, tools)
        return fit

    def context_tokens(self, turn: TurnState) -> int:
        """The context a request of this turn may fill: the model's, or the role's when smaller (warned once)."""
        return effective_context(self.model_context_tokens, turn.config.context_tokens, self._context_warnings)

    def _overflow(self, turn: TurnState, fit: RequestFit, system_prompt: str, tail: TailBlocks,
                  tools: Sequence[Mapping[str, Any]] | None) -> FixedPartOverflowError:
        counter = self.token_counter
        tail_text = "\n\n".join(tail.render())
        error = overflow_error(fit, fixed_parts(
            self._fixed_count(turn.role_id, "system", system_prompt),
            self._fixed_count(turn.role_id, "tools", json.dumps(tools)) if tools else 0,
            counter.count(tail_text) if tail_text else 0,
            counter.count(turn.request.hint) if turn.request.hint else 0,
        ))
        log.warning("turn refused: %s", error)  # numbers and part names only
        return error

    async def request_as_sent(self, turn: TurnState, fit: RequestFit, system_prompt: str, tail: TailBlocks,
                              tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
        """The request as sent, its history prepared again with less room while the rendered whole overflows."""
        prepared, base = await fit_history(
            fit, turn.prepared,
            prepare=lambda extra: self._history(turn, fit, extra),
            render=lambda p: self._assemble(turn, system_prompt, tail, prepared=p),
            count=lambda messages: self.request_tokens(turn, messages, tools),
            overflow=lambda: self._overflow(turn, fit, system_prompt, tail, tools),
        )
        if prepared is not None:
            turn.prepared, turn.cut_report = prepared, prepared.cut_report
        return base

    async def _history(self, turn: TurnState, fit: RequestFit, extra_tokens: int = 0) -> PreparedHistory:
        config = turn.config
        # Everything but the history, as rendered (template, tail blocks, payload, native tool schemas).
        budget = history_budget(fit, turn.max_tokens(), extra_tokens, turn.overflow_retries)
        staged = None
        if self.background_compaction:
            staged = self.staged_folds.get(conversation_digest(turn.store.key(turn.role_id)))
        between = self.background_compaction and not turn.predicted
        prepared = await prepare_scoped_turn_history(
            turn.store,
            turn.role_id,
            config=config,
            counter=self.token_counter,
            budget=budget,
            compact=functools.partial(preemptible_compaction, self.client, self.queue)
            if turn.predicted and self.background_compaction else self._compact,
            # A turn sends the fold made after the last reply once it is warm; the preparation between turns makes it.
            timing=CompactionTiming.BETWEEN_TURNS if between else CompactionTiming.IN_TURN,
            staged=staged.fold if staged is not None else None,
            staged_ready=staged.ready if staged is not None and between else True,
            llm_compaction_enabled=self.llm_compaction_enabled,
            llm_options=self.llm_compaction_options,
            # A borrowed (chat-source) history is short-term: it must not leave a summary behind.
            summarize=not turn.borrowed_history,
            compaction_target_ratio=self.compaction_target_ratio,
        )
        if turn.borrowed_history or not leaves_out_earlier_sessions(config, memory_last=self.memory_last):
            return prepared
        return without_earlier_sessions(prepared, await self._session_start(turn))

    async def _session_start(self, turn: TurnState) -> int:
        """The store order of the conversation's last message before this runtime first served it (turns/sessions)."""
        conversation = conversation_digest(turn.store.key(turn.role_id))
        start = self.session_starts.get(conversation)
        if start is None:
            newest = await asyncio.to_thread(turn.store.get_chat_history, turn.role_id, 1)
            start = self.session_starts.begin(conversation, newest[-1].order if newest else 0)
        return start

    def _fixed_count(self, role_id: str, part: str, text: str) -> int:
        """Tokens of a role's system prompt or tool schemas, counted once while the text stays the same."""
        key = (role_id, part)
        cached = self._fixed_counts.get(key)
        if cached is not None and cached[0] == text:
            return cached[1]
        tokens = self.token_counter.count(text)
        if cached is None and len(self._fixed_counts) >= FIXED_COUNT_CACHE_SIZE:
            del self._fixed_counts[next(iter(self._fixed_counts))]  # the oldest role's entry
        self._fixed_counts[key] = (text, tokens)
        return tokens

    async def _compact(self, messages: list[dict[str, str]], options: CompactionRequestOptions) -> str:
        """The auxiliary compaction completion: no tools, behind player turns in the queue."""
        async with self.queue.slot(Priority.BACKGROUND):
            completion = await self.client.chat(
                messages, temperature=options.temperature, max_tokens=options.max_output_tokens
            )
        return completion.text

    async def predict_prefix(self, turn: TurnState, *, memory_stays: bool | None) -> Prediction | None:
        """The next turn's request but the player's line, and its history, as it would prepare them now; stores
        nothing (with compaction between turns, the fold it makes is the next turn's: see turns/between/next_turn.py).
        `memory_stays`: the next turn's memory-last placement (between/block_pace.py; None: no memory-last layout).

        The next player line is not known: this turn's stands in for it (its length enters the
        history budget), and this request's tail blocks and tools stand in for the next one's.
        """
        parts = turn.parts
        assert parts is not None
        ghost = TurnState(turn.request, turn.config, turn.borrowed_history, turn.store, turn.mode, predicted=True,
                          memory_stays=memory_stays)
        ghost.tool_allowance = turn.tool_allowance
        with predicting():
            try:
                tail, fit = await self.prepare(ghost, parts, False, self.peek_memory_blocks())
                # Rendered with the tail where the turn would put it (`place_tail`, the anchor this turn kept).
                base = await self.request_as_sent(ghost, fit, parts.system_prompt, tail, parts.tools_sent)
            except FixedPartOverflowError:
                return None
        return Prediction(base[:-1] if turn.request.hint else base, ghost.prepared, ghost.memory_seen)


def _mutate_if_changed(turn: TurnState, change: Callable[[AgentMemoryState], AgentMemoryState | None]) -> None:
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

