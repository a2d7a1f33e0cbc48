"""Game tools of the Python client: declared with a streamed turn, run here, answered with SubmitToolResult.

```python
price = ClientTool("quote_price", "Price of an item in gold.",
                   {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
                   lambda args: {"gold": PRICES[args["item"]]})
for event in client.stream_task_with_tools("How much is the sword?", [price], role_id="BlacksmithNPC"):
    ...
```

A handler gets the validated arguments (a dict), may be sync or async (async ones only with the async
client), and returns a string, a JSON-serialisable value, a pydantic model or a `ToolOutput`; a
raised exception becomes a failed result the model sees.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client.errors import RuntimeCallError
from pyruntime.errors import InvalidArgumentError
from pyruntime.status_code import StatusCode
from pyruntime.tool_output import ToolOutput, as_tool_output, tool_parameters

log = logging.getLogger("pyruntime.client")

ToolHandler = Callable[[dict[str, Any]], Any]
CALL_ENDED = frozenset({StatusCode.NOT_FOUND, StatusCode.FAILED_PRECONDITION, StatusCode.ALREADY_EXISTS})
"""SubmitToolResult answers that mean the turn no longer waits for this result (timed out, ended)."""


@dataclass(frozen=True)
class ClientTool:
    """A game tool: its name, description, JSON Schema of the arguments, and the handler that runs it."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    handler: ToolHandler = field(default=lambda args: None, repr=False)

    @classmethod
    def from_model(cls, name: str, description: str, args_model: type[BaseModel],
                   handler: Callable[[Any], Any]) -> ClientTool:
        """A tool with a pydantic model's schema (as runtime-hosted tools show theirs); the handler gets an instance."""
        parameters = tool_parameters(args_model)
        return cls(name, description, parameters, lambda args: handler(args_model.model_validate(args)))

    def definition(self) -> orch.ClientToolDefinition:
        """The declaration sent with the turn."""
        return orch.ClientToolDefinition(name=self.name, description=self.description,
                                         parameters_json_schema=json.dumps(dict(self.parameters)))


def with_client_tools(request: orch.RunTaskRequest, tools: Sequence[ClientTool]) -> dict[str, ClientTool]:
    """Declare tools on request; returns them by name (a name given twice is an InvalidArgumentError)."""
    by_name: dict[str, ClientTool] = {}
    for tool in tools:
        if tool.name in by_name:
            raise InvalidArgumentError(f"client tool '{tool.name}' is given twice")
        by_name[tool.name] = tool
        request.client_tools.append(tool.definition())
    return by_name


def failure(name: str, exc: BaseException) -> ToolOutput:
    """The failed result of a handler that raised."""
    detail = str(exc).strip()
    reason = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return ToolOutput(False, f"tool '{name}' failed: {reason}")


def result_request(call: orch.ClientToolCall, output: Any) -> orch.SubmitToolResultRequest:
    """The SubmitToolResult of a handler's return value."""
    result = as_tool_output(output)
    return orch.SubmitToolResultRequest(turn_id=call.turn_id, call_id=call.call_id, success=result.success,
                                        content=result.content)


def call_arguments(call: orch.ClientToolCall) -> dict[str, Any]:
    """The call's (validated) arguments."""
    value = json.loads(call.arguments_json or "{}")
    return value if isinstance(value, dict) else {}


def submit_refused(exc: RuntimeCallError) -> bool:
    """True (logged) when the runtime no longer waits for the result; False when the error must be raised."""
    if exc.code in CALL_ENDED:
        log.info("a tool result came too late: %s", exc.code.name)
        return True
    return False


def _handler_output(handlers: Mapping[str, ClientTool], call: orch.ClientToolCall) -> Any:
    """Run the call's handler; what it returned, or the failure the model is told when it raised."""
    tool = handlers.get(call.name)
    try:
        if tool is None:
            raise LookupError(f"no handler for tool '{call.name}'")
        return tool.handler(call_arguments(call))
    except Exception as exc:  # noqa: BLE001 - the game's code failed: the model is told
        return failure(call.name, exc)


class ToolCalls:
    """The game-tool calls of one blocking stream: each runs to its end, in order, before the next event is read."""

    def __init__(self, handlers: Mapping[str, ClientTool],
                 submit: Callable[[orch.SubmitToolResultRequest], object]) -> None:
        self._handlers, self._submit = handlers, submit

    def start(self, call: orch.ClientToolCall) -> None:
        """Run the call's handler and submit its result (a result the turn no longer waits for is dropped)."""
        output = _handler_output(self._handlers, call)
        if inspect.isawaitable(output):  # an async handler given to the blocking client: say so, do not send its repr
            getattr(output, "close", lambda: None)()
            output = ToolOutput(False, f"tool '{call.name}' failed: its handler is async; use AsyncRuntimeClient")
        request = result_request(call, output)
        try:
            self._submit(request)
        except RuntimeCallError as exc:
            if not submit_refused(exc):
                raise

    def __enter__(self) -> ToolCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class AsyncToolCalls:
    """The game-tool calls of one async stream: each runs concurrently with the stream (sync or async
    handlers); leaving the block cancels those still running and waits for them."""

    def __init__(self, handlers: Mapping[str, ClientTool],
                 submit: Callable[[orch.SubmitToolResultRequest], Awaitable[object]]) -> None:
        self._handlers, self._submit = handlers, submit
        self._running: set[asyncio.Task[None]] = set()

    def start(self, call: orch.ClientToolCall) -> None:
        """Start the call's handler; its result is submitted when it ends."""
        task = asyncio.create_task(self._serve(call))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _serve(self, call: orch.ClientToolCall) -> None:
        output = _handler_output(self._handlers, call)
        if inspect.isawaitable(output):
            try:
                output = await output
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the game's code failed: the model is told
                output = failure(call.name, exc)
        try:
            await self._submit(result_request(call, output))
        except RuntimeCallError as exc:
            if not submit_refused(exc):
                raise

    async def __aenter__(self) -> AsyncToolCalls:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
