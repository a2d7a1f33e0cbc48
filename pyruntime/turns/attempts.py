"""The attempts of one turn (contract §5, §7): plan the request, stream its cut report, run the tool rounds; on a
context overflow, plan again with a smaller history. And the `TaskResult` the turn ends with.

`run_attempts` is the turn's pipeline: `RequestPlanner.draft` → `RequestPlanner.as_sent` (a `TurnPlan`) →
`ToolRounds.run` (a `RoundsOutcome`). What it keeps of the attempts (`Attempts`: the history last prepared, the
retries, the report last streamed) is written by it alone and read by the orchestrator once the turn has ended,
also when a timeout, a cancel or a failure ended it midway (the result still reports the cut, the record commits it).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from pyruntime.history import CutReport, PreparedHistory
from pyruntime.history.budget import MAX_OVERFLOW_RETRIES
from pyruntime.model.client.errors import ContextOverflowError
from pyruntime.turns.events import CutReportEvent, TaskResult
from pyruntime.turns.planning.planner import RequestPlanner
from pyruntime.turns.rounds.loop import ToolRounds
from pyruntime.turns.rounds.progress import TurnProgress
from pyruntime.turns.turn import Emit, RoundsOutcome, TurnInput, TurnOffer, TurnPlan
from pyruntime.turns.writer.passes import MemoryPassOutcome

log = logging.getLogger("pyruntime.turns")


@dataclass
class Attempts:
    """What the attempts of one turn have planned so far; see the module docstring."""

    prepared: PreparedHistory | None = None  # the history last prepared (its cut report is the turn's)
    plan: TurnPlan | None = None  # the last attempt's request as sent
    overflow_retries: int = 0
    report_sent: CutReport | None = None  # the cut report last streamed (one per attempt)


async def run_attempts(planner: RequestPlanner, rounds: ToolRounds, turn: TurnInput, offer: TurnOffer,
                       progress: TurnProgress, attempts: Attempts, emit: Emit,
                       deadline: asyncio.Timeout | None = None) -> RoundsOutcome:
    """Plan and run the turn's request until the model rounds end it; a context overflow retries with less history."""
    while True:
        retries = attempts.overflow_retries
        draft = await planner.draft(turn, offer, overflow_retries=retries)
        if draft.prepared is not None:
            attempts.prepared = draft.prepared
        plan = attempts.plan = await planner.as_sent(turn, offer, draft, overflow_retries=retries)
        if plan.prepared is not None:
            attempts.prepared = plan.prepared
        report = plan.cut_report
        if report is not None and report is not attempts.report_sent:
            # Once per attempt, for the history as sent (after any refit to the context): after an
            # overflow retry the next one describes the request actually sent, as the final result does.
            report.overflow_retries = retries
            attempts.report_sent = report
            await emit(CutReportEvent(report))
        try:
            return await rounds.run(turn, offer, plan, progress, emit, deadline)
        except ContextOverflowError:
            if retries >= MAX_OVERFLOW_RETRIES:
                raise
            attempts.overflow_retries += 1
            log.info("context overflow: retry %d of %d with a smaller history budget",
                     attempts.overflow_retries, MAX_OVERFLOW_RETRIES)


def task_result(turn: TurnInput, outcome: RoundsOutcome, attempts: Attempts, *, memory_write_pending: bool = False,
                memory_write: MemoryPassOutcome | None = None) -> TaskResult:
    """The turn's result: what its rounds said and did, the cut of its history, its memory write."""
    report = attempts.prepared.cut_report if attempts.prepared is not None else None
    if report is not None:
        report.overflow_retries = attempts.overflow_retries
    return TaskResult(
        status=outcome.status,
        text=outcome.text,
        error=outcome.error,
        tool_calls=outcome.tool_calls,
        tool_results=outcome.tool_results,
        cut_report=report,
        usage=outcome.usage,
        trace_id=turn.request.trace_id,
        memory_write_pending=memory_write_pending,
        memory_write=memory_write,
    )
