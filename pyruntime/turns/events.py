"""The events a turn streams and its final `TaskResult` (mirrors `coreai.v1.TurnEvent` / `RunTaskResponse`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from coreai.v1 import orchestrator_pb2
from pyruntime.history.cut_report import CutReport
from pyruntime.turns.writer.passes import MemoryPassOutcome


class TurnStatus(enum.IntEnum):
    """How a turn ended."""

    OK = orchestrator_pb2.TURN_STATUS_OK
    FAILED = orchestrator_pb2.TURN_STATUS_FAILED
    TIMED_OUT = orchestrator_pb2.TURN_STATUS_TIMED_OUT
    CANCELLED = orchestrator_pb2.TURN_STATUS_CANCELLED
    TOOL_LOOP_ENDED = orchestrator_pb2.TURN_STATUS_TOOL_LOOP_ENDED  # 3 failing rounds or the roundtrip limit

    @property
    def completed(self) -> bool:
        """True when the turn produced a final reply (OK, or a tool loop ended with a clear message)."""
        return self in (TurnStatus.OK, TurnStatus.TOOL_LOOP_ENDED)


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of the visible reply; the pieces of a turn concatenate to `TaskResult.text`."""

    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    """The model called a tool (name as executed, after repair)."""

    call_id: str
    name: str
    arguments_json: str


@dataclass(frozen=True)
class ToolResultEvent:
    """What a tool call gave back to the model."""

    call_id: str
    name: str
    success: bool
    content: str


@dataclass(frozen=True)
class ClientToolCallEvent:
    """A game tool to run on the client: answer with `SubmitToolResult(turn_id, call_id, ...)` within timeout_ms.

    Follows the `ToolCallEvent` of the same call id; `arguments_json` is valid against the tool's schema.
    """

    turn_id: str
    call_id: str
    name: str
    arguments_json: str
    timeout_ms: int


@dataclass(frozen=True)
class CutReportEvent:
    """What of the stored history did not reach the model verbatim (sent before each attempt's first model call;
    after a context-overflow retry another one describes the request actually sent, as the final result does)."""

    report: CutReport


@dataclass(frozen=True)
class TurnUsage:
    """Token counts over every model call of the turn (0 when the server did not report them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, reused from the server's prompt cache

    @property
    def evaluated_prompt_tokens(self) -> int:
        """Prompt tokens the model had to evaluate (not reused from its cache): what a turn's latency follows."""
        return self.prompt_tokens - self.cached_prompt_tokens


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one turn."""

    status: TurnStatus
    text: str
    error: str = ""
    tool_calls: tuple[ToolCallEvent, ...] = ()
    tool_results: tuple[ToolResultEvent, ...] = ()
    cut_report: CutReport | None = None
    usage: TurnUsage = TurnUsage()
    trace_id: str = ""
    # Writer design: the turn's memory write had not landed when the turn returned (it lands after
    # any turn of the conversation that started meanwhile; `AiOrchestrator.wait_memory_writes`).
    memory_write_pending: bool = False
    memory_write: MemoryPassOutcome | None = None  # the write, when the turn waited for it

    @property
    def ok(self) -> bool:
        """True for status OK."""
        return self.status is TurnStatus.OK


@dataclass(frozen=True)
class FinalEvent:
    """The last event of every turn (but a `MemoryWriteEvent` the request waits for)."""

    result: TaskResult


@dataclass(frozen=True)
class MemoryWriteEvent:
    """The turn's memory write landed (writer design; after the `FinalEvent`, when the request waits for it)."""

    write: MemoryPassOutcome


TurnEvent: TypeAlias = (TextDeltaEvent | ToolCallEvent | ToolResultEvent | CutReportEvent | FinalEvent
                         | ClientToolCallEvent | MemoryWriteEvent)
