"""`AiOrchestrator`: one turn of a role, end to end (contract §7; docs/contract.md).

A turn resolves the role's config, prepares the history (contract §5), plans the memory blocks,
assembles the request, runs the tool loop against the model (through the request queue, streaming
every piece of text as it arrives), retries a context overflow with a smaller history, and records
the turn. Recording runs in `finally` behind `asyncio.shield`, so a failure, a timeout or a cancel
still records the user's hint exactly once.

This module is the coordinator; each job has its own room (docs/architecture.md has the map):
the turn's state (turns/turn_state.py), planning and fitting its request (turns/planning/planner.py), the
model rounds of the tool loop (turns/rounds/loop.py; the loop's rules: turns/rounds/rules.py), streaming its
events (turns/streaming.py), and the work between turns after a reply (turns/between/next_turn.py).
Its length past ~400 lines is the constructor's: every setting a game or a benchmark passes is documented there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pyruntime.errors import InvalidArgumentError
from pyruntime.history import HeuristicTokenCounter, LlmCompactionOptions, TokenCounter
from pyruntime.history.budget import COMPACTION_TARGET_RATIO, MAX_OVERFLOW_RETRIES
from pyruntime.memory import MEMORY_TOOL_NAME, MemoryTool
from pyruntime.model.client.errors import ContextOverflowError, ModelError
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.model.client.seam import ModelClient
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import DEFAULT_TURN_ROLE, EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores.persistence import StoreBundle
from pyruntime.turns.between.block_pace import BlockPace
from pyruntime.turns.between.folds import CompactionStats, StagedFolds
from pyruntime.turns.between.next_turn import NextTurn
from pyruntime.turns.between.prewarm import RECENT_TURNS, Prewarms
from pyruntime.turns.events import CutReportEvent, FinalEvent, MemoryWriteEvent, TaskResult, TurnEvent, TurnStatus
from pyruntime.turns.forgetting import forget_conversations
from pyruntime.turns.planning.context import native_tools
from pyruntime.turns.planning.memory_last import assemble_memory_last
from pyruntime.turns.planning.planner import RequestPlanner
from pyruntime.turns.planning.prompt import assemble_messages, build_system_prompt, role_system_prompt
from pyruntime.turns.planning.sessions import SessionStarts
from pyruntime.turns.planning.tail_anchors import TailAnchors, conversation_digest
from pyruntime.turns.recording import TurnRecord, record_turn
from pyruntime.turns.request import FORCED_TOOL_NONE, AiTaskRequest, forced_tool, tool_availability
from pyruntime.turns.rounds.client_tools import (
    DEFAULT_CLIENT_TOOL_TIMEOUT_S,
    ClientCallRegistry,
    ClientToolAdapter,
    check_client_tools,
)
from pyruntime.turns.rounds.loop import ROUND_SEPARATOR, ToolRounds
from pyruntime.turns.rounds.modes import MAX_CALLS_PER_ROUND, ToolCallMode, tool_contract
from pyruntime.turns.rounds.registry import ToolContext, ToolRegistry
from pyruntime.turns.rounds.rules import LoopGuard, MemoryToolAdapter, ToolExecutor, offered_tools
from pyruntime.turns.streaming import stream_events
from pyruntime.turns.turn_state import Emit, PromptParts, TurnState, discard
from pyruntime.turns.writer.decision import MemoryDesign, statements
from pyruntime.turns.writer.gate import ConversationGate
from pyruntime.turns.writer.passes import NO_STATEMENT, MemoryPasses, MemoryPassOutcome, run_memory_pass

__all__ = [
    "DEFAULT_MEMORY_WAIT_S",
    "DEFAULT_MODEL_CONTEXT_TOKENS",
    "DEFAULT_TURN_TIMEOUT_S",
    "ROUND_SEPARATOR",  # turns/rounds/loop.py's, kept here for the code that imports it from the orchestrator
    "TOOL_CALL_ALLOWANCE_TOKENS",
    "AiOrchestrator",
]

log = logging.getLogger("pyruntime.turns")
T = TypeVar("T")

DEFAULT_TURN_TIMEOUT_S = 120.0
DEFAULT_MEMORY_WAIT_S = 30.0  # wait_memory_writes without a timeout
# Room for the JSON wrapper and tool calls on top of a role's visible output cap, when tools are
# offered: the cap bounds the reply the player sees, never the calls (a 32-48 token cap sent as
# max_tokens cut the JSON of most structured turns; docs/benchmarks.md#model-supervision).
TOOL_CALL_ALLOWANCE_TOKENS = 512
DEFAULT_MODEL_CONTEXT_TOKENS = 8192


class AiOrchestrator:
    """Runs turns of roles against one model: `run_task` (whole result) or `stream_task` (events)."""

    def __init__(
        self,
        policy: AgentMemoryPolicy,
        stores: StoreBundle,
        client: ModelClient,
        queue: ModelRequestQueue | None = None,
        *,
        tools: ToolRegistry | None = None,
        tool_mode: ToolCallMode | str = ToolCallMode.STRUCTURED,
        model_context_tokens: int = DEFAULT_MODEL_CONTEXT_TOKENS,
        token_counter: TokenCounter | None = None,
        system_messages_after_first: bool = True,
        default_timeout: float = DEFAULT_TURN_TIMEOUT_S,
        llm_compaction_enabled: bool = False,
        llm_compaction_options: LlmCompactionOptions | None = None,
        max_calls_per_round: int = MAX_CALLS_PER_ROUND,
        stream_buffer: int = 32,
        timeout_includes_queue: bool = False,
        tool_call_allowance: int = TOOL_CALL_ALLOWANCE_TOKENS,
        memory_design: MemoryDesign | str = MemoryDesign.TOOL,
        client_tool_timeout: float = DEFAULT_CLIENT_TOOL_TIMEOUT_S,
        prewarm: bool = False,
        prompt_cache_status: Callable[[], Mapping[str, object]] | None = None,
        background_compaction: bool = False,
        assemble: Callable[..., list[dict[str, Any]]] = assemble_messages,
        memory_last: bool = False,
        memory_last_stays: bool | None = None,
        compaction_target_ratio: float = COMPACTION_TARGET_RATIO,
    ) -> None:
        """Wire the policy, stores, model client and queue; `tool_mode` is `structured` or `native`.

        `timeout_includes_queue`: False (default) - a turn's timeout counts only while the turn is not
        waiting for the model's request queue, so a turn never times out without reaching the model;
        True - it counts from the call. Either way a waiting turn can be cancelled.
        `tool_call_allowance`: tokens for the JSON wrapper and tool calls on top of the visible output cap.
        `client_tool_timeout`: seconds a game-tool call waits for its result when the request sets none.
        `prewarm`: after each turn, evaluate the next turn's prefix in the background when it changes
        (turns/between/prewarm.py); `build_orchestrator` turns it on for a model we host. `prompt_cache_status`: the
        hosted server's `/coreai/status` (blocking; called off the event loop), so a prewarm is sent only
        while its prompt cache has room (`prewarm.worth_prewarming`). `assemble` (`prompt.assemble_messages`'s
        signature) and `compaction_target_ratio` (1.0: no hysteresis) let a benchmark run the design note's
        layout against this one (bench/design_note_layout.py); the defaults are the runtime's.
        `memory_last`: the memory-last layout (planning/memory_last.py): the whole memory, consolidated every turn,
        right before the player's line; `build_orchestrator` gives it to the writer design's (small) models.
        `memory_last_stays`: where that block goes (between/block_pace.py): None (default) - before each player line
        while the model keeps up with the player, where it was first sent (lines appended later each where they were
        first sent, until a fold or a rewrite) once a turn finds its prewarm still running; True or False - always
        the one or the other (measured against each other in docs/benchmarks.md#the-memory-block-moves-stays-auto).
        `background_compaction`: fold between turns (turns/between/folds.py): after a reply, the next turn's
        fold is made in the background (and its head prewarmed, with `prewarm`); a turn never waits for it.
        """
        if model_context_tokens < 1:
            raise InvalidArgumentError("model_context_tokens must be positive")
        if default_timeout <= 0 or client_tool_timeout <= 0:
            raise InvalidArgumentError("default_timeout and client_tool_timeout must be positive")
        if max_calls_per_round < 1 or stream_buffer < 1:
            raise InvalidArgumentError("max_calls_per_round and stream_buffer must be positive")
        self.policy = policy
        self.stores = stores
        self._client = client
        self.queue = queue or ModelRequestQueue()
        self.tools = tools or ToolRegistry()
        self.tool_mode = ToolCallMode.parse(tool_mode)
        self.model_context_tokens = model_context_tokens
        self.token_counter = token_counter or HeuristicTokenCounter()
        self.system_messages_after_first = system_messages_after_first
        self.default_timeout = default_timeout
        self.llm_compaction_enabled = llm_compaction_enabled
        self.llm_compaction_options = llm_compaction_options or LlmCompactionOptions()
        self._stream_buffer = stream_buffer
        if tool_call_allowance < 0:
            raise InvalidArgumentError("tool_call_allowance must be >= 0")
        self.tool_call_allowance = tool_call_allowance
        # How memory is written for roles with memory on: the memory tool in the reply, or a writer pass after it.
        self.memory_design = MemoryDesign.parse(memory_design)
        self.memory_passes = MemoryPasses()
        # A memory write lands only between the turns of its conversation (turns/writer/gate.py).
        self.write_gate = ConversationGate()
        self.client_tool_timeout = client_tool_timeout
        self.client_calls = ClientCallRegistry()  # game-tool calls waiting for the client's result
        self.prewarm = prewarm
        self.prewarms = Prewarms()
        self.block_pace = BlockPace(memory_last_stays)  # where each conversation's memory-last block goes
        self.background_compaction = background_compaction
        self.staged_folds = StagedFolds()
        self.compaction_stats = CompactionStats()
        self.prompt_cache_status = prompt_cache_status
        # Memory-last (small models): the whole memory as one block after the history (turns/planning/memory_last.py).
        self.memory_last = memory_last
        self.session_starts = SessionStarts()  # where each conversation's session began (turns/planning/sessions.py)
        self.compaction_target_ratio = compaction_target_ratio
        self._recent_conversations: deque[str] = deque(maxlen=RECENT_TURNS)
        # Where each conversation's tail and memory notes were last sent: they stay there.
        self._anchors = TailAnchors()
        self._anchors_path: Path | None = None  # where they are saved (with the disk prompt cache)
        self.planner = RequestPlanner(
            client, self.queue, token_counter=self.token_counter, model_context_tokens=model_context_tokens,
            system_messages_after_first=system_messages_after_first,
            assemble=assemble_memory_last if memory_last else assemble, memory_last=memory_last,
            background_compaction=background_compaction, staged_folds=self.staged_folds,
            llm_compaction_enabled=llm_compaction_enabled, llm_compaction_options=self.llm_compaction_options,
            compaction_target_ratio=compaction_target_ratio, session_starts=self.session_starts,
            anchors=self._anchors,
        )
        self.rounds = ToolRounds(client, self.queue, self.planner, max_calls_per_round=max_calls_per_round,
                                 timeout_includes_queue=timeout_includes_queue)
        self.next_turn = NextTurn(
            client, self.queue, self.planner, prewarm=prewarm, background_compaction=background_compaction,
            llm_compaction_enabled=llm_compaction_enabled, prewarms=self.prewarms, staged_folds=self.staged_folds,
            compaction_stats=self.compaction_stats, prompt_cache_status=prompt_cache_status,
            recent_conversations=self._recent_conversations, block_pace=self.block_pace,
        )

    # -- settings the rooms share ------------------------------------------------------------

    @property
    def client(self) -> ModelClient:
        """The model the turns talk to; assigning one (a recording client in a test) reaches every room."""
        return self._client

    @client.setter
    def client(self, client: ModelClient) -> None:
        self._client = self.planner.client = self.rounds.client = self.next_turn.client = client

    @property
    def max_calls_per_round(self) -> int:
        """Tool calls run per model round (the rest of a round's calls are dropped)."""
        return self.rounds.max_calls_per_round

    @property
    def timeout_includes_queue(self) -> bool:
        """Whether a turn's timeout counts while it waits for the model's request queue (see `__init__`)."""
        return self.rounds.timeout_includes_queue

    @timeout_includes_queue.setter
    def timeout_includes_queue(self, value: bool) -> None:
        self.rounds.timeout_includes_queue = value

    # -- public API ------------------------------------------------------------------------

    async def run_task(self, request: AiTaskRequest) -> TaskResult:
        """Run one turn and return its result; cancelling the caller cancels the turn (still recorded)."""
        if isinstance(request, AiTaskRequest) and request.client_tools:
            raise InvalidArgumentError("client tools need the streaming call (StreamTask): only a stream can hand "
                                       "their calls to the client and wait for the results")
        return await self._execute(request, discard)

    def submit_tool_result(self, turn_id: str, call_id: str, success: bool, content: str) -> None:
        """Hand a client's game-tool result to the waiting call (errors: see `ClientCallRegistry.submit`)."""
        self.client_calls.submit(turn_id, call_id, success, content)

    async def stream_task(self, request: AiTaskRequest) -> AsyncGenerator[TurnEvent, None]:
        """Run one turn, yielding its events as they happen; the last one is a `FinalEvent`.

        Closing the iterator early (or cancelling its consumer) cancels the turn; it is still recorded.
        """
        turn = self._start(request)  # bad input raises here, before anything runs
        events = stream_events(functools.partial(self._run, turn, streamed=True), self._stream_buffer,
                               wait_memory_write=request.wait_memory_write)
        async with contextlib.aclosing(events):  # closing this stream closes that one: it cancels the turn
            async for event in events:
                yield event

    # -- one turn --------------------------------------------------------------------------

    def _start(self, request: AiTaskRequest) -> TurnState:
        if not isinstance(request, AiTaskRequest):
            raise InvalidArgumentError("request must be an AiTaskRequest")
        config = self.policy.get(request.role_id)
        borrowed = False
        if request.is_chat_source and not config.with_chat_history:
            # A chat-source request borrows short-term history for this run only: never persisted.
            config = config.copy(with_chat_history=True, persist_chat_history=False)
            borrowed = True
        turn = TurnState(request, config, borrowed, self.stores.scoped(request.scope, request.actor), self.tool_mode)
        turn.store.key(request.role_id)  # a bad role id fails now, before anything is written
        check_client_tools(request.client_tools, [t.name for t in self.tools.tools_for(request.role_id)])
        turn.turn_id = self.client_calls.new_turn_id()
        conversation = conversation_digest(turn.store.key(request.role_id))
        if self.memory_last:
            turn.memory_stays = self.block_pace.turn_started(conversation, time.monotonic())
        self.prewarms.supersede(conversation)
        self._recent_conversations.append(conversation)
        self.client.check_available()  # a restarting model fails the call now (UNAVAILABLE), nothing is recorded
        return turn

    async def _execute(self, request: AiTaskRequest, emit: Emit) -> TaskResult:
        return await self._run(self._start(request), emit)

    async def _run(self, turn: TurnState, emit: Emit, *, streamed: bool = False) -> TaskResult:
        timeout = turn.request.timeout or self.default_timeout
        # Held until the turn is recorded: a memory write of this conversation lands before or after it.
        async with self.write_gate.turn(turn.store.key(turn.role_id)):
            try:
                async with asyncio.timeout(timeout) as turn.deadline:
                    await self._turn(turn, emit)
            except TimeoutError:
                turn.status, turn.error = TurnStatus.TIMED_OUT, f"the turn did not finish within {timeout:g} s"
            except ModelError as exc:
                turn.status, turn.error = TurnStatus.FAILED, str(exc)
            except asyncio.CancelledError:
                turn.status, turn.error = TurnStatus.CANCELLED, "the turn was cancelled"
                raise
            except Exception as exc:  # noqa: BLE001 - a bug or a store failure: the turn fails, the hint is still recorded
                # The type only: a traceback's messages may quote player text.
                log.error("turn failed with %s", type(exc).__name__)
                turn.status, turn.error = TurnStatus.FAILED, f"internal error ({type(exc).__name__})"
            finally:
                await self._finish(turn)
        memory_pass = None
        if turn.status.completed:
            memory_pass = self._start_memory_pass(turn)
            if turn.memory_stays is not None:
                self.block_pace.turn_ended(conversation_digest(turn.store.key(turn.role_id)), time.monotonic())
            self.next_turn.prepare(turn, memory_pass)
        waits = memory_pass is not None and turn.request.wait_memory_write
        if waits and not streamed:
            assert memory_pass is not None
            turn.memory_write = await asyncio.shield(memory_pass)  # a cancelled caller leaves the pass running
        turn.memory_write_pending = memory_pass is not None and not memory_pass.done()
        result = turn.result()
        await emit(FinalEvent(result))
        if waits and streamed:
            assert memory_pass is not None
            await emit(MemoryWriteEvent(await asyncio.shield(memory_pass)))
        return result

    async def _finish(self, turn: TurnState) -> None:
        """Record the turn once; shielded so a second cancel cannot skip it."""
        if turn.finished:
            return
        turn.finished = True
        await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(self._record, turn)))
        log.info(
            "turn ended: status=%s model_calls=%d tool_rounds=%d overflow_retries=%d text_chars=%d duration=%.2fs",
            turn.status.name, turn.model_calls, len(turn.rounds), turn.overflow_retries,
            sum(len(t) for t in turn.text), time.perf_counter() - turn.started,
        )

    def _start_memory_pass(self, turn: TurnState) -> asyncio.Future[MemoryPassOutcome] | None:
        """Writer design: the memory decision on this line, queued behind player turns (turns/writer/passes.py).

        A line with no statement about the player is decided here, without the model (a finished future).
        """
        if self.memory_design is not MemoryDesign.WRITER or not turn.config.use_memory_tool:
            return None
        key = turn.store.key(turn.role_id)
        trace_id = turn.request.trace_id
        if not statements(turn.request.hint):
            return self.memory_passes.record(MemoryPassOutcome(turn.role_id, reason=NO_STATEMENT, trace_id=trace_id),
                                             conversation=key)
        tool = MemoryTool(turn.store.store, key, max_memory_chars=turn.config.effective_max_memory_chars)
        work = run_memory_pass(self.client, self.queue, tool, turn.role_id, turn.request.hint, gate=self.write_gate,
                               conversation=key, after=self.memory_passes.last_of(key))
        return self.memory_passes.start(work, turn.role_id, conversation=key, trace_id=trace_id)

    async def wait_memory_writes(self, role_id: str, scope: AgentMemoryScope | None = None, actor: str | None = None,
                                 *, trace_id: str = "", timeout: float = DEFAULT_MEMORY_WAIT_S,
                                 ) -> tuple[list[MemoryPassOutcome], bool]:
        """Wait for a conversation's pending memory writes (or one turn's, by trace id): (landed, still pending).

        Writer design only; with the memory tool in the reply a turn's writes land inside the turn.
        """
        key = self.stores.scoped(scope or EMPTY_SCOPE, actor).key((role_id or "").strip() or DEFAULT_TURN_ROLE)
        return await self.memory_passes.wait(key, trace_id, timeout)

    def _record(self, turn: TurnState) -> None:
        completed = turn.status.completed
        try:
            if turn.records_history:
                record = TurnRecord(turn.request.hint, turn.rounds, "".join(turn.text) if completed else None)
                record_turn(turn.store, turn.role_id, record, turn.config.tool_result_memory,
                            persist=turn.config.persist_chat_history)
            if completed and turn.prepared is not None:
                turn.prepared.commit()  # the rolling summary only after a successful turn
                if turn.prepared.fold is not None:  # stored now: the next turn folds from it
                    self.staged_folds.discard(conversation_digest(turn.store.key(turn.role_id)), turn.prepared.fold)
                self.compaction_stats.count_turn(turn.cut_report)
        except Exception as exc:  # noqa: BLE001 - a store failure: the turn ends FAILED, never acknowledged unsaved
            # The player may have seen the reply streamed, but a turn the history does not hold is not acknowledged:
            # the client learns it was not saved and can say the line again (the hint alone may have been kept).
            log.warning("recording the turn failed (%s)", type(exc).__name__)
            if completed:
                turn.status = TurnStatus.FAILED
                turn.error = f"the turn could not be saved ({type(exc).__name__}): its reply is not in the history"

    async def _turn(self, turn: TurnState, emit: Emit) -> None:
        request, config = turn.request, turn.config
        context = ToolContext(request.role_id, request.scope, request.actor, request.trace_id)
        memory = None
        if config.use_memory_tool:
            tool = MemoryTool(turn.store.store, turn.store.key(request.role_id),
                              max_memory_chars=config.effective_max_memory_chars)
            memory = MemoryToolAdapter(tool, config.default_action, player_text=request.hint)
            forced_memory = request.forced_tool_mode.strip().lower() == MEMORY_TOOL_NAME
            if self.memory_design is MemoryDesign.WRITER and not forced_memory:
                memory = None  # the writer pass after the reply keeps the memory (turns/writer/passes.py)
        allowed = request.allowed_tool_names
        if request.forced_tool_mode.lower() == FORCED_TOOL_NONE:
            allowed = ()
        call_timeout = request.client_tool_timeout or self.client_tool_timeout
        client = [ClientToolAdapter(spec, self.client_calls, turn.turn_id, call_timeout, emit)
                  for spec in request.client_tools]
        role_tools, offered = offered_tools(memory, self.tools.tools_for(request.role_id), allowed, client)
        turn.tool_allowance = self.tool_call_allowance if offered else 0
        turn.forced = forced_tool(request.forced_tool_mode, offered)
        system_prompt = build_system_prompt(
            role_system_prompt(request.role_id, config.system_prompt),
            tool_contract([t.definition() for t in role_tools], turn.mode),
        )
        offered_defs = [t.definition() for t in offered]
        availability = tool_availability(offered, turn.forced) if allowed is not None or turn.forced else ""
        executor = ToolExecutor(offered, context)
        guard = LoopGuard(config.effective_max_tool_call_roundtrips)

        consolidate = False
        tools_sent = native_tools(offered_defs, turn.mode is ToolCallMode.NATIVE)
        turn.parts = parts = PromptParts(system_prompt, availability, tools_sent)
        while True:
            tail, fit = await self.planner.prepare(turn, parts, consolidate, self.planner.memory_blocks)
            base = await self.planner.request_as_sent(turn, fit, system_prompt, tail, tools_sent)
            self.planner.keep_tail_anchor(turn, tail)
            turn.sent = base
            if turn.prepared is not None and turn.prepared.cut_report is not turn.cut_report_sent:
                # Once per attempt, for the history as sent (after any refit to the context): after an
                # overflow retry the next one describes the request actually sent, as the final result does.
                report = turn.prepared.cut_report
                report.overflow_retries = turn.overflow_retries
                turn.cut_report_sent = report
                await emit(CutReportEvent(report))
            try:
                await self.rounds.run(turn, base, offered, offered_defs, executor, guard, emit)
                return
            except ContextOverflowError:
                if turn.overflow_retries >= MAX_OVERFLOW_RETRIES:
                    raise
                turn.overflow_retries += 1
                consolidate = True
                log.info("context overflow: retry %d of %d with a smaller history budget",
                         turn.overflow_retries, MAX_OVERFLOW_RETRIES)

    async def forget_conversations(self, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> T:
        """Delete conversations (storage `keys`) wherever the turn engine keeps them; `clear` erases their saves
        (turns/forgetting.py); returns `clear`'s result."""
        return await forget_conversations(self, keys, clear)

    def forget_places(self, conversations: Sequence[str]) -> None:
        """Drop where these conversations' tails were sent (digests), and from the saved file at once (a few KB)."""
        recent = [c for c in self._recent_conversations if c not in conversations]
        self._recent_conversations.clear()
        self._recent_conversations.extend(recent)
        for conversation in conversations:
            self._anchors.forget(conversation)
        if self._anchors_path is not None:
            self._anchors.save(self._anchors_path)

    def load_tail_anchors(self, path: Path) -> None:
        """Take the places saved by `save_tail_anchors` (a runtime restarted with the disk prompt cache); a deletion
        rewrites that file at once."""
        self._anchors.load(path)
        self._anchors_path = path

    def save_tail_anchors(self, path: Path) -> None:
        """Save where each conversation's tail and notes were last sent (digests only), for `load_tail_anchors`."""
        self._anchors.save(path)
