"""The memory writer pass: after a reply, one grammar-constrained model call decides what to keep.

The call waits behind player turns in the model queue (`Priority.BACKGROUND`), so a reply is never
delayed by the pass of the line before; the edit goes through the `memory` tool (atomic, durable,
versioned, size-limited like a call from the model). The edit lands only while no turn of its
conversation runs (`write_gate.ConversationGate`), after the edits of the lines before it, so a
turn's prompt either carries it or the turn ended before it landed.

`MemoryPasses` keeps the passes still running, per conversation and turn (trace id): a chat awaits
its turn's pass to show what was stored; a game waits for a conversation's writes (`wait`, the
WaitMemoryWrites RPC) or is sent each one after its turn's reply; `serve` gives them its grace period
when it stops, then cancels what is left (a pass waiting behind a hung engine must not hold up the stop).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, replace

from pyruntime.aio import finish_or_cancel
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryTool
from pyruntime.model.client.errors import ModelError
from pyruntime.model.client.queue import ModelRequestQueue, Priority
from pyruntime.model.client.seam import ModelClient
from pyruntime.turns.writer.decision import MemoryEdit, plan_edit, statements
from pyruntime.turns.writer.gate import ConversationGate
from pyruntime.turns.writer.prompt import (
    WRITER_MAX_TOKENS,
    WriterDecision,
    parse_decision,
    writer_messages,
    writer_schema,
)

log = logging.getLogger("pyruntime.turns")

DRAIN_TIMEOUT_S = 60.0
_CANCEL_S = 2.0  # a cancelled pass ends at its next await: an edit running in a thread finishes first
KEPT_OUTCOMES = 256  # a server nobody collects from keeps only the newest outcomes (bounded memory)
KEPT_LANDED = 1024  # landed writes a late WaitMemoryWrites(trace_id) still finds (per runtime, newest kept)
NO_STATEMENT = "no statement about the player"


@dataclass(frozen=True)
class MemoryPassOutcome:
    """What one pass did: `stored` (the line written, "" when none), `replaced` (the old line), `reason`."""

    role_id: str
    stored: str = ""
    replaced: str | None = None
    reason: str = ""
    model_calls: int = 0
    more: tuple[MemoryPassOutcome, ...] = ()  # the line's other statements' outcomes (`statements`)
    version: int = 0  # the memory version after this write (0: nothing written)
    trace_id: str = ""  # the turn whose line it decided on

    @property
    def written(self) -> tuple[MemoryPassOutcome, ...]:
        """The outcomes of the line that wrote a line, in order."""
        return tuple(o for o in (self, *self.more) if o.stored)

    @property
    def changed(self) -> bool:
        """True when the memory document changed."""
        return bool(self.written)

    @classmethod
    def of_line(cls, outcomes: list[MemoryPassOutcome]) -> MemoryPassOutcome:
        """One outcome for a line decided statement by statement: a write first, the others in `more`."""
        ordered = sorted(outcomes, key=lambda o: not o.stored)  # stable: the line's order among writes
        first, rest = ordered[0], tuple(ordered[1:])
        calls = sum(o.model_calls for o in outcomes)
        version = max(o.version for o in outcomes)
        return cls(first.role_id, first.stored, first.replaced, first.reason, calls, rest, version) if rest else first

    def summary(self) -> str:
        """One compact line for a player: `stored: …`, `replaced: … -> …` or `nothing stored (why)`."""
        written = self.written
        if not written:
            return f"nothing stored ({self.reason})" if self.reason else "nothing stored"
        return "; ".join(f"replaced: {o.replaced} -> {o.stored}" if o.replaced is not None else f"stored: {o.stored}"
                         for o in written)


async def run_memory_pass(
    client: ModelClient, queue: ModelRequestQueue, tool: MemoryTool, role_id: str, player_text: str,
    *, seed: int | None = None, gate: ConversationGate | None = None, conversation: str = "",
    after: Awaitable[object] | None = None,
) -> MemoryPassOutcome:
    """Decide what the player's line gives to keep and apply it with `tool`; never raises for a bad model reply.

    A line with several statements ("My name is Alaric and I love horses.") gets one decision each.
    With a `gate`, each edit lands only while no turn of `conversation` runs, and not before `after`
    (the pass of the line before) has ended: edits land in the order of the lines.
    """
    parts = statements(player_text)
    if not parts:
        return MemoryPassOutcome(role_id, reason=NO_STATEMENT)
    extra = {"seed": seed} if seed is not None else None
    outcomes = []
    for part in parts:
        async with queue.slot(Priority.BACKGROUND):
            completion = await client.chat(
                writer_messages(part), temperature=0.0, max_tokens=WRITER_MAX_TOKENS,
                response_format={"type": "json_object", "schema": writer_schema(part)}, extra=extra,
            )
        try:
            decision = parse_decision(completion.text)
        except InvalidArgumentError as exc:
            outcomes.append(MemoryPassOutcome(role_id, reason=str(exc), model_calls=1))
            continue
        if after is not None:
            await asyncio.wait({asyncio.ensure_future(after)})  # its failure is its own outcome
            after = None
        # Planned and applied under the gate (not in the model slot: a turn waiting for the model must
        # not block the write it waits for): two edits of one conversation never interleave.
        async with gate.write(conversation) if gate is not None else _nothing():
            outcomes.append(await asyncio.to_thread(apply_decision, tool, role_id, decision, part))
    return MemoryPassOutcome.of_line(outcomes)


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def apply_decision(tool: MemoryTool, role_id: str, decision: WriterDecision, player_text: str) -> MemoryPassOutcome:
    """Plan the edit against the current document and run it through the memory tool."""
    current = tool.execute({"action": "read"})
    if not current.success:
        return MemoryPassOutcome(role_id, reason=current.error or "the memory cannot be read", model_calls=1)
    edit: MemoryEdit = plan_edit(current.memory or "", decision, player_text)
    if not edit.changes:
        return MemoryPassOutcome(role_id, reason=edit.reason, model_calls=1)
    result = tool.execute(edit.tool_arguments())
    if not result.success:
        return MemoryPassOutcome(role_id, reason=result.error or "the memory refused the edit", model_calls=1)
    return MemoryPassOutcome(role_id, stored=edit.line, replaced=edit.old_line, model_calls=1, version=result.version)


class MemoryPasses:
    """The memory passes still running, per conversation and turn, and the outcomes not yet collected.

    `drain` hands every outcome to one collector (the chat, serve's shutdown); `wait` lets any caller
    wait for one conversation's writes (by conversation key, optionally one turn's trace id) and keeps
    the newest landed ones so a caller that asks after the write landed still gets it.
    """

    def __init__(self) -> None:
        """No passes yet."""
        self._running: set[asyncio.Task[MemoryPassOutcome]] = set()
        self._done: collections.deque[MemoryPassOutcome] = collections.deque(maxlen=KEPT_OUTCOMES)
        # conversation -> its running passes, oldest first; (conversation, trace id) -> the pass or its outcome
        self._by_conversation: dict[str, list[asyncio.Task[MemoryPassOutcome]]] = {}
        self._by_turn: collections.OrderedDict[tuple[str, str], asyncio.Future[MemoryPassOutcome]] = (
            collections.OrderedDict())

    @property
    def pending(self) -> int:
        """Passes not finished yet."""
        return len(self._running)

    def last_of(self, conversation: str) -> asyncio.Task[MemoryPassOutcome] | None:
        """The newest pass of the conversation still running (the next pass lands after it)."""
        running = self._by_conversation.get(conversation)
        return running[-1] if running else None

    def start(self, pass_coro: Awaitable[MemoryPassOutcome], role_id: str, *,
              conversation: str = "", trace_id: str = "") -> asyncio.Task[MemoryPassOutcome]:
        """Run a pass in the background; its outcome is kept for `collect`/`drain`/`wait`; returns its task."""
        task: asyncio.Task[MemoryPassOutcome] = asyncio.ensure_future(self._outcome(pass_coro, role_id, trace_id))
        self._running.add(task)
        self._by_conversation.setdefault(conversation, []).append(task)
        if trace_id:
            self._by_turn[(conversation, trace_id)] = task
            while len(self._by_turn) > KEPT_LANDED:
                self._by_turn.popitem(last=False)

        def finished(t: asyncio.Task[MemoryPassOutcome]) -> None:
            self._running.discard(t)
            running = self._by_conversation.get(conversation, [])
            if t in running:
                running.remove(t)
            if not running:
                self._by_conversation.pop(conversation, None)
            # Cancelled before it ever ran (a stop): no outcome of its own to take.
            self._done.append(MemoryPassOutcome(role_id, reason="cancelled") if t.cancelled() else t.result())

        task.add_done_callback(finished)
        return task

    def record(self, outcome: MemoryPassOutcome, *, conversation: str = "") -> asyncio.Future[MemoryPassOutcome]:
        """An outcome decided without a model call (a line with no statement): collected and waited for like a
        pass's; returns it as a finished future."""
        future: asyncio.Future[MemoryPassOutcome] = asyncio.get_running_loop().create_future()
        future.set_result(outcome)
        self._done.append(outcome)
        if outcome.trace_id:
            self._by_turn[(conversation, outcome.trace_id)] = future
            while len(self._by_turn) > KEPT_LANDED:
                self._by_turn.popitem(last=False)
        return future

    @staticmethod
    async def _outcome(pass_coro: Awaitable[MemoryPassOutcome], role_id: str, trace_id: str) -> MemoryPassOutcome:
        """The pass's outcome with its trace id; a failure or a cancel is an outcome too (never raises)."""
        try:
            outcome = await pass_coro
        except asyncio.CancelledError:
            outcome = MemoryPassOutcome(role_id, reason="cancelled")
        except Exception as exc:  # noqa: BLE001 - a pass failure is reported, never raised into a turn
            # The type only: a model or store message may quote player text.
            log.warning("memory pass failed (%s)", type(exc).__name__)
            why = "the model is unavailable" if isinstance(exc, ModelError) else f"failed ({type(exc).__name__})"
            outcome = MemoryPassOutcome(role_id, reason=why)
        return replace(outcome, trace_id=trace_id) if trace_id else outcome

    async def wait(self, conversation: str, trace_id: str = "",
                   timeout: float = DRAIN_TIMEOUT_S) -> tuple[list[MemoryPassOutcome], bool]:
        """(The outcomes waited for that landed, oldest first; whether some were still running at the timeout).

        With `trace_id`: that turn's write only (also when it already landed, while it is among the
        newest `KEPT_LANDED`); none known: ([], False). Without: the conversation's passes running now.
        Nothing is collected: `drain` still hands every outcome to its collector.
        """
        if trace_id:
            task = self._by_turn.get((conversation, trace_id))
            tasks = [task] if task is not None else []
        else:
            tasks = list(self._by_conversation.get(conversation, ()))
        if not tasks:
            return [], False
        deadline = time.monotonic() + max(0.0, timeout)
        pending = [t for t in tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        return [t.result() for t in tasks if t.done()], any(not t.done() for t in tasks)

    async def forget(self, conversation: str) -> None:
        """Stop the conversation's running passes (its saves are being erased) and drop its landed outcomes."""
        tasks = list(self._by_conversation.get(conversation, ()))
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CANCEL_S)
        for landed in [k for k in self._by_turn if k[0] == conversation]:
            del self._by_turn[landed]

    async def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> list[MemoryPassOutcome]:
        """Wait (up to `timeout` s) for the running passes; returns and forgets every outcome so far."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)
            await asyncio.sleep(0)  # let the done callbacks run
        outcomes = list(self._done)
        self._done.clear()
        return outcomes

    async def stop(self, grace: float) -> list[MemoryPassOutcome]:
        """Shutdown: the running passes get `grace` s to finish, the rest are cancelled (an edit is applied
        whole or not at all); returns every outcome so far."""
        cancelled = await finish_or_cancel(self._running, grace, _CANCEL_S)
        if cancelled:
            log.info("%d memory pass(es) not finished within the grace period: cancelled", cancelled)
            await asyncio.sleep(0)
        return await self.drain(0)
