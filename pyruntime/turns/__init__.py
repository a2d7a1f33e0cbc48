"""Turns of a role: request assembly, the tool loop, recording and streaming (spec section 7)."""

from __future__ import annotations

from pyruntime.turns.events import (
    CutReportEvent,
    FinalEvent,
    MemoryWriteEvent,
    TaskResult,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
    TurnStatus,
    TurnUsage,
)
from pyruntime.turns.factory import build_orchestrator
from pyruntime.turns.modes import ToolCallMode
from pyruntime.turns.orchestrator import AiOrchestrator
from pyruntime.turns.request import AiTaskRequest
from pyruntime.turns.tools import RegisteredTool, ToolContext, ToolOutput, ToolRegistry

__all__ = [
    "AiOrchestrator",
    "AiTaskRequest",
    "CutReportEvent",
    "FinalEvent",
    "MemoryWriteEvent",
    "RegisteredTool",
    "TaskResult",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolCallMode",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "ToolResultEvent",
    "TurnEvent",
    "TurnStatus",
    "TurnUsage",
    "build_orchestrator",
]
