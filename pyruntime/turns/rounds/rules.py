"""The tool loop's rules (contract §7): which tools are offered, how one call runs, when the loop ends.

`ToolExecutor` runs the calls of one model round: it repairs the case of a tool name (with a
log line), rejects an unknown tool or an exact repeat of the previous call with an explanatory
result, validates arguments against the tool's pydantic model before running it, and turns every
problem into a failure result for the model. `LoopGuard` ends the loop after 3 consecutive failing
rounds or at the roundtrip limit, and says why (the turn's `error`; its text when the model has nothing to say).
Model I/O lives in turns/rounds/loop.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from pyruntime.errors import InvalidArgumentError
from pyruntime.history.messages import clip_marked, one_line
from pyruntime.memory import MEMORY_TOOL_NAME, MemoryTool, memory_tool_definition, parse_memory_tool_arguments
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.model.client.types import ToolCall
from pyruntime.turns.rounds.modes import FORMAT_EXAMPLE_REFUSAL, ToolCallMode, copies_format_example
from pyruntime.turns.rounds.registry import RegisteredTool, ToolContext, ToolOutput

log = logging.getLogger("pyruntime.turns")

MAX_FAILING_ROUNDS = 3
FAILURE_DETAIL_CHARS = 200  # of the last failure, quoted in the loop-ended reply


class OfferedTool(Protocol):
    """A tool the model may call in this turn."""

    name: str

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool dict."""
        ...

    async def run(self, call: ToolCall, context: ToolContext) -> CallOutcome:
        """Validate and execute one call."""
        ...


@dataclass(frozen=True)
class CallOutcome:
    """What one call gave back: `content` goes to the model, `summary` is its one-line gist.

    `result_needed` is False for a call the model does not have to see the result of to answer
    (a successful memory mutation: its result only says it was stored; a refused copy of the format
    example: nothing was stored and there is nothing to fix).
    """

    success: bool
    content: str
    summary: str
    result_needed: bool = True


class MemoryToolAdapter:
    """The `memory` tool of one key, as an offered tool."""

    name = MEMORY_TOOL_NAME

    def __init__(self, tool: MemoryTool, default_action: MemoryToolAction, player_text: str | None = None) -> None:
        """Wrap a `MemoryTool` bound to the turn's key; `player_text` (the player's message) enables the
        format-example guard."""
        self._tool = tool
        self._default_action = default_action
        self._player_text = player_text

    def definition(self) -> dict[str, Any]:
        """The memory tool's definition with the role's default action."""
        return memory_tool_definition(self._default_action)

    async def run(self, call: ToolCall, context: ToolContext) -> CallOutcome:
        """Run the call (the tool repairs and validates its own arguments); the store I/O runs in a thread."""
        if self._player_text is not None and copies_format_example(call.arguments, self._player_text):
            # A small model pastes the contract's example after a plain "hi"; that is never the player's fact.
            # The refusal is final: the round's reply still answers (asking again makes SmolLM2 paste it again).
            return CallOutcome(False, FORMAT_EXAMPLE_REFUSAL, "copied the format example: nothing stored", False)
        raw: Any = call.parsed_arguments if call.parsed_arguments is not None else call.arguments
        result = await asyncio.to_thread(self._tool.execute, raw)
        needed = not result.success or _memory_action(raw) == "read"
        return CallOutcome(result.success, result.to_json(), result.message or result.error or "", needed)


def _memory_action(raw: Any) -> str:
    """The (repaired) action of a memory call, "" when the arguments do not parse."""
    try:
        return parse_memory_tool_arguments(raw).action
    except (InvalidArgumentError, RecursionError):
        return ""


class RegisteredToolAdapter:
    """A game's registered tool, as an offered tool: arguments validated by its pydantic model first."""

    def __init__(self, tool: RegisteredTool) -> None:
        """Wrap a registered tool."""
        self._tool = tool
        self.name = tool.name

    def definition(self) -> dict[str, Any]:
        """The tool's function definition."""
        return self._tool.definition()

    async def run(self, call: ToolCall, context: ToolContext) -> CallOutcome:
        """Validate, then run the handler; a validation error is the result the model gets."""
        if call.parsed_arguments is None:
            text = f"invalid arguments for tool '{self.name}': {call.arguments_error}"
            return CallOutcome(False, text, text)
        try:
            args = self._tool.args_model.model_validate(call.parsed_arguments)
        except ValidationError as exc:
            text = f"invalid arguments for tool '{self.name}': {validation_summary(exc)}"
            return CallOutcome(False, text, text)
        output: ToolOutput = await self._tool.invoke(args, context)
        return CallOutcome(output.success, output.content, output.content)


def validation_summary(exc: ValidationError) -> str:
    """Pydantic's errors as `field: message` items (no input values echoed)."""
    items = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in error.get("loc", ())) or "arguments"
        items.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(items)


@dataclass(frozen=True)
class ExecutedCall:
    """One call of a round as executed: the (repaired) name, its arguments, the outcome."""

    call_id: str
    name: str
    arguments_json: str
    outcome: CallOutcome


def _signature(name: str, call: ToolCall) -> tuple[str, str]:
    if call.parsed_arguments is not None:
        return name.lower(), json.dumps(call.parsed_arguments, sort_keys=True, ensure_ascii=False)
    return name.lower(), call.arguments.strip()


def offered_tools(
    memory: MemoryToolAdapter | None, registered: Sequence[RegisteredTool], allowed: Sequence[str] | None,
    client: Sequence[OfferedTool] = (),
) -> tuple[list[OfferedTool], list[OfferedTool]]:
    """(every tool of the turn, the ones offered now): memory first, then registered, then the client's game
    tools; `allowed` filters case-insensitively (None = all, empty = none)."""
    role_tools: list[OfferedTool] = ([memory] if memory is not None else []) + [
        RegisteredToolAdapter(t) for t in registered
    ] + list(client)
    if allowed is None:
        return role_tools, list(role_tools)
    wanted = {n.strip().lower() for n in allowed}
    return role_tools, [t for t in role_tools if t.name.lower() in wanted]


class ToolExecutor:
    """Runs the calls of each round against the offered tools."""

    def __init__(self, tools: Sequence[OfferedTool], context: ToolContext) -> None:
        """Tools offered this turn and the context handlers get."""
        self._tools: Mapping[str, OfferedTool] = {t.name: t for t in tools}
        self._by_lower = {t.name.lower(): t for t in tools}
        self._context = context
        self._previous: tuple[str, str] | None = None
        self._previous_succeeded = False

    def resolve(self, name: str, *, log_repair: bool = True) -> OfferedTool | None:
        """The tool for `name`: exact, else case-insensitive (logged as a repair), else None."""
        tool = self._tools.get(name)
        if tool is not None:
            return tool
        tool = self._by_lower.get(name.strip().lower())
        if tool is not None and log_repair:
            log.info("tool call: repaired the case of a tool name (%d chars)", len(name))
        return tool

    async def run_call(self, call: ToolCall) -> ExecutedCall:
        """Execute one call; every problem becomes a failure outcome, never an exception."""
        tool = self.resolve(call.name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            text = f"unknown tool '{clip_marked(call.name, 64)[0]}'. Available tools: {available}"
            return ExecutedCall(call.id, call.name, call.arguments, CallOutcome(False, text, text))
        signature = _signature(tool.name, call)
        if signature == self._previous:
            text = (
                f"this call repeats your previous call exactly (tool '{tool.name}', same arguments), so it was not "
                "run again. Use the earlier result, or do something different."
            )
            # The model already has a successful call's result: a structured reply that answers beside the
            # repeat settles the round (small models repeat a call they are done with rather than stop).
            return ExecutedCall(call.id, tool.name, call.arguments,
                                CallOutcome(False, text, text, result_needed=not self._previous_succeeded))
        self._previous = signature
        outcome = await tool.run(call, self._context)
        self._previous_succeeded = outcome.success
        return ExecutedCall(call.id, tool.name, call.arguments, outcome)


def reply_settles_round(mode: ToolCallMode, reply_text: str, calls: Sequence[ExecutedCall]) -> bool:
    """True when a structured reply already answers and its calls need no second model round.

    A structured reply carries the answer beside the calls; when none of their results is needed to
    answer (memory stored, a pasted format example refused), asking the model again only costs a
    round trip, and small models then tend to repeat the call instead of stopping.
    """
    return (
        mode is ToolCallMode.STRUCTURED
        and bool(reply_text.strip())
        and bool(calls)
        and all(not c.outcome.result_needed for c in calls)
    )


@dataclass
class LoopGuard:
    """Counts rounds; says when the loop must end and with what message."""

    max_roundtrips: int  # 0 = unlimited
    roundtrips: int = 0
    failing_rounds: int = 0
    last_failure: str = ""

    def limit_reached(self) -> bool:
        """True when no more tool rounds may run."""
        return self.max_roundtrips > 0 and self.roundtrips >= self.max_roundtrips

    def record_round(self, calls: Sequence[ExecutedCall]) -> None:
        """Count a round; a round in which every call failed is a failing round."""
        self.roundtrips += 1
        failures = [c for c in calls if not c.outcome.success]
        if calls and len(failures) == len(calls):
            self.failing_rounds += 1
            self.last_failure = failures[-1].outcome.summary
        else:
            self.failing_rounds = 0

    def too_many_failures(self) -> bool:
        """True after 3 consecutive failing rounds."""
        return self.failing_rounds >= MAX_FAILING_ROUNDS

    def failures_message(self) -> str:
        """The final reply after 3 failing rounds, quoting (at most 200 chars of) the last failure."""
        detail = clip_marked(one_line(self.last_failure), FAILURE_DETAIL_CHARS)[0]
        return f"I stopped using tools: {MAX_FAILING_ROUNDS} tool-call rounds in a row failed. Last error: {detail}"

    def limit_message(self) -> str:
        """The final reply at the roundtrip limit."""
        return (
            f"I stopped using tools: this request reached its limit of {self.max_roundtrips} tool-call "
            f"roundtrip(s) before finishing."
        )
