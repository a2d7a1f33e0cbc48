"""The values one turn flows through (contract §7, docs/contract.md), each made by one stage and read by the next.

    AiTaskRequest ──start──▶ TurnInput ──offer──▶ TurnOffer ──plan──▶ TurnPlan ──rounds──▶ RoundsOutcome ──▶ TaskResult

`TurnInput` is what the turn was asked, resolved (the role's config, its store, its conversation); `TurnOffer` what
every request of the turn carries whatever its history (the system prompt, the tools offered and how);
`TurnPlan` one attempt's request as sent, with the history it holds (planning/planner.py); `RoundsOutcome` what the
model rounds said and did (rounds/loop.py). All are frozen: a stage reads what it is given and returns a new value.
The one mutable thing of a turn is its `TurnProgress` (rounds/progress.py): what the streaming of the rounds has
sent so far, which a turn cut short by a timeout or a cancel still reports and records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyruntime.history import CutReport, PreparedHistory
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.turns.events import ToolCallEvent, ToolResultEvent, TurnEvent, TurnStatus, TurnUsage
from pyruntime.turns.planning.context import RequestFit
from pyruntime.turns.planning.prompt import TailBlocks
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.rounds.modes import ToolCallMode
from pyruntime.turns.rounds.rules import ExecutedCall, OfferedTool

Emit = Callable[[TurnEvent], Awaitable[None]]


async def discard(event: TurnEvent) -> None:
    """An `Emit` for a turn nobody streams (`run_task`)."""
    return None


@dataclass(frozen=True)
class TurnInput:
    """What a turn was asked, resolved: the request, the role's config for it, its store and its conversation."""

    request: AiTaskRequest
    config: RoleMemoryConfig
    borrowed_history: bool  # a chat-source request's short-term history: never persisted, never summarized
    store: ScopedAgentMemoryStore
    mode: ToolCallMode
    turn_id: str = ""  # names the turn in game-tool calls (SubmitToolResult)
    conversation: str = ""  # the digest of the conversation's storage key (slots, anchors, folds, prewarms)
    memory_stays: bool | None = None  # memory-last: the block stays where it was sent (turns/between/block_pace.py)
    predicted: bool = False  # the next turn as prepared between turns (nothing stored; its fold is kept)
    started: float = 0.0  # `time.perf_counter()` when the turn started

    @property
    def role_id(self) -> str:
        """The role this turn runs as."""
        return self.request.role_id

    @property
    def key(self) -> str:
        """The conversation's storage key."""
        return self.store.key(self.request.role_id)

    @property
    def records_history(self) -> bool:
        """Whether the turn is recorded into the chat history."""
        return self.config.with_chat_history

    def output_cap(self) -> int:
        """Tokens of visible reply per model round: the request's, else the role's (always set)."""
        return self.request.max_output_tokens or self.config.effective_max_output_tokens


@dataclass(frozen=True)
class TurnOffer:
    """What every request of a turn carries, whatever its history: the system prompt and the tools offered."""

    system_prompt: str
    availability: str  # the tool availability block of the tail ("" when every tool is offered)
    tools_sent: list[Mapping[str, Any]] | None  # native mode: the schemas sent as `tools`
    tool_allowance: int = 0  # TOOL_CALL_ALLOWANCE_TOKENS once tools are offered
    offered: tuple[OfferedTool, ...] = ()
    offered_defs: tuple[dict[str, Any], ...] = ()
    forced: str | None = None  # the tool the request forces (or "required"), until a call succeeds

    def max_tokens(self, turn: TurnInput) -> int:
        """`max_tokens` of a model request: the visible cap plus room for tool calls when tools are offered."""
        return turn.output_cap() + self.tool_allowance


@dataclass(frozen=True)
class TurnPlan:
    """One attempt's request as sent: its messages, the history they hold, and the context they fit."""

    messages: list[dict[str, Any]]
    tail: TailBlocks
    fit: RequestFit
    prepared: PreparedHistory | None  # None: a role without chat history
    context_tokens: int  # the context a request of this turn may fill (the model's, or the role's when smaller)

    @property
    def cut_report(self) -> CutReport | None:
        """How the history was cut to fit (None without chat history)."""
        return self.prepared.cut_report if self.prepared is not None else None


@dataclass(frozen=True)
class RoundsOutcome:
    """What the model rounds of a turn said and did, and how they ended."""

    status: TurnStatus
    error: str = ""
    text: str = ""
    tool_calls: tuple[ToolCallEvent, ...] = ()
    tool_results: tuple[ToolResultEvent, ...] = ()
    rounds: tuple[tuple[ExecutedCall, ...], ...] = ()
    usage: TurnUsage = TurnUsage()
