"""Turns of a role: request assembly, the tool loop, recording and streaming (contract §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyruntime._lazy import lazy_exports

if TYPE_CHECKING:
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
    from pyruntime.turns.orchestrator import AiOrchestrator
    from pyruntime.turns.request import AiTaskRequest
    from pyruntime.turns.rounds.modes import ToolCallMode
    from pyruntime.turns.rounds.registry import RegisteredTool, ToolContext, ToolOutput, ToolRegistry
    from pyruntime.turns.settings import TurnSettings

_EXPORTS = {
    **dict.fromkeys(("CutReportEvent", "FinalEvent", "MemoryWriteEvent", "TaskResult", "TextDeltaEvent",
                     "ToolCallEvent", "ToolResultEvent", "TurnEvent", "TurnStatus", "TurnUsage"),
                    "pyruntime.turns.events"),
    "build_orchestrator": "pyruntime.turns.factory",
    "AiOrchestrator": "pyruntime.turns.orchestrator",
    "AiTaskRequest": "pyruntime.turns.request",
    "ToolCallMode": "pyruntime.turns.rounds.modes",
    **dict.fromkeys(("RegisteredTool", "ToolContext", "ToolOutput", "ToolRegistry"), "pyruntime.turns.rounds.registry"),
    "TurnSettings": "pyruntime.turns.settings",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
    "TurnSettings",
    "TurnStatus",
    "TurnUsage",
    "build_orchestrator",
]
