"""The memory writer pass: after a reply, one grammar-constrained model call decides what to keep.

The call waits behind player turns in the model queue (`Priority.BACKGROUND`), so a reply is never
delayed by the pass of the line before; the edit goes through the `memory` tool (atomic, durable,
versioned, size-limited like a call from the model). `MemoryPasses` keeps the passes still running:
a chat awaits its turn's pass to show what was stored; `serve` gives them its grace period when it
stops, then cancels what is left (a pass waiting behind a hung engine must not hold up the stop).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryTool
from pyruntime.model.errors import ModelError
from pyruntime.model.queue import ModelRequestQueue, Priority
from pyruntime.model.seam import ModelClient
from pyruntime.turns.memory_writer import (
    WRITER_MAX_TOKENS,
    MemoryEdit,
    WriterDecision,
    parse_decision,
    plan_edit,
    statements,
    writer_messages,
    writer_schema,
)

log = logging.getLogger("pyruntime.turns")

DRAIN_TIMEOUT_S = 60.0
_CANCEL_S = 2.0  # a cancelled pass ends at its next await: an edit running in a thread finishes first
KEPT_OUTCOMES = 256  # a server nobody collects from keeps only the newest outcomes (bounded memory)


@dataclass(frozen=True)
class MemoryPassOutcome:
    """What one pass did: `stored` (the line written, "" when none), `replaced` (the old line), `reason`."""

    role_id: str
    stored: str = ""
    replaced: str | None = None
    reason: str = ""
    model_calls: int = 0
    more: tuple[MemoryPassOutcome, ...] = ()  # the line's other statements' outcomes (`statements`)

    @classmethod
    def of_line(cls, outcomes: list[MemoryPassOutcome]) -> MemoryPassOutcome:
        """One outcome for a line decided statement by statement: a write first, the others in `more`."""
        ordered = sorted(outcomes, key=lambda o: not o.stored)  # stable: the line's order among writes
        first, rest = ordered[0], tuple(ordered[1:])
        calls = sum(o.model_calls for o in outcomes)
        return cls(first.role_id, first.stored, first.replaced, first.reason, calls, rest) if rest else first

    def summary(self) -> str:
        """One compact line for a player: `stored: …`, `replaced: … -> …` or `nothing stored (why)`."""
        written = [o for o in (self, *self.more) if o.stored]
        if not written:
            return f"nothing stored ({self.reason})" if self.reason else "nothing stored"
        return "; ".join(f"replaced: {o.replaced} -> {o.stored}" if o.replaced is not None else f"stored: {o.stored}"
                         for o in written)


async def run_memory_pass(
    client: ModelClient, queue: ModelRequestQueue, tool: MemoryTool, role_id: str, player_text: str,
    *, seed: int | None = None,
) -> MemoryPassOutcome:
    """Decide what the player's line gives to keep and apply it with `tool`; never raises for a bad model reply.

    A line with several statements ("My name is Alaric and I love horses.") gets one decision each.
    """
    parts = statements(player_text)
    if not parts:
        return MemoryPassOutcome(role_id, reason="no statement about the player")
    extra = {"seed": seed} if seed is not None else None
    outcomes = []
    for part in parts:
        # The edit is planned and applied inside the slot too: two decisions on one key never interleave;
        # player turns may run between the statements of a line.
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
            outcomes.append(await asyncio.to_thread(apply_decision, tool, role_id, decision, part))
    return MemoryPassOutcome.of_line(outcomes)


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
    return MemoryPassOutcome(role_id, stored=edit.line, replaced=edit.old_line, model_calls=1)


class MemoryPasses:
    """The memory passes still running, and the outcomes not yet collected."""

    def __init__(self) -> None:
        """No passes yet."""
        self._running: set[asyncio.Task[MemoryPassOutcome]] = set()
        self._done: collections.deque[MemoryPassOutcome] = collections.deque(maxlen=KEPT_OUTCOMES)

    @property
    def pending(self) -> int:
        """Passes not finished yet."""
        return len(self._running)

    def start(self, pass_coro: Awaitable[MemoryPassOutcome], role_id: str) -> asyncio.Task[MemoryPassOutcome]:
        """Run a pass in the background; its outcome is kept for `collect`/`drain`; returns its task."""
        task = asyncio.ensure_future(pass_coro)
        self._running.add(task)

        def finished(t: asyncio.Task[MemoryPassOutcome]) -> None:
            self._running.discard(t)
            if t.cancelled():
                self._done.append(MemoryPassOutcome(role_id, reason="cancelled"))
            elif t.exception() is not None:
                exc = t.exception()
                # The type only: a model or store message may quote player text.
                log.warning("memory pass failed (%s)", type(exc).__name__)
                why = "the model is unavailable" if isinstance(exc, ModelError) else f"failed ({type(exc).__name__})"
                self._done.append(MemoryPassOutcome(role_id, reason=why))
            else:
                self._done.append(t.result())

        task.add_done_callback(finished)
        return task

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
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace)
        left = set(self._running)
        for task in left:
            task.cancel()
        if left:
            log.info("%d memory pass(es) not finished within the grace period: cancelled", len(left))
            await asyncio.wait(left, timeout=_CANCEL_S)
            await asyncio.sleep(0)
        return await self.drain(0)
