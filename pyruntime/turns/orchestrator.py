"""`AiOrchestrator`: one turn of a role, end to end (contract §7).

A turn resolves the role's config, prepares the history (contract §5), plans the memory blocks,
assembles the request, runs the tool loop against the model (through the request queue, streaming
every piece of text as it arrives), retries a context overflow with a smaller history, and records
the turn. Recording runs in `finally` behind `asyncio.shield`, so a failure, a timeout or a cancel
still records the user's hint exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.history import (
    CompactionKind,
    CompactionRequestOptions,
    CompactionTiming,
    CutReport,
    HeuristicTokenCounter,
    LlmCompactionOptions,
    PreparedHistory,
    TokenCounter,
    prepare_scoped_turn_history,
)
from pyruntime.history.budget import COMPACTION_TARGET_RATIO, MAX_OVERFLOW_RETRIES
from pyruntime.history.cut_report import predicting
from pyruntime.history.llm_fold import CompactionAbandoned
from pyruntime.history.tokens import GENERATION_PROMPT_TOKENS, MESSAGE_OVERHEAD_TOKENS, count_chat_tokens
from pyruntime.memory import MEMORY_TOOL_NAME, MemoryTool
from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.errors import ContextOverflowError, ModelError
from pyruntime.model.queue import ModelRequestQueue, Priority, SlotGrant
from pyruntime.model.seam import ModelClient
from pyruntime.model.types import ChatCompletionAccumulator, TextDelta, ToolCall
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig
from pyruntime.scopes import DEFAULT_TURN_ROLE, EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.persistence import StoreBundle
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.turns.between_turns import CompactionStats, StagedFolds, preemptible_compaction
from pyruntime.turns.context import (
    FixedPartOverflowError,
    RequestFit,
    effective_context,
    fit_history,
    fit_request,
    fixed_parts,
    history_budget,
    native_tools,
    overflow_error,
    summary_block_overhead,
)
from pyruntime.turns.events import (
    CutReportEvent,
    FinalEvent,
    MemoryWriteEvent,
    TaskResult,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
    TurnStatus,
    TurnUsage,
)
from pyruntime.turns.client_tools import (
    DEFAULT_CLIENT_TOOL_TIMEOUT_S,
    ClientCallRegistry,
    ClientToolAdapter,
    check_client_tools,
)
from pyruntime.turns.memory_blocks import MemoryBlocks, NoteFold, plan_memory_blocks
from pyruntime.turns.memory_last import assemble_memory_last
from pyruntime.turns.sessions import SessionStarts, leaves_out_earlier_sessions, without_earlier_sessions
from pyruntime.turns.memory_pass import NO_STATEMENT, MemoryPassOutcome, MemoryPasses, run_memory_pass
from pyruntime.turns.memory_writer import MemoryDesign, statements
from pyruntime.turns.modes import (
    MAX_CALLS_PER_ROUND,
    ReplyExtractor,
    ToolCallMode,
    native_tool_choice,
    parse_structured_reply,
    structured_schema,
    tool_contract,
)
from pyruntime.turns.prompt import (
    PromptAnchors,
    TailBlocks,
    assemble_messages,
    build_system_prompt,
    place_notes,
    place_tail,
    role_system_prompt,
    tail_text_of,
)
from pyruntime.turns.prewarm import (
    RECENT_TURNS,
    Prewarms,
    needs_prewarm,
    prompt_cache_has_room,
    send_prewarm,
    worth_prewarming,
)
from pyruntime.turns.recording import TurnRecord, record_turn
from pyruntime.turns.request import FORCED_TOOL_NONE, FORCED_TOOL_REQUIRED, AiTaskRequest
from pyruntime.turns.tail_anchors import conversation_digest, load_anchors, save_anchors
from pyruntime.turns.tool_loop import (
    CallOutcome,
    ExecutedCall,
    LoopGuard,
    MemoryToolAdapter,
    OfferedTool,
    ToolExecutor,
    offered_tools,
    reply_settles_round,
)
from pyruntime.turns.tools import ToolContext, ToolRegistry
from pyruntime.turns.write_gate import ConversationGate

log = logging.getLogger("pyruntime.turns")

DEFAULT_TURN_TIMEOUT_S = 120.0
DEFAULT_MEMORY_WAIT_S = 30.0  # wait_memory_writes without a timeout
# Room for the JSON wrapper and tool calls on top of a role's visible output cap, when tools are
# offered: the cap bounds the reply the player sees, never the calls (a 32-48 token cap sent as
# max_tokens cut the JSON of 69 of 72 structured turns; issue 9).
TOOL_CALL_ALLOWANCE_TOKENS = 512
DEFAULT_MODEL_CONTEXT_TOKENS = 8192
MAX_TAIL_ANCHORS = 4096  # conversations whose tail placement is remembered (a few hundred bytes each)
ROUND_SEPARATOR = "\n\n"  # between the visible text of two model rounds
FIXED_COUNT_CACHE_SIZE = 256  # (role, part) entries of the system-prompt / tool-schema token counts
STRUCTURED_RESULTS_HEADER = "Tool results:"

Emit = Callable[[TurnEvent], Awaitable[None]]
PlanBlocks = Callable[["_Turn", str, NoteFold], Awaitable[MemoryBlocks]]


async def _discard(event: TurnEvent) -> None:
    return None


class _Prediction(NamedTuple):
    """The next turn's request but the player's line, its history, and the memory version it was planned with."""

    prefix: list[dict[str, Any]]
    prepared: PreparedHistory | None
    memory_version: int


class _Places(NamedTuple):
    """Where a request's tail and memory notes go (`place_tail`, `place_notes`) and the anchors to keep."""

    tail_after: int
    notes_after: tuple[int, ...]
    kept: PromptAnchors


@dataclass(frozen=True)
class _PromptParts:
    """What a turn's requests share, whatever its history: the system prompt, tool availability, native schemas."""

    system_prompt: str
    availability: str
    tools_sent: list[dict[str, Any]] | None


@dataclass
class _Turn:
    """The mutable state of one running turn."""

    request: AiTaskRequest
    config: RoleMemoryConfig
    borrowed_history: bool
    store: ScopedAgentMemoryStore
    mode: ToolCallMode
    started: float = field(default_factory=time.perf_counter)
    status: TurnStatus = TurnStatus.FAILED
    error: str = ""
    text: list[str] = field(default_factory=list)
    round_has_text: bool = False
    tool_calls: list[ToolCallEvent] = field(default_factory=list)
    tool_results: list[ToolResultEvent] = field(default_factory=list)
    rounds: list[list[ExecutedCall]] = field(default_factory=list)
    loop_messages: list[dict[str, Any]] = field(default_factory=list)
    forced: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    model_calls: int = 0
    overflow_retries: int = 0
    prepared: PreparedHistory | None = None
    cut_report: CutReport | None = None
    cut_report_sent: CutReport | None = None  # the report last streamed (one per attempt)
    finished: bool = False
    deadline: asyncio.Timeout | None = None  # the turn's timeout, paused while it waits for the model
    tool_allowance: int = 0  # TOOL_CALL_ALLOWANCE_TOKENS once tools are offered
    queue_owner: int | None = None  # the turn's place in the model queue, from its first model call
    turn_id: str = ""  # names the turn in game-tool calls (SubmitToolResult)
    parts: _PromptParts | None = None
    sent: list[dict[str, Any]] | None = None  # the request before any tool round, as last prepared (prewarm)
    predicted: bool = False  # the next turn as prepared between turns (nothing stored; its fold is kept)
    memory_seen: int = 0  # (a prediction) the memory version it planned the blocks with
    head_memory_version: int = 0  # the memory version the head of the fold it sends was evaluated with (0: now)
    memory_write_pending: bool = False
    memory_write: MemoryPassOutcome | None = None

    @property
    def role_id(self) -> str:
        return self.request.role_id

    @property
    def records_history(self) -> bool:
        return self.config.with_chat_history

    def result(self) -> TaskResult:
        if self.cut_report is not None:
            self.cut_report.overflow_retries = self.overflow_retries
        return TaskResult(
            status=self.status,
            text="".join(self.text),
            error=self.error,
            tool_calls=tuple(self.tool_calls),
            tool_results=tuple(self.tool_results),
            cut_report=self.cut_report,
            usage=TurnUsage(self.prompt_tokens, self.completion_tokens, self.model_calls, self.cached_prompt_tokens),
            trace_id=self.request.trace_id,
            memory_write_pending=self.memory_write_pending,
            memory_write=self.memory_write,
        )


@dataclass(frozen=True)
class _RoundReply:
    """What one model call gave: the visible text, the tool calls, the assistant message to replay."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    raw: str
    error: str | None = None


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
        compaction_target_ratio: float = COMPACTION_TARGET_RATIO,
    ) -> None:
        """Wire the policy, stores, model client and queue; `tool_mode` is `structured` or `native`.

        `timeout_includes_queue`: False (default) - a turn's timeout counts only while the turn is not
        waiting for the model's request queue, so a turn never times out without reaching the model;
        True - it counts from the call. Either way a waiting turn can be cancelled.
        `tool_call_allowance`: tokens for the JSON wrapper and tool calls on top of the visible output cap.
        `client_tool_timeout`: seconds a game-tool call waits for its result when the request sets none.
        `prewarm`: after each turn, evaluate the next turn's prefix in the background when it changes
        (turns/prewarm.py); `build_orchestrator` turns it on for a model we host. `prompt_cache_status`: the
        hosted server's `/coreai/status` (blocking; called off the event loop), so a prewarm is sent only
        while its prompt cache has room (`prewarm.worth_prewarming`). `assemble` (`prompt.assemble_messages`'s
        signature) and `compaction_target_ratio` (1.0: no hysteresis) let a benchmark run the design note's
        layout against this one (bench/design_note_layout.py); the defaults are the runtime's.
        `memory_last`: the memory-last layout (turns/memory_last.py): the whole memory, consolidated every turn,
        right before the player's line; `build_orchestrator` gives it to the writer design's (small) models.
        `background_compaction`: fold between turns (turns/between_turns.py): after a reply, the next turn's
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
        self.client = client
        self.queue = queue or ModelRequestQueue()
        self.tools = tools or ToolRegistry()
        self.tool_mode = ToolCallMode.parse(tool_mode)
        self.model_context_tokens = model_context_tokens
        self.token_counter = token_counter or HeuristicTokenCounter()
        self.system_messages_after_first = system_messages_after_first
        self.default_timeout = default_timeout
        self.llm_compaction_enabled = llm_compaction_enabled
        self.llm_compaction_options = llm_compaction_options or LlmCompactionOptions()
        self.max_calls_per_round = max_calls_per_round
        self._stream_buffer = stream_buffer
        self.timeout_includes_queue = timeout_includes_queue
        if tool_call_allowance < 0:
            raise InvalidArgumentError("tool_call_allowance must be >= 0")
        self.tool_call_allowance = tool_call_allowance
        # How memory is written for roles with memory on: the memory tool in the reply, or a writer pass after it.
        self.memory_design = MemoryDesign.parse(memory_design)
        self.memory_passes = MemoryPasses()
        # A memory write lands only between the turns of its conversation (turns/write_gate.py).
        self.write_gate = ConversationGate()
        self.client_tool_timeout = client_tool_timeout
        self.client_calls = ClientCallRegistry()  # game-tool calls waiting for the client's result
        self.prewarm = prewarm
        self.prewarms = Prewarms()
        self.background_compaction = background_compaction
        self.staged_folds = StagedFolds()
        self.compaction_stats = CompactionStats()
        self.prompt_cache_status = prompt_cache_status
        # Memory-last (small models): the whole memory right before the player's line (turns/memory_last.py).
        self.memory_last = memory_last
        self.session_starts = SessionStarts()  # where each conversation's session began (turns/sessions.py)
        self._assemble_messages = assemble_memory_last if memory_last else assemble
        self.compaction_target_ratio = compaction_target_ratio
        self._recent_conversations: deque[str] = deque(maxlen=RECENT_TURNS)
        # Where each conversation's tail and memory notes were last sent (issue 13): they stay there.
        self._anchors: OrderedDict[str, PromptAnchors] = OrderedDict()
        # The system prompt and tool schemas of a role are byte-identical turn after turn (contract §7):
        # their token counts are kept per role and reused while the text is unchanged.
        self._fixed_counts: dict[tuple[str, str], tuple[str, int]] = {}
        self._context_warnings: set[tuple[int, int]] = set()  # (role, model) context sizes already warned about

    # -- public API ------------------------------------------------------------------------

    async def run_task(self, request: AiTaskRequest) -> TaskResult:
        """Run one turn and return its result; cancelling the caller cancels the turn (still recorded)."""
        if isinstance(request, AiTaskRequest) and request.client_tools:
            raise InvalidArgumentError("client tools need the streaming call (StreamTask): only a stream can hand "
                                       "their calls to the client and wait for the results")
        return await self._execute(request, _discard)

    def submit_tool_result(self, turn_id: str, call_id: str, success: bool, content: str) -> None:
        """Hand a client's game-tool result to the waiting call (errors: see `ClientCallRegistry.submit`)."""
        self.client_calls.submit(turn_id, call_id, success, content)

    async def stream_task(self, request: AiTaskRequest) -> AsyncIterator[TurnEvent]:
        """Run one turn, yielding its events as they happen; the last one is a `FinalEvent`.

        Closing the iterator early (or cancelling its consumer) cancels the turn; it is still recorded.
        """
        turn = self._start(request)  # bad input raises here, before anything runs
        events: asyncio.Queue[TurnEvent] = asyncio.Queue(maxsize=self._stream_buffer)
        task = asyncio.create_task(self._run(turn, events.put, streamed=True))
        try:
            while True:
                if task.done() and events.empty():
                    task.result()  # raises what the turn raised; a finished turn always emitted its FinalEvent
                    return
                getter = asyncio.ensure_future(events.get())
                try:
                    await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.done() and not getter.cancelled():
                    event = getter.result()
                    yield event
                    # The last event: the final one, or the memory write after it when the request waits for it
                    # (a turn without a pass, memory off, ends at its final event: the task is done then).
                    if isinstance(event, MemoryWriteEvent) or (
                            isinstance(event, FinalEvent) and not request.wait_memory_write):
                        return
        finally:
            if not task.done():
                task.cancel()
            # Wait for the turn to record itself; it never outlives its stream.
            await asyncio.gather(task, return_exceptions=True)

    # -- one turn --------------------------------------------------------------------------

    def _start(self, request: AiTaskRequest) -> _Turn:
        if not isinstance(request, AiTaskRequest):
            raise InvalidArgumentError("request must be an AiTaskRequest")
        config = self.policy.get(request.role_id)
        borrowed = False
        if request.is_chat_source and not config.with_chat_history:
            # A chat-source request borrows short-term history for this run only: never persisted.
            config = config.copy(with_chat_history=True, persist_chat_history=False)
            borrowed = True
        turn = _Turn(request, config, borrowed, self.stores.scoped(request.scope, request.actor), self.tool_mode)
        turn.store.key(request.role_id)  # a bad role id fails now, before anything is written
        check_client_tools(request.client_tools, [t.name for t in self.tools.tools_for(request.role_id)])
        turn.turn_id = self.client_calls.new_turn_id()
        conversation = conversation_digest(turn.store.key(request.role_id))
        self.prewarms.supersede(conversation)
        self._recent_conversations.append(conversation)
        self.client.check_available()  # a restarting model fails the call now (UNAVAILABLE), nothing is recorded
        return turn

    async def _execute(self, request: AiTaskRequest, emit: Emit) -> TaskResult:
        return await self._run(self._start(request), emit)

    async def _run(self, turn: _Turn, emit: Emit, *, streamed: bool = False) -> TaskResult:
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
            except Exception as exc:  # a bug or a store failure: the turn fails, the hint is still recorded
                # The type only: a traceback's messages may quote player text.
                log.error("turn failed with %s", type(exc).__name__)
                turn.status, turn.error = TurnStatus.FAILED, f"internal error ({type(exc).__name__})"
            finally:
                await self._finish(turn)
        memory_pass = None
        if turn.status.completed:
            memory_pass = self._start_memory_pass(turn)
            self._start_between_turns(turn, memory_pass)
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

    async def _finish(self, turn: _Turn) -> None:
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

    def _start_memory_pass(self, turn: _Turn) -> asyncio.Future[MemoryPassOutcome] | None:
        """Writer design: the memory decision on this line, queued behind player turns (turns/memory_pass.py).

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

    def _start_between_turns(self, turn: _Turn, memory_pass: asyncio.Future[MemoryPassOutcome] | None) -> None:
        """Prepare the next turn behind player turns, after this turn's writer pass: make its fold (between turns),
        then evaluate its prefix (the prewarm); turns/between_turns.py, turns/prewarm.py."""
        if not (self.prewarm or self.background_compaction) or turn.parts is None or turn.sent is None:
            return
        if not turn.config.with_chat_history or turn.borrowed_history:
            return  # no history (or a borrowed one that is not kept): the next prefix is this one's
        llm_fold = self.llm_compaction_enabled and turn.config.use_llm_context_compaction
        if llm_fold and not self.background_compaction:
            # Predicting the head would take the compaction's own model call, and its summary is not
            # deterministic: the prewarm could not know what the next turn will send.
            return
        # Native tools: the server renders the schemas into the prompt its own way (no prewarm can match it).
        warm = self.prewarm and not turn.parts.tools_sent
        conversation = conversation_digest(turn.store.key(turn.role_id))

        async def work(still_due: Callable[[], bool]) -> int | None:
            displaced = False
            if memory_pass is not None:
                # The pass may change the memory (the next head or tail), and its request replaces
                # this turn's prompt in llama.cpp's KV cache. The prewarm's request waits behind it
                # anyway (background requests are served in order), this waits for its edit too.
                await asyncio.wait({memory_pass})
                displaced = (not memory_pass.cancelled() and memory_pass.exception() is None
                             and memory_pass.result().model_calls > 0)
            if not still_due():
                return None  # the next turn has started: the work after it prepares the one after
            try:
                predicted = await self._predict_prefix(turn)
            except CompactionAbandoned:
                self.compaction_stats.lost += 1  # a player's call took the model: made again after the next turn
                return None
            prefix, prepared, memory_seen = predicted if predicted is not None else (None, None, 0)
            fold = self.staged_folds.stage(conversation, prepared, self.compaction_stats, memory_seen) \
                if self.background_compaction else None
            with self.staged_folds.readying(conversation, fold) as ready:
                if not warm or prefix is None or turn.sent is None:
                    return None
                if not still_due():
                    ready.cancel()  # not warmed: the turn that superseded it sends the previous head
                    return None
                if not needs_prewarm(prefix, turn.sent, displaced=displaced):
                    return None
                # Asked only now: most turns are warm already, and the status is a request to the model server.
                if not worth_prewarming(await self._prompt_cache_room(), tuple(self._recent_conversations),
                                        conversation):
                    return None  # no prewarm will come: the next turn evaluates the head
                evaluated = await send_prewarm(self.client, self.queue, prefix, still_due, on_sent=ready.sent,
                                               conversation=conversation)
                if evaluated is None:
                    ready.cancel()  # superseded while it waited for the model
                return evaluated

        self.prewarms.start(conversation, work)

    async def _prompt_cache_room(self) -> bool | None:
        """`prewarm.prompt_cache_has_room` of the hosted server now; False when it cannot tell (no prewarm then)."""
        if self.prompt_cache_status is None:
            return None
        try:
            return prompt_cache_has_room(await asyncio.to_thread(self.prompt_cache_status))
        except Exception as exc:  # noqa: BLE001 - a status the server cannot give only skips a prewarm
            log.info("prewarm skipped: no prompt cache status (%s)", type(exc).__name__)
            return False

    async def _predict_prefix(self, turn: _Turn) -> _Prediction | None:
        """The next turn's request but the player's line, and its history, as it would prepare them now; stores
        nothing (with compaction between turns, the fold it makes is the next turn's: see `_start_between_turns`).

        The next player line is not known: this turn's stands in for it (its length enters the
        history budget), and this request's tail blocks and tools stand in for the next one's.
        """
        parts = turn.parts
        assert parts is not None
        ghost = _Turn(turn.request, turn.config, turn.borrowed_history, turn.store, turn.mode, predicted=True)
        ghost.tool_allowance = turn.tool_allowance
        with predicting():
            try:
                tail, fit = await self._prepare(ghost, parts, False, self._peek_memory_blocks())
                # Rendered with the tail where the turn would put it (`place_tail`, the anchor this turn kept).
                base = await self._fit_history(ghost, fit, parts.system_prompt, tail, parts.tools_sent)
            except FixedPartOverflowError:
                return None
        return _Prediction(base[:-1] if turn.request.hint else base, ghost.prepared, ghost.memory_seen)

    def _record(self, turn: _Turn) -> None:
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
        except Exception as exc:  # recording must not turn a finished reply into an error
            log.warning("recording the turn failed (%s)", type(exc).__name__)

    async def _turn(self, turn: _Turn, emit: Emit) -> None:
        request, config = turn.request, turn.config
        context = ToolContext(request.role_id, request.scope, request.actor, request.trace_id)
        memory = None
        if config.use_memory_tool:
            tool = MemoryTool(turn.store.store, turn.store.key(request.role_id),
                              max_memory_chars=config.effective_max_memory_chars)
            memory = MemoryToolAdapter(tool, config.default_action, player_text=request.hint)
            forced_memory = request.forced_tool_mode.strip().lower() == MEMORY_TOOL_NAME
            if self.memory_design is MemoryDesign.WRITER and not forced_memory:
                memory = None  # the writer pass after the reply keeps the memory (turns/memory_pass.py)
        allowed = request.allowed_tool_names
        if request.forced_tool_mode.lower() == FORCED_TOOL_NONE:
            allowed = ()
        call_timeout = request.client_tool_timeout or self.client_tool_timeout
        client = [ClientToolAdapter(spec, self.client_calls, turn.turn_id, call_timeout, emit)
                  for spec in request.client_tools]
        role_tools, offered = offered_tools(memory, self.tools.tools_for(request.role_id), allowed, client)
        turn.tool_allowance = self.tool_call_allowance if offered else 0
        turn.forced = self._forced(request.forced_tool_mode, offered)
        system_prompt = build_system_prompt(
            role_system_prompt(request.role_id, config.system_prompt),
            tool_contract([t.definition() for t in role_tools], turn.mode),
        )
        offered_defs = [t.definition() for t in offered]
        availability = _availability(offered, turn.forced) if allowed is not None or turn.forced else ""
        executor = ToolExecutor(offered, context)
        guard = LoopGuard(config.effective_max_tool_call_roundtrips)

        consolidate = False
        tools_sent = native_tools(offered_defs, turn.mode is ToolCallMode.NATIVE)
        turn.parts = parts = _PromptParts(system_prompt, availability, tools_sent)
        while True:
            tail, fit = await self._prepare(turn, parts, consolidate, self._memory_blocks)
            base = await self._fit_history(turn, fit, system_prompt, tail, tools_sent)
            self._keep_tail_anchor(turn, tail)
            turn.sent = base
            if turn.prepared is not None and turn.prepared.cut_report is not turn.cut_report_sent:
                # Once per attempt, for the history as sent (after any refit to the context): after an
                # overflow retry the next one describes the request actually sent, as the final result does.
                report = turn.prepared.cut_report
                report.overflow_retries = turn.overflow_retries
                turn.cut_report_sent = report
                await emit(CutReportEvent(report))
            try:
                await self._tool_loop(turn, base, offered, offered_defs, executor, guard, emit)
                return
            except ContextOverflowError:
                if turn.overflow_retries >= MAX_OVERFLOW_RETRIES:
                    raise
                turn.overflow_retries += 1
                consolidate = True
                log.info("context overflow: retry %d of %d with a smaller history budget",
                         turn.overflow_retries, MAX_OVERFLOW_RETRIES)

    @staticmethod
    def _forced(mode: str, offered: Sequence[OfferedTool]) -> str | None:
        """None (the model decides), `required`, or the exact name of the tool to call."""
        wanted = mode.strip()
        if wanted.lower() in ("", "auto", FORCED_TOOL_NONE):
            return None
        if wanted.lower() == FORCED_TOOL_REQUIRED:
            if not offered:
                raise InvalidArgumentError("forced_tool_mode 'required' needs at least one offered tool")
            return FORCED_TOOL_REQUIRED
        for tool in offered:
            if tool.name.lower() == wanted.lower():
                return tool.name
        raise InvalidArgumentError(
            "forced_tool_mode must be '', 'none', 'required' or the name of a tool offered in this request"
        )

    async def _prepare(self, turn: _Turn, parts: _PromptParts, consolidate: bool,
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

    def _peek_memory_blocks(self) -> PlanBlocks:
        """`_memory_blocks` for a prediction: the stored state read once, a new snapshot kept here, not stored."""
        states: list[AgentMemoryState | None] = []

        async def plan(turn: _Turn, system_prompt: str, fold: NoteFold) -> MemoryBlocks:
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

    async def _memory_blocks(self, turn: _Turn, system_prompt: str, fold: NoteFold) -> MemoryBlocks:
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
            await asyncio.to_thread(turn.store.mutate, turn.role_id, change)
        except MemoryUnreadableError:
            log.warning("memory document is unreadable: the turn runs without the memory blocks")
            return plan_memory_blocks(None)
        return planned[-1]

    def _assemble(self, turn: _Turn, system_prompt: str, tail: TailBlocks, *,
                  prepared: PreparedHistory | None = None) -> list[dict[str, Any]]:
        places = self._places(turn, tail, prepared) if prepared else None
        return self._assemble_messages(
            system_prompt=system_prompt,
            summary=prepared.summary_text if prepared else "",
            history=prepared.messages if prepared else (),
            tail=tail,
            user_payload=turn.request.hint,
            system_messages_after_first=self.system_messages_after_first,
            tail_after=places.tail_after if places else None,
            notes_after=places.notes_after if places else None,
        )

    def _conversation_anchors(self, turn: _Turn) -> PromptAnchors | None:
        return self._anchors.get(conversation_digest(turn.store.key(turn.role_id)))

    def _sent_memory(self, turn: _Turn) -> tuple[int, tuple[int, ...]]:
        """The memory versions of the head's folded block and of the notes this conversation's last request carried."""
        anchors = self._conversation_anchors(turn)
        if anchors is None:
            return 0, ()
        return anchors.head_version, tuple(note.version for note in anchors.notes)

    def _places(self, turn: _Turn, tail: TailBlocks, prepared: PreparedHistory) -> _Places:
        """Where the tail and the memory notes go in this request, and the anchors to keep for the next."""
        anchors = self._conversation_anchors(turn)
        compacted = prepared.cut_report.compaction is not CompactionKind.NONE
        tail_after, tail_anchor = place_tail(anchors.tail if anchors else None, tail_text_of(tail),
                                             prepared.messages, compacted=compacted)
        notes_after, note_anchors = place_notes(anchors.notes if anchors else (), tail.memory_notes,
                                                prepared.messages)
        kept = PromptAnchors(tail_anchor, note_anchors, tail.memory_folded.version if tail.memory_folded else 0)
        return _Places(tail_after, notes_after, kept)

    def load_tail_anchors(self, path: Path) -> None:
        """Take the places saved by `save_tail_anchors` (a runtime restarted with the disk prompt cache)."""
        self._anchors = load_anchors(path, MAX_TAIL_ANCHORS)

    def save_tail_anchors(self, path: Path) -> None:
        """Save where each conversation's tail and notes were last sent (digests only), for `load_tail_anchors`."""
        save_anchors(path, self._anchors)

    def _keep_tail_anchor(self, turn: _Turn, tail: TailBlocks) -> None:
        """Remember where this turn's tail and notes went (bounded: the least recently used conversations go first)."""
        if turn.prepared is None:
            return
        key = conversation_digest(turn.store.key(turn.role_id))
        self._anchors[key] = self._places(turn, tail, turn.prepared).kept
        self._anchors.move_to_end(key)
        while len(self._anchors) > MAX_TAIL_ANCHORS:
            self._anchors.popitem(last=False)

    def _request_tokens(self, turn: _Turn, messages: Sequence[dict[str, Any]],
                        tools: Sequence[dict[str, Any]] | None) -> int:
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

    def _fit(self, turn: _Turn, system_prompt: str, tail: TailBlocks,
             tools: Sequence[dict[str, Any]] | None) -> RequestFit:
        """The context of this request; a fixed part that leaves no room fails the turn now (no retry helps)."""
        max_ctx = effective_context(self.model_context_tokens, turn.config.context_tokens, self._context_warnings)
        fixed = self._request_tokens(turn, self._assemble(turn, system_prompt, tail), tools)
        fit = fit_request(max_ctx, self._max_tokens(turn), fixed, summary_block_overhead(self.token_counter))
        if fit.room < 0:
            raise self._overflow(turn, fit, system_prompt, tail, tools)
        return fit

    def _overflow(self, turn: _Turn, fit: RequestFit, system_prompt: str, tail: TailBlocks,
                  tools: Sequence[dict[str, Any]] | None) -> FixedPartOverflowError:
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

    async def _fit_history(self, turn: _Turn, fit: RequestFit, system_prompt: str, tail: TailBlocks,
                           tools: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The request as sent, its history prepared again with less room while the rendered whole overflows."""
        prepared, base = await fit_history(
            fit, turn.prepared,
            prepare=lambda extra: self._history(turn, fit, extra),
            render=lambda p: self._assemble(turn, system_prompt, tail, prepared=p),
            count=lambda messages: self._request_tokens(turn, messages, tools),
            overflow=lambda: self._overflow(turn, fit, system_prompt, tail, tools),
        )
        if prepared is not None:
            turn.prepared, turn.cut_report = prepared, prepared.cut_report
        return base

    async def _history(self, turn: _Turn, fit: RequestFit, extra_tokens: int = 0) -> PreparedHistory:
        config = turn.config
        # Everything but the history, as rendered (template, tail blocks, payload, native tool schemas).
        budget = history_budget(fit, self._max_tokens(turn), extra_tokens, turn.overflow_retries)
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

    async def _session_start(self, turn: _Turn) -> int:
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

    @staticmethod
    def _output_cap(turn: _Turn) -> int:
        """Tokens of visible reply per model round: the request's, else the role's (always set)."""
        return turn.request.max_output_tokens or turn.config.effective_max_output_tokens

    def _max_tokens(self, turn: _Turn) -> int:
        """`max_tokens` of a model request: the visible cap plus room for tool calls when tools are offered."""
        return self._output_cap(turn) + turn.tool_allowance

    @contextlib.asynccontextmanager
    async def _model_slot(self, turn: _Turn) -> AsyncIterator[SlotGrant]:
        """Hold the model for one round; the turn's timeout is paused while it waits (unless it includes the queue)."""
        deadline = turn.deadline
        loop = asyncio.get_running_loop()
        pause = not self.timeout_includes_queue and deadline is not None and deadline.when() is not None
        remaining = 0.0
        if pause:
            assert deadline is not None and deadline.when() is not None
            remaining = deadline.when() - loop.time()
            deadline.reschedule(None)
        try:
            if turn.queue_owner is None:
                turn.queue_owner = self.queue.new_owner()
            async with self.queue.slot(Priority.PLAYER, turn.queue_owner) as grant:
                if pause:
                    assert deadline is not None
                    deadline.reschedule(loop.time() + remaining)
                    pause = False
                self.client.check_available()  # the model may have gone down while this turn waited
                yield grant
        finally:
            if pause and deadline is not None:
                deadline.reschedule(loop.time() + remaining)

    # -- the tool loop ---------------------------------------------------------------------

    async def _tool_loop(self, turn: _Turn, base: list[dict[str, Any]], offered: Sequence[OfferedTool],
                         offered_defs: list[dict[str, Any]], executor: ToolExecutor, guard: LoopGuard,
                         emit: Emit) -> None:
        while True:
            reply = await self._model_round(turn, base + turn.loop_messages, offered_defs, emit)
            if reply.error is not None and not reply.text and not reply.tool_calls:
                # A structured reply that is not valid JSON: tell the model, count a failing round.
                turn.loop_messages += [
                    {"role": "assistant", "content": reply.raw},
                    {"role": "user", "content": f"{STRUCTURED_RESULTS_HEADER}\nerror: your reply was not a valid "
                     f"JSON reply object ({reply.error}). Answer again in the required format."},
                ]
                guard.record_round([ExecutedCall("", "", "", CallOutcome(False, reply.error, reply.error))])
                if guard.too_many_failures():
                    await self._end_loop(turn, guard.failures_message(), emit)
                    return
                continue
            if not reply.tool_calls or not offered:
                turn.status = TurnStatus.OK
                return
            if guard.limit_reached():
                await self._end_loop(turn, guard.limit_message(), emit)
                return
            executed = []
            for call in reply.tool_calls[: self.max_calls_per_round]:
                name = executor.resolve(call.name, log_repair=False)
                shown = name.name if name is not None else call.name
                event = ToolCallEvent(call.id, shown, call.arguments)
                turn.tool_calls.append(event)
                await emit(event)
                done = await executor.run_call(call)
                executed.append(done)
                result = ToolResultEvent(done.call_id, done.name, done.outcome.success, done.outcome.content)
                turn.tool_results.append(result)
                await emit(result)
            turn.rounds.append(executed)
            guard.record_round(executed)
            turn.loop_messages += self._round_messages(turn.mode, reply, executed)
            if any(c.outcome.success for c in executed):
                turn.forced = None  # a forcing mode holds until a tool call succeeds
            if reply_settles_round(turn.mode, reply.text, executed):
                turn.status = TurnStatus.OK
                return
            if guard.too_many_failures():
                await self._end_loop(turn, guard.failures_message(), emit)
                return

    async def _end_loop(self, turn: _Turn, message: str, emit: Emit) -> None:
        turn.round_has_text = False
        await self._emit_text(turn, message, emit)
        turn.status = TurnStatus.TOOL_LOOP_ENDED
        log.info("tool loop ended after %d round(s)", len(turn.rounds))

    @staticmethod
    def _round_messages(
        mode: ToolCallMode, reply: _RoundReply, executed: Sequence[ExecutedCall]
    ) -> list[dict[str, Any]]:
        """The assistant turn and the tool results as the next request replays them."""
        if mode is ToolCallMode.NATIVE:
            calls = [
                {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                for c in executed
            ]
            return [{"role": "assistant", "content": reply.text, "tool_calls": calls}] + [
                {"role": "tool", "tool_call_id": c.call_id, "content": c.outcome.content} for c in executed
            ]
        results = [
            json.dumps({"name": c.name, "success": c.outcome.success, "result": c.outcome.content}, ensure_ascii=False)
            for c in executed
        ]
        return [
            {"role": "assistant", "content": reply.raw},
            {"role": "user", "content": STRUCTURED_RESULTS_HEADER + "\n" + "\n".join(results)},
        ]

    async def _emit_text(self, turn: _Turn, piece: str, emit: Emit) -> None:
        if not piece:
            return
        if not turn.round_has_text and turn.text:
            turn.text.append(ROUND_SEPARATOR)
            await emit(TextDeltaEvent(ROUND_SEPARATOR))
        turn.round_has_text = True
        turn.text.append(piece)
        await emit(TextDeltaEvent(piece))

    async def _model_round(self, turn: _Turn, messages: list[dict[str, Any]],
                           offered_defs: list[dict[str, Any]], emit: Emit) -> _RoundReply:
        """One streamed model call; text is emitted as it decodes (the `reply` field in structured mode)."""
        request = turn.request
        forced = turn.forced
        kwargs: dict[str, Any] = {
            "temperature": request.temperature if request.temperature is not None else turn.config.temperature,
            "max_tokens": self._max_tokens(turn),
            "extra": request.extra or None,
        }
        structured = turn.mode is ToolCallMode.STRUCTURED and bool(offered_defs)
        if structured:
            only = forced if forced not in (None, FORCED_TOOL_REQUIRED) else None
            schema = structured_schema(offered_defs, require_call=forced is not None, only=only,
                                       max_calls=self.max_calls_per_round)
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif offered_defs:
            kwargs["tools"] = offered_defs
            kwargs["tool_choice"] = native_tool_choice([d["function"]["name"] for d in offered_defs], forced)
        if turn.tool_allowance:
            # The allowance takes only the room left: each tool round makes the next prompt longer.
            max_ctx = effective_context(self.model_context_tokens, turn.config.context_tokens, self._context_warnings)
            room = max_ctx - self._request_tokens(turn, messages, kwargs.get("tools"))
            kwargs["max_tokens"] = max(self._output_cap(turn), min(self._max_tokens(turn), room))
        extractor = ReplyExtractor() if structured else None
        accumulator = ChatCompletionAccumulator()
        turn.round_has_text = False
        # With tools the server's max_tokens includes the tool allowance: the visible reply is capped
        # here, by counting streamed pieces of it (one per token from llama.cpp). Stopping early
        # closes the stream, which stops the generation; the calls, streamed first, stay whole.
        cap = self._output_cap(turn) if turn.tool_allowance else None
        visible = 0
        capped = False
        cut = True  # until the stream ended by itself: a timeout, cancel or failure cuts it
        try:
            async with self._model_slot(turn) as grant:
                turn.model_calls += 1
                # The conversation keeps its slot of the hosted engine (its KV cache stays where this round finds it).
                conversation = conversation_digest(turn.store.key(turn.role_id))
                async with self.client.stream_chat(messages, conversation=conversation, **kwargs) as stream:
                    async for delta in stream:
                        accumulator.add(delta)
                        if isinstance(delta, TextDelta):
                            piece = extractor.feed(delta.text) if extractor is not None else delta.text
                            await self._emit_text(turn, piece, emit)
                            visible += bool(piece)
                            if cap is not None and visible >= cap:
                                capped = True
                                break
                if accumulator.has_tool_calls or (extractor is not None and extractor.has_tool_calls):
                    grant.expect_more()  # the next round follows the tools: keep this turn's prefix in the cache
            cut = capped
        finally:
            _count_usage(turn, accumulator, cut)
        completion = accumulator.result()
        if capped:
            log.info("reply reached the output cap of %d tokens; generation stopped", cap)
        if extractor is None:
            return _RoundReply(completion.text, completion.tool_calls, completion.text)
        if capped:
            calls_json = extractor.tool_calls_json or "[]"
            parsed = parse_structured_reply(completion.text, call_id_prefix=f"call_{len(turn.rounds) + 1}",
                                            tool_calls_json=calls_json)
            raw = '{"tool_calls": ' + calls_json + ', "reply": ' + json.dumps(extractor.text, ensure_ascii=False) + "}"
            return _RoundReply(extractor.text, parsed.tool_calls, raw)
        parsed = parse_structured_reply(completion.text, call_id_prefix=f"call_{len(turn.rounds) + 1}",
                                        tool_calls_json=extractor.tool_calls_json)
        return _RoundReply(extractor.text, parsed.tool_calls, completion.text, parsed.error)


def _count_usage(turn: _Turn, accumulator: ChatCompletionAccumulator, cut: bool) -> None:
    """Add one model call's usage to the turn; a cut stream (capped, timed out, cancelled, failed) never got its
    final usage chunk, so the pieces it streamed (one per token from llama.cpp) are its completion tokens."""
    usage = accumulator.usage
    if usage is not None:
        turn.prompt_tokens += usage.prompt_tokens
        turn.cached_prompt_tokens += usage.cached_tokens
    completion = usage.completion_tokens if usage is not None else 0
    turn.completion_tokens += completion or (accumulator.pieces if cut else 0)


def _with_snapshot(state: AgentMemoryState, blocks: MemoryBlocks) -> AgentMemoryState:
    """`state` with the snapshot `blocks` sent, when it changed."""
    if not blocks.snapshot_changed:
        return state
    return state.evolve(system_prompt_memory_snapshot=blocks.snapshot,
                        system_prompt_memory_version=blocks.snapshot_version)


def _availability(offered: Sequence[OfferedTool], forced: str | None) -> str:
    """The `## Tool Availability (current request)` block body."""
    if not offered:
        return "No tools are available in this request: answer without calling any tool."
    text = "Only these tools are available in this request: " + ", ".join(t.name for t in offered) + "."
    if forced == FORCED_TOOL_REQUIRED:
        text += " Call one of them before you answer."
    elif forced:
        text += f" Call the tool '{forced}' before you answer."
    return text
