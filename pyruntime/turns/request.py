"""`AiTaskRequest`: what a game asks for in one turn of a role (contract §7), and what its tool choice means.

`forced_tool` reads a request's `forced_tool_mode` against the tools it offers; `tool_availability` says which
tools the request offers, for the tail block of that name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import DEFAULT_TURN_ROLE, EMPTY_SCOPE, AgentMemoryScope
from pyruntime.turns.rounds.client_tools import ClientToolSpec

if TYPE_CHECKING:
    from pyruntime.turns.rounds.rules import OfferedTool

CHAT_SOURCE_TAG = "Chat"

FORCED_TOOL_AUTO = ""
FORCED_TOOL_NONE = "none"
FORCED_TOOL_REQUIRED = "required"


@dataclass(frozen=True)
class AiTaskRequest:
    """One turn of a role for one scope.

    `allowed_tool_names`: None = every tool of the role, empty = none. `forced_tool_mode`:
    "" (the model decides), "none" (no tools this request), "required" (the model must call a tool),
    or a tool name (the model must call that tool); a forcing mode holds until a tool call succeeds.
    `timeout` is in seconds (None = the orchestrator's default). `client_tools`: game tools the
    caller executes (`stream_task` only); `client_tool_timeout`: seconds one call of them waits for
    its result (None = the orchestrator's default). `wait_memory_write` (writer design): `run_task`
    returns once this turn's memory write landed, with it in the result; `stream_task` sends its
    `MemoryWriteEvent` after the `FinalEvent`. Otherwise the turn returns at once and its result's
    `memory_write_pending` says whether a write is still to come.
    """

    hint: str = ""
    role_id: str = DEFAULT_TURN_ROLE
    source_tag: str = ""
    trace_id: str = ""
    scope: AgentMemoryScope = EMPTY_SCOPE
    actor: str | None = None
    request_system_instructions: str = ""
    allowed_tool_names: tuple[str, ...] | None = None
    forced_tool_mode: str = FORCED_TOOL_AUTO
    max_output_tokens: int | None = None
    world_state: str = ""
    temperature: float | None = None
    timeout: float | None = None
    extra: dict[str, object] = field(default_factory=dict)  # sent as-is in the model request (e.g. seed)
    client_tools: tuple[ClientToolSpec, ...] = ()
    client_tool_timeout: float | None = None
    wait_memory_write: bool = False

    def __post_init__(self) -> None:
        for name in ("hint", "source_tag", "trace_id", "request_system_instructions", "world_state",
                     "forced_tool_mode"):
            if not isinstance(getattr(self, name), str):
                raise InvalidArgumentError(f"{name} must be a string")
        if not isinstance(self.role_id, str | None):
            raise InvalidArgumentError("role_id must be a string")
        # A turn without a role runs as Creator (contract §4); role ids are trimmed.
        object.__setattr__(self, "role_id", (self.role_id or "").strip() or DEFAULT_TURN_ROLE)
        object.__setattr__(self, "forced_tool_mode", self.forced_tool_mode.strip())
        if self.scope is None:
            object.__setattr__(self, "scope", EMPTY_SCOPE)
        if not isinstance(self.scope, AgentMemoryScope):
            raise InvalidArgumentError("scope must be an AgentMemoryScope")
        if self.actor is not None and not isinstance(self.actor, str):
            raise InvalidArgumentError("actor must be a string or None")
        if self.allowed_tool_names is not None:
            object.__setattr__(self, "allowed_tool_names", _names(self.allowed_tool_names))
        if self.max_output_tokens is not None and (
            isinstance(self.max_output_tokens, bool) or not isinstance(self.max_output_tokens, int)
            or self.max_output_tokens < 1
        ):
            raise InvalidArgumentError("max_output_tokens must be a positive integer or None")
        if self.temperature is not None and (
            isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float)
            or math.isnan(self.temperature) or self.temperature < 0
        ):
            raise InvalidArgumentError("temperature must be a non-negative number or None")
        if self.timeout is not None and (
            isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float)
            or math.isnan(self.timeout) or self.timeout <= 0
        ):
            raise InvalidArgumentError("timeout must be a positive number of seconds or None")
        if not isinstance(self.wait_memory_write, bool):
            raise InvalidArgumentError("wait_memory_write must be a bool")
        if not isinstance(self.extra, dict):
            raise InvalidArgumentError("extra must be a dict")
        object.__setattr__(self, "client_tools", tuple(self.client_tools or ()))
        if not all(isinstance(t, ClientToolSpec) for t in self.client_tools):
            raise InvalidArgumentError("client_tools must be ClientToolSpec values (see client_tool_spec)")
        if self.client_tool_timeout is not None and (
            isinstance(self.client_tool_timeout, bool) or not isinstance(self.client_tool_timeout, int | float)
            or math.isnan(self.client_tool_timeout) or self.client_tool_timeout <= 0
        ):
            raise InvalidArgumentError("client_tool_timeout must be a positive number of seconds or None")

    @property
    def is_chat_source(self) -> bool:
        """True when `source_tag` is `Chat` (case-insensitive, trimmed)."""
        return self.source_tag.strip().lower() == CHAT_SOURCE_TAG.lower()


def _names(names: Iterable[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise InvalidArgumentError("allowed_tool_names must be a list of names, not one string")
    out = []
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError("allowed_tool_names must contain strings")
        if name.strip():
            out.append(name.strip())
    return tuple(out)


def forced_tool(mode: str, offered: Sequence[OfferedTool]) -> str | None:
    """None (the model decides), `required`, or the exact name of the tool to call."""
    wanted = mode.strip()
    if wanted.lower() in ("", "auto", FORCED_TOOL_NONE):
        return None
    if wanted.lower() == FORCED_TOOL_REQUIRED:
        if not offered:
            raise InvalidArgumentError("forced_tool_mode 'required' needs at least one offered tool")
        return FORCED_TOOL_REQUIRED
    for tool in offered:
        if tool.name.lower() == wanted.lower():
            return tool.name
    raise InvalidArgumentError(
        "forced_tool_mode must be '', 'none', 'required' or the name of a tool offered in this request"
    )


def tool_availability(offered: Sequence[OfferedTool], forced: str | None) -> str:
    """The `## Tool Availability (current request)` block body."""
    if not offered:
        return "No tools are available in this request: answer without calling any tool."
    text = "Only these tools are available in this request: " + ", ".join(t.name for t in offered) + "."
    if forced == FORCED_TOOL_REQUIRED:
        text += " Call one of them before you answer."
    elif forced:
        text += f" Call the tool '{forced}' before you answer."
    return text
