"""`ProtoTurnRunner`: the turn engine as the Orchestrator service's `TurnRunner`, with the pure conversions between
`coreai.v1` orchestrator messages and the turn types.

It lives on the service side: the service checks what crosses the wire (`targets.py`) and the turn engine knows
nothing of proto messages, so the arrow runs service -> turns. It converts requests in and events and results
out, and leaves every decision to `AiOrchestrator`. Loaded only with a turn engine (`pyruntime.service` does not
import it), so a runtime without a model never loads the turns.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.proto_fields import to_message
from pyruntime.scopes import DEFAULT_TURN_ROLE
from pyruntime.service.targets import target_from_proto
from pyruntime.turns.events import (
    ClientToolCallEvent,
    CutReportEvent,
    FinalEvent,
    MemoryWriteEvent,
    TaskResult,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pyruntime.turns.orchestrator import AiOrchestrator
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.rounds.client_tools import client_tool_spec
from pyruntime.turns.writer.passes import MemoryPassOutcome


def request_from_proto(message: pb.RunTaskRequest) -> AiTaskRequest:
    """The `AiTaskRequest` of a `RunTaskRequest` (blank role -> Creator, timeout_ms 0 -> the default)."""
    target = target_from_proto(message.target, default_role=DEFAULT_TURN_ROLE)
    return AiTaskRequest(
        hint=message.hint,
        role_id=target.role_id,
        source_tag=message.source_tag,
        trace_id=message.trace_id,
        scope=target.scope,
        actor=target.actor,
        request_system_instructions=message.request_system_instructions,
        allowed_tool_names=tuple(message.allowed_tool_names.names) if message.HasField("allowed_tool_names") else None,
        forced_tool_mode=message.forced_tool_mode,
        max_output_tokens=message.max_output_tokens if message.HasField("max_output_tokens") else None,
        world_state=message.world_state,
        temperature=message.temperature if message.HasField("temperature") else None,
        timeout=message.timeout_ms / 1000.0 if message.timeout_ms > 0 else None,
        client_tools=tuple(client_tool_spec(t.name, t.description, t.parameters_json_schema)
                           for t in message.client_tools),
        client_tool_timeout=message.client_tool_timeout_ms / 1000.0 if message.client_tool_timeout_ms > 0 else None,
        wait_memory_write=message.wait_memory_write,
    )


def _tool_call(event: ToolCallEvent) -> pb.ToolCallEvent:
    return to_message(event, pb.ToolCallEvent)


def _tool_result(event: ToolResultEvent) -> pb.ToolResultEvent:
    return to_message(event, pb.ToolResultEvent)


def write_to_proto(write: MemoryPassOutcome) -> pb.MemoryWrite:
    """The `MemoryWrite` of a memory pass's outcome."""
    return pb.MemoryWrite(
        trace_id=write.trace_id, changed=write.changed,
        lines=[pb.MemoryWriteLine(stored=o.stored, replaced=o.replaced or "") for o in write.written],
        reason="" if write.changed else write.reason, version=write.version if write.changed else 0,
        summary=write.summary(),
    )


def result_to_proto(result: TaskResult) -> pb.RunTaskResponse:
    """The `RunTaskResponse` of a finished turn."""
    response = pb.RunTaskResponse(
        status=pb.TurnStatus.Name(int(result.status)),  # the enum's name: what the proto stubs type it as
        text=result.text,
        error=result.error,
        tool_calls=[_tool_call(c) for c in result.tool_calls],
        tool_results=[_tool_result(r) for r in result.tool_results],
        usage=to_message(result.usage, pb.TurnUsage, evaluated_prompt_tokens=result.usage.evaluated_prompt_tokens),
        trace_id=result.trace_id,
        memory_write_pending=result.memory_write_pending,
    )
    if result.memory_write is not None:
        response.memory_write.CopyFrom(write_to_proto(result.memory_write))
    if result.cut_report is not None:
        response.cut_report.CopyFrom(result.cut_report.to_proto())
    return response


def event_to_proto(event: TurnEvent) -> pb.TurnEvent:
    """The `TurnEvent` message of one turn event."""
    if isinstance(event, TextDeltaEvent):
        return pb.TurnEvent(text_delta=pb.TextDelta(text=event.text))
    if isinstance(event, ToolCallEvent):
        return pb.TurnEvent(tool_call=_tool_call(event))
    if isinstance(event, ToolResultEvent):
        return pb.TurnEvent(tool_result=_tool_result(event))
    if isinstance(event, ClientToolCallEvent):
        return pb.TurnEvent(client_tool_call=pb.ClientToolCall(
            turn_id=event.turn_id, call_id=event.call_id, name=event.name, arguments_json=event.arguments_json,
            timeout_ms=event.timeout_ms))
    if isinstance(event, CutReportEvent):
        return pb.TurnEvent(cut_report=event.report.to_proto())
    if isinstance(event, FinalEvent):
        return pb.TurnEvent(final=result_to_proto(event.result))
    if isinstance(event, MemoryWriteEvent):
        return pb.TurnEvent(memory_write=write_to_proto(event.write))
    raise TypeError(f"not a turn event: {type(event).__name__}")


class ProtoTurnRunner:
    """An `AiOrchestrator` seen through proto messages (the service's `TurnRunner`)."""

    def __init__(self, orchestrator: AiOrchestrator) -> None:
        """Wrap the orchestrator."""
        self.orchestrator = orchestrator

    async def run_task(self, request: pb.RunTaskRequest) -> pb.RunTaskResponse:
        """The whole turn, once it has ended."""
        return result_to_proto(await self.orchestrator.run_task(request_from_proto(request)))

    def submit_tool_result(self, request: pb.SubmitToolResultRequest) -> None:
        """Hand a client's game-tool result to the turn waiting for it."""
        self.orchestrator.submit_tool_result(request.turn_id, request.call_id, request.success, request.content)

    async def wait_memory_writes(self, request: pb.WaitMemoryWritesRequest, timeout: float
                                 ) -> pb.WaitMemoryWritesResponse:
        """A conversation's pending memory writes (or one turn's), once they landed or the timeout passed."""
        target = target_from_proto(request.target, default_role=DEFAULT_TURN_ROLE)
        writes, pending = await self.orchestrator.wait_memory_writes(
            target.role_id, target.scope, target.actor, trace_id=request.trace_id, timeout=timeout)
        return pb.WaitMemoryWritesResponse(writes=[write_to_proto(w) for w in writes], pending=pending)

    async def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        """The turn as events; closing this iterator cancels the turn."""
        events = self.orchestrator.stream_task(request_from_proto(request))
        try:
            async for event in events:
                yield event_to_proto(event)
        finally:
            if isinstance(events, AsyncGenerator):  # the engine's is one: closing it cancels the turn
                await events.aclose()
