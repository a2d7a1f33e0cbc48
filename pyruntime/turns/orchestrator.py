"""`AiOrchestrator`: one turn of a role, end to end (contract §7; docs/contract.md).

A turn is a flow of values (turns/turn.py): the request resolves into a `TurnInput` (`_start`); `offer_turn` gives
its `TurnOffer` (system prompt, tools); `run_attempts` (turns/attempts.py) plans the request (`TurnPlan`, by the
planner: turns/planning/planner.py), runs the tool rounds against the model (`RoundsOutcome`, turns/rounds/loop.py),
streaming every piece of text as it arrives, and retries a context overflow with a smaller history; the turn is
recorded and its `TaskResult` built from those values. Recording runs in `finally` behind `asyncio.shield`, so a
failure, a timeout or a cancel still records the user's hint exactly once. After a completed turn the writer pass
(turns/writer/passes.py) and the work between turns (turns/between/next_turn.py) start, off the player's path.

How every turn runs is one value, `TurnSettings` (turns/settings.py), given to each part at construction.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pyruntime.errors import InvalidArgumentError
from pyruntime.history import HeuristicTokenCounter, TokenCounter
from pyruntime.memory import MemoryTool
from pyruntime.model.client.errors import ModelError
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.model.client.seam import ModelClient
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import DEFAULT_TURN_ROLE, EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores.persistence import StoreBundle
from pyruntime.turns.attempts import Attempts, run_attempts, task_result
from pyruntime.turns.between.block_pace import BlockPace
from pyruntime.turns.between.folds import CompactionStats, StagedFolds
from pyruntime.turns.between.next_turn import NextTurn
from pyruntime.turns.between.prewarm import RECENT_TURNS, Prewarms
from pyruntime.turns.events import FinalEvent, MemoryWriteEvent, TaskResult, TurnEvent, TurnStatus
from pyruntime.turns.forgetting import forget_conversations
from pyruntime.turns.planning.counting import RequestTokens
from pyruntime.turns.planning.offer import offer_turn
from pyruntime.turns.planning.planner import RequestPlanner
from pyruntime.turns.planning.sessions import SessionStarts
from pyruntime.turns.planning.tail_anchors import TailAnchors, conversation_digest
from pyruntime.turns.recording import TurnRecord, record_turn
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.rounds.client_tools import ClientCallRegistry, ClientToolAdapter, check_client_tools
from pyruntime.turns.rounds.loop import ROUND_SEPARATOR, ToolRounds
from pyruntime.turns.rounds.progress import TurnProgress
from pyruntime.turns.rounds.registry import ToolRegistry
from pyruntime.turns.settings import (
    DEFAULT_MODEL_CONTEXT_TOKENS,
    DEFAULT_TURN_TIMEOUT_S,
    TOOL_CALL_ALLOWANCE_TOKENS,
    TurnSettings,
)
from pyruntime.turns.streaming import stream_events
from pyruntime.turns.turn import Emit, RoundsOutcome, TurnInput, TurnOffer, discard
from pyruntime.turns.writer.decision import MemoryDesign, statements
from pyruntime.turns.writer.gate import ConversationGate
from pyruntime.turns.writer.passes import NO_STATEMENT, MemoryPasses, MemoryPassOutcome, run_memory_pass

__all__ = [
    "DEFAULT_MEMORY_WAIT_S",
    "DEFAULT_MODEL_CONTEXT_TOKENS",  # turns/settings.py's, kept here for the code that imports them from here
    "DEFAULT_TURN_TIMEOUT_S",
    "ROUND_SEPARATOR",  # turns/rounds/loop.py's, kept here for the code that imports it from the orchestrator
    "TOOL_CALL_ALLOWANCE_TOKENS",
    "AiOrchestrator",
]

log = logging.getLogger("pyruntime.turns")
T = TypeVar("T")

DEFAULT_MEMORY_WAIT_S = 30.0  # wait_memory_writes without a timeout


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
        token_counter: TokenCounter | None = None,
        prompt_cache_status: Callable[[], Mapping[str, object]] | None = None,
        settings: TurnSettings | None = None,
        **choices: Any,
    ) -> None:
        """Wire the policy, stores, model client and queue, and the turn engine's `settings`.

        `choices`: `TurnSettings` fields that change `settings` (or the defaults), a convenience for games, tests and
        benchmarks (`tool_mode="native"`); a name that is no setting is a TypeError, a bad value an
        InvalidArgumentError. `token_counter`: the model's tokenizer (default: the length heuristic).
        `prompt_cache_status`: the hosted server's `/coreai/status` (blocking; called off the event loop), so a
        prewarm is sent only while its prompt cache has room (`prewarm.worth_prewarming`).
        """
        self._settings = settings = (settings or TurnSettings()).but(**choices)
        self.policy = policy
        self.stores = stores
        self._client = client
        self.queue = queue or ModelRequestQueue()
        self.tools = tools or ToolRegistry()
        self.token_counter = token_counter or HeuristicTokenCounter()
        self.memory_passes = MemoryPasses()
        # A memory write lands only between the turns of its conversation (turns/writer/gate.py).
        self.write_gate = ConversationGate()
        self.client_calls = ClientCallRegistry()  # game-tool calls waiting for the client's result
        self.prewarms = Prewarms()
        self.block_pace = BlockPace(settings.memory_last_stays)  # where each conversation's memory-last block goes
        self.staged_folds = StagedFolds()
        self.compaction_stats = CompactionStats()
        self.session_starts = SessionStarts()  # where each conversation's session began (turns/planning/sessions.py)
        self._recent_conversations: deque[str] = deque(maxlen=RECENT_TURNS)
        # Where each conversation's tail and memory notes were last sent: they stay there.
        self._anchors = TailAnchors()
        self._anchors_path: Path | None = None  # where they are saved (with the disk prompt cache)
        counter = RequestTokens(self.token_counter)
        self.planner = RequestPlanner(client, self.queue, counter, settings, staged_folds=self.staged_folds,
                                      session_starts=self.session_starts, anchors=self._anchors)
        self.rounds = ToolRounds(client, self.queue, counter, settings)
        self.next_turn = NextTurn(
            client, self.queue, self.planner, settings, prewarms=self.prewarms, staged_folds=self.staged_folds,
            compaction_stats=self.compaction_stats, prompt_cache_status=prompt_cache_status,
            recent_conversations=self._recent_conversations, block_pace=self.block_pace,
        )

    # -- what the parts share ----------------------------------------------------------------

    @property
    def settings(self) -> TurnSettings:
        """How every turn runs; assigning new settings (a benchmark's sweep) reaches every part from the next turn."""
        return self._settings

    @settings.setter
    def settings(self, settings: TurnSettings) -> None:
        self._settings = self.planner.settings = self.rounds.settings = self.next_turn.settings = settings

    @property
    def client(self) -> ModelClient:
        """The model the turns talk to; assigning one (a recording client in a test) reaches every part."""
        return self._client

    @client.setter
    def client(self, client: ModelClient) -> None:
        self._client = self.planner.client = self.rounds.client = self.next_turn.client = client

    # -- public API ------------------------------------------------------------------------

    async def run_task(self, request: AiTaskRequest) -> TaskResult:
        """Run one turn and return its result; cancelling the caller cancels the turn (still recorded)."""
        if isinstance(request, AiTaskRequest) and request.client_tools:
            raise InvalidArgumentError("client tools need the streaming call (StreamTask): only a stream can hand "
                                       "their calls to the client and wait for the results")
        return await self._run(self._start(request), discard)

    def submit_tool_result(self, turn_id: str, call_id: str, success: bool, content: str) -> None:
        """Hand a client's game-tool result to the waiting call (errors: see `ClientCallRegistry.submit`)."""
        self.client_calls.submit(turn_id, call_id, success, content)

    async def stream_task(self, request: AiTaskRequest) -> AsyncGenerator[TurnEvent, None]:
        """Run one turn, yielding its events as they happen; the last one is a `FinalEvent`.

        Closing the iterator early (or cancelling its consumer) cancels the turn; it is still recorded.
        """
        turn = self._start(request)  # bad input raises here, before anything runs
        events = stream_events(functools.partial(self._run, turn, streamed=True), self._settings.stream_buffer,
                               wait_memory_write=request.wait_memory_write)
        async with contextlib.aclosing(events):  # closing this stream closes that one: it cancels the turn
            async for event in events:
                yield event

    # -- one turn --------------------------------------------------------------------------

    def _start(self, request: AiTaskRequest) -> TurnInput:
        """The request resolved into the turn's input; bad input raises here, before anything runs or is written."""
        if not isinstance(request, AiTaskRequest):
            raise InvalidArgumentError("request must be an AiTaskRequest")
        config = self.policy.get(request.role_id)
        borrowed = False
        if request.is_chat_source and not config.with_chat_history:
            # A chat-source request borrows short-term history for this run only: never persisted.
            config = config.copy(with_chat_history=True, persist_chat_history=False)
            borrowed = True
        store = self.stores.scoped(request.scope, request.actor)
        conversation = conversation_digest(store.key(request.role_id))  # a bad role id fails now
        check_client_tools(request.client_tools, [t.name for t in self.tools.tools_for(request.role_id)])
        memory_stays = None
        if self._settings.memory_last:
            memory_stays = self.block_pace.turn_started(conversation, time.monotonic())
        turn = TurnInput(request, config, borrowed, store, self._settings.tool_mode, self.client_calls.new_turn_id(),
                         conversation, memory_stays, started=time.perf_counter())
        self.prewarms.supersede(conversation)
        self._recent_conversations.append(conversation)
        self.client.check_available()  # a restarting model fails the call now (UNAVAILABLE), nothing is recorded
        return turn

    def _offer(self, turn: TurnInput, emit: Emit) -> TurnOffer:
        """The turn's tools and system prompt; the client's game tools hand their calls to this turn's stream."""
        request = turn.request
        timeout = request.client_tool_timeout or self._settings.client_tool_timeout
        client = [ClientToolAdapter(spec, self.client_calls, turn.turn_id, timeout, emit)
                  for spec in request.client_tools]
        return offer_turn(turn, self._settings, self.tools.tools_for(request.role_id), client)

    async def _run(self, turn: TurnInput, emit: Emit, *, streamed: bool = False) -> TaskResult:
        timeout = turn.request.timeout or self._settings.default_timeout
        attempts = Attempts()
        offer: TurnOffer | None = None
        progress: TurnProgress | None = None
        outcome: RoundsOutcome | None = None
        status, error = TurnStatus.FAILED, ""  # how the turn ended when its rounds did not end it
        # Held until the turn is recorded: a memory write of this conversation lands before or after it.
        async with self.write_gate.turn(turn.key):
            try:
                async with asyncio.timeout(timeout) as deadline:
                    offer = self._offer(turn, emit)
                    progress = self.rounds.begin(turn, offer)
                    outcome = await run_attempts(self.planner, self.rounds, turn, offer, progress, attempts, emit,
                                                 deadline)
            except TimeoutError:
                outcome, status, error = None, TurnStatus.TIMED_OUT, f"the turn did not finish within {timeout:g} s"
            except ModelError as exc:
                outcome, status, error = None, TurnStatus.FAILED, str(exc)
            except asyncio.CancelledError:
                outcome, status, error = None, TurnStatus.CANCELLED, "the turn was cancelled"
                raise
            except Exception as exc:  # noqa: BLE001 - a bug or a store failure: the turn fails, the hint is still recorded
                # The type only: a traceback's messages may quote player text.
                log.error("turn failed with %s", type(exc).__name__)
                outcome, status, error = None, TurnStatus.FAILED, f"internal error ({type(exc).__name__})"
            finally:
                if outcome is None:  # what the rounds streamed before the turn was cut short
                    outcome = progress.outcome(status, error) if progress is not None else RoundsOutcome(status, error)
                outcome = await self._finish(turn, attempts, outcome)
        memory_pass = None
        if outcome.status.completed:
            memory_pass = self._start_memory_pass(turn)
            if turn.memory_stays is not None:
                self.block_pace.turn_ended(turn.conversation, time.monotonic())
            if offer is not None and attempts.plan is not None:
                self.next_turn.prepare(turn, offer, attempts.plan, outcome, memory_pass)
        waits = memory_pass is not None and turn.request.wait_memory_write
        memory_write = None
        if waits and not streamed:
            assert memory_pass is not None
            memory_write = await asyncio.shield(memory_pass)  # a cancelled caller leaves the pass running
        result = task_result(turn, outcome, attempts, memory_write=memory_write,
                             memory_write_pending=memory_pass is not None and not memory_pass.done())
        await emit(FinalEvent(result))
        if waits and streamed:
            assert memory_pass is not None
            await emit(MemoryWriteEvent(await asyncio.shield(memory_pass)))
        return result

    async def _finish(self, turn: TurnInput, attempts: Attempts, outcome: RoundsOutcome) -> RoundsOutcome:
        """Record the turn once; shielded so a second cancel cannot skip it. A turn whose record failed is FAILED."""
        recorded = await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(self._record, turn, attempts,
                                                                                  outcome)))
        log.info(
            "turn ended: status=%s model_calls=%d tool_rounds=%d overflow_retries=%d text_chars=%d duration=%.2fs",
            recorded.status.name, outcome.usage.model_calls, len(outcome.rounds), attempts.overflow_retries,
            len(outcome.text), time.perf_counter() - turn.started,
        )
        return recorded

    def _start_memory_pass(self, turn: TurnInput) -> asyncio.Future[MemoryPassOutcome] | None:
        """Writer design: the memory decision on this line, queued behind player turns (turns/writer/passes.py).

        A line with no statement about the player is decided here, without the model (a finished future).
        """
        if self._settings.memory_design is not MemoryDesign.WRITER or not turn.config.use_memory_tool:
            return None
        key = turn.key
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

    def _record(self, turn: TurnInput, attempts: Attempts, outcome: RoundsOutcome) -> RoundsOutcome:
        """Save the turn into its history (the hint alone when it did not complete) and commit its history's cut."""
        completed = outcome.status.completed
        try:
            if turn.records_history:
                record = TurnRecord(turn.request.hint, outcome.rounds, outcome.text if completed else None)
                record_turn(turn.store, turn.role_id, record, turn.config.tool_result_memory,
                            persist=turn.config.persist_chat_history)
            prepared = attempts.prepared
            if completed and prepared is not None:
                prepared.commit()  # the rolling summary only after a successful turn
                if prepared.fold is not None:  # stored now: the next turn folds from it
                    self.staged_folds.discard(turn.conversation, prepared.fold)
                self.compaction_stats.count_turn(prepared.cut_report)
        except Exception as exc:  # noqa: BLE001 - a store failure: the turn ends FAILED, never acknowledged unsaved
            # The player may have seen the reply streamed, but a turn the history does not hold is not acknowledged:
            # the client learns it was not saved and can say the line again (the hint alone may have been kept).
            log.warning("recording the turn failed (%s)", type(exc).__name__)
            if completed:
                return dataclasses.replace(outcome, status=TurnStatus.FAILED, error=f"the turn could not be saved "
                                           f"({type(exc).__name__}): its reply is not in the history")
        return outcome

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
