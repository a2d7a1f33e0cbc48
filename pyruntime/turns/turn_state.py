"""The state of one running turn (contract §7, docs/contract.md): what it was asked, sent, streamed, counted.

`TurnState` is the one mutable thing a turn carries through its rooms: the orchestrator (turns/orchestrator.py)
starts and records it, the request planner (turns/planning/planner.py) fills in its history and cut report, the
tool rounds (turns/rounds/loop.py) its text, calls and usage; `result()` is the `TaskResult` it ends with.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyruntime.history import CutReport, PreparedHistory
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.turns.events import TaskResult, ToolCallEvent, ToolResultEvent, TurnEvent, TurnStatus, TurnUsage
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.rounds.modes import ToolCallMode
from pyruntime.turns.rounds.rules import ExecutedCall
from pyruntime.turns.writer.passes import MemoryPassOutcome

Emit = Callable[[TurnEvent], Awaitable[None]]


async def discard(event: TurnEvent) -> None:
    """An `Emit` for a turn nobody streams (`run_task`)."""
    return None


@dataclass(frozen=True)
class PromptParts:
    """What a turn's requests share, whatever its history: the system prompt, tool availability, native schemas."""

    system_prompt: str
    availability: str
    tools_sent: list[Mapping[str, Any]] | None


@dataclass
class TurnState:
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
    parts: PromptParts | None = None
    sent: list[dict[str, Any]] | None = None  # the request before any tool round, as last prepared (prewarm)
    predicted: bool = False  # the next turn as prepared between turns (nothing stored; its fold is kept)
    memory_stays: bool | None = None  # memory-last: the block stays where it was sent (turns/between/block_pace.py)
    memory_seen: int = 0  # (a prediction) the memory version it planned the blocks with
    head_memory_version: int = 0  # the memory version the head of the fold it sends was evaluated with (0: now)
    memory_write_pending: bool = False
    memory_write: MemoryPassOutcome | None = None

    @property
    def role_id(self) -> str:
        """The role this turn runs as."""
        return self.request.role_id

    @property
    def records_history(self) -> bool:
        """Whether the turn is recorded into the chat history."""
        return self.config.with_chat_history

    def output_cap(self) -> int:
        """Tokens of visible reply per model round: the request's, else the role's (always set)."""
        return self.request.max_output_tokens or self.config.effective_max_output_tokens

    def max_tokens(self) -> int:
        """`max_tokens` of a model request: the visible cap plus room for tool calls when tools are offered."""
        return self.output_cap() + self.tool_allowance

    def result(self) -> TaskResult:
        """The turn's result as it stands."""
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
