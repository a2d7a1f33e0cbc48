"""The memory writer pass: after a reply, one grammar-constrained model call decides what to keep.

The call waits behind player turns in the model queue (`Priority.BACKGROUND`), so a reply is never
delayed by the pass of the line before; the edit goes through the `memory` tool (atomic, durable,
versioned, size-limited like a call from the model). `MemoryPasses` keeps the passes still running:
a chat awaits its turn's pass to show what was stored; `serve` drains them before it stops.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryTool
from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.errors import ModelError
from pyruntime.model.queue import ModelRequestQueue, Priority
from pyruntime.turns.memory_writer import (
    WRITER_MAX_TOKENS,
    MemoryEdit,
    WriterDecision,
    parse_decision,
    plan_edit,
    writer_messages,
    worth_asking,
    writer_schema,
)

log = logging.getLogger("pyruntime.turns")

DRAIN_TIMEOUT_S = 60.0
KEPT_OUTCOMES = 256  # a server nobody collects from keeps only the newest outcomes (bounded memory)


@dataclass(frozen=True)
class MemoryPassOutcome:
    """What one pass did: `stored` (the line written, "" when none), `replaced` (the old line), `reason`."""

    role_id: str
    stored: str = ""
    replaced: str | None = None
    reason: str = ""
    model_calls: int = 0

    def summary(self) -> str:
        """One compact line for a player: `stored: …`, `replaced: … -> …` or `nothing stored (why)`."""
        if self.stored and self.replaced is not None:
            return f"replaced: {self.replaced} -> {self.stored}"
        if self.stored:
            return f"stored: {self.stored}"
        return f"nothing stored ({self.reason})" if self.reason else "nothing stored"


async def run_memory_pass(
    client: OpenAICompatClient, queue: ModelRequestQueue, tool: MemoryTool, role_id: str, player_text: str,
    *, seed: int | None = None,
) -> MemoryPassOutcome:
    """Decide what the player's line gives to keep and apply it with `tool`; never raises for a bad model reply."""
    if not worth_asking(player_text):
        return MemoryPassOutcome(role_id, reason="no statement about the player")
    extra = {"seed": seed} if seed is not None else None
    # The edit is planned and applied inside the slot too: passes of one key never interleave.
    async with queue.slot(Priority.BACKGROUND):
        completion = await client.chat(
            writer_messages(player_text), temperature=0.0, max_tokens=WRITER_MAX_TOKENS,
            response_format={"type": "json_object", "schema": writer_schema(player_text)}, extra=extra,
        )
        try:
            decision = parse_decision(completion.text)
        except InvalidArgumentError as exc:
            return MemoryPassOutcome(role_id, reason=str(exc), model_calls=1)
        return await asyncio.to_thread(apply_decision, tool, role_id, decision, player_text)


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

    def start(self, pass_coro: "asyncio.Future[MemoryPassOutcome] | object", role_id: str) -> None:
        """Run a pass in the background; its outcome is kept for `collect`/`drain`."""
        task: asyncio.Task[MemoryPassOutcome] = asyncio.ensure_future(pass_coro)  # type: ignore[arg-type]
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

    async def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> list[MemoryPassOutcome]:
        """Wait (up to `timeout` s) for the running passes; returns and forgets every outcome so far."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)
            await asyncio.sleep(0)  # let the done callbacks run
        outcomes = list(self._done)
        self._done.clear()
        return outcomes
