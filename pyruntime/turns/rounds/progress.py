"""`TurnProgress`: what the model rounds of one turn have streamed so far, the one mutable thing a turn carries.

The tool rounds (rounds/loop.py) add to it as the model decodes and the tools run; it outlives the turn's overflow
retries (the calls already run stay run), and a turn that a timeout, a cancel or a model failure cuts short still
reports and records what it holds. `outcome` is its frozen `RoundsOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyruntime.turns.events import ToolCallEvent, ToolResultEvent, TurnStatus, TurnUsage
from pyruntime.turns.rounds.rules import ExecutedCall, LoopGuard, ToolExecutor
from pyruntime.turns.turn import RoundsOutcome


@dataclass
class TurnProgress:
    """The text, tool calls and usage of one turn's model rounds as they stream; see the module docstring."""

    executor: ToolExecutor  # runs the calls against the tools offered (it remembers the previous call)
    guard: LoopGuard  # counts rounds and failures against the role's limits
    forced: str | None = None  # a forcing mode holds until a tool call succeeds
    text: list[str] = field(default_factory=list)
    round_has_text: bool = False
    tool_calls: list[ToolCallEvent] = field(default_factory=list)
    tool_results: list[ToolResultEvent] = field(default_factory=list)
    rounds: list[list[ExecutedCall]] = field(default_factory=list)
    loop_messages: list[dict[str, Any]] = field(default_factory=list)  # the rounds replayed to the model
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    model_calls: int = 0
    queue_owner: int | None = None  # the turn's place in the model queue, from its first model call

    def said(self) -> str:
        """The visible text so far."""
        return "".join(self.text)

    def outcome(self, status: TurnStatus, error: str = "") -> RoundsOutcome:
        """The rounds as they stand, ended with `status`."""
        return RoundsOutcome(
            status=status,
            error=error,
            text=self.said(),
            tool_calls=tuple(self.tool_calls),
            tool_results=tuple(self.tool_results),
            rounds=tuple(tuple(r) for r in self.rounds),
            usage=TurnUsage(self.prompt_tokens, self.completion_tokens, self.model_calls, self.cached_prompt_tokens),
        )
