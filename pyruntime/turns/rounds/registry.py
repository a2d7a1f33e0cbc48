"""The role tool registry: games register Python tools per role, with pydantic argument models.

```python
class Price(BaseModel):
    item: str

registry = ToolRegistry()
registry.register("Merchant", "get_price", "Price of an item in gold.", Price, lambda args: {"gold": 12})
```

A handler takes the validated arguments (and, if it has a second parameter, a `ToolContext`), may
be sync or async, and returns a string, a JSON-serialisable value, a pydantic model, or a
`ToolOutput` (to report a failure without raising). A raised exception becomes a failure result.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.tool import MEMORY_TOOL_NAME
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope, normalize_role_id
from pyruntime.tool_output import ToolOutput as ToolOutput  # re-exported: turns and the client share one class
from pyruntime.tool_output import as_tool_output as as_tool_output
from pyruntime.tool_output import tool_parameters

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-compatible servers accept


@dataclass(frozen=True)
class ToolContext:
    """Who a tool call is for (for handlers that need the player's scope)."""

    role_id: str
    scope: AgentMemoryScope = EMPTY_SCOPE
    actor: str | None = None
    trace_id: str = ""


ToolHandler = Callable[..., Any]


@dataclass(frozen=True)
class RegisteredTool:
    """One role tool: name, description, argument model and handler."""

    name: str
    description: str
    args_model: type[BaseModel]
    handler: ToolHandler
    takes_context: bool

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool dict (byte-stable: it enters the cacheable prefix)."""
        parameters = tool_parameters(self.args_model)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    async def invoke(self, args: BaseModel, context: ToolContext) -> ToolOutput:
        """Run the handler (a sync one in a worker thread); an exception becomes a failure output."""
        call_args = (args, context) if self.takes_context else (args,)
        try:
            if inspect.iscoroutinefunction(self.handler):
                value = await self.handler(*call_args)
            else:
                value = await asyncio.to_thread(self.handler, *call_args)
                if inspect.isawaitable(value):
                    value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the game's code failed: the model gets told, the turn goes on
            detail = str(exc).strip()
            reason = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
            return ToolOutput(False, f"tool '{self.name}' failed: {reason}")
        return as_tool_output(value)


def _takes_context(handler: ToolHandler) -> bool:
    try:
        params = [
            p for p in inspect.signature(handler).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


class ToolRegistry:
    """Tools per role; names are unique per role, case-insensitively, and `memory` is reserved."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, dict[str, RegisteredTool]] = {}

    def register(
        self, role_id: str, name: str, description: str, args_model: type[BaseModel], handler: ToolHandler
    ) -> RegisteredTool:
        """Add a tool to a role; a bad name, a duplicate or a non-pydantic model is an InvalidArgumentError."""
        role = normalize_role_id(role_id)
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise InvalidArgumentError("tool name must be 1-64 characters of letters, digits, '_' or '-'")
        if name.lower() == MEMORY_TOOL_NAME:
            raise InvalidArgumentError(f"tool name '{MEMORY_TOOL_NAME}' is reserved for the memory tool")
        if not isinstance(description, str) or not description.strip():
            raise InvalidArgumentError("tool description must not be blank")
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise InvalidArgumentError("args_model must be a pydantic BaseModel subclass")
        if not callable(handler):
            raise InvalidArgumentError("handler must be callable")
        tool = RegisteredTool(name, description.strip(), args_model, handler, _takes_context(handler))
        tool.definition()  # a model whose schema cannot be built fails here, not mid-turn
        with self._lock:
            tools = self._tools.setdefault(role, {})
            if name.lower() in tools:
                raise InvalidArgumentError("a tool with this name is already registered for the role")
            tools[name.lower()] = tool
        return tool

    def unregister(self, role_id: str, name: str) -> bool:
        """Remove a tool; returns whether it existed."""
        role = normalize_role_id(role_id)
        with self._lock:
            return self._tools.get(role, {}).pop(name.lower(), None) is not None

    def tools_for(self, role_id: str) -> list[RegisteredTool]:
        """The role's tools, in registration order."""
        role = normalize_role_id(role_id)
        with self._lock:
            return list(self._tools.get(role, {}).values())
