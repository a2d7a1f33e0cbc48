"""Turns of a role: request assembly, the tool loop, recording and streaming (contract §7)."""

from __future__ import annotations

from pyruntime.turns.events import (
    CutReportEvent,
    FinalEvent,
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
