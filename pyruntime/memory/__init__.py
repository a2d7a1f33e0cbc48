"""Agent memory: the document state, its versions, and the `memory` tool the model edits it with (contract §1-§2)."""

from pyruntime.memory.actions import (
    MEMORY_ACTIONS,
    MEMORY_ARGUMENT_NAMES,
    MemoryToolAction,
    MemoryToolArgs,
    MemoryToolResult,
)
from pyruntime.memory.document import DocumentEdit, MemoryEditError, TextNotFoundError, apply_edit, closest_lines
from pyruntime.memory.repair import parse_memory_tool_arguments
from pyruntime.memory.state import DEFAULT_MAX_MEMORY_VERSIONS, AgentMemoryState, MemoryVersion
from pyruntime.memory.tool import DEFAULT_MAX_MEMORY_CHARS, MEMORY_TOOL_NAME, MemoryTool, memory_tool_definition
from pyruntime.memory.versions import diff_versions, list_versions, record_version, revert_memory, version_note

__all__ = [
    "DEFAULT_MAX_MEMORY_CHARS",
    "DEFAULT_MAX_MEMORY_VERSIONS",
    "MEMORY_ACTIONS",
    "MEMORY_ARGUMENT_NAMES",
    "MEMORY_TOOL_NAME",
    "AgentMemoryState",
    "DocumentEdit",
    "MemoryEditError",
    "MemoryTool",
    "MemoryToolAction",
    "MemoryToolArgs",
    "MemoryToolResult",
    "MemoryVersion",
    "TextNotFoundError",
    "apply_edit",
    "closest_lines",
    "diff_versions",
    "list_versions",
    "memory_tool_definition",
    "parse_memory_tool_arguments",
    "record_version",
    "revert_memory",
    "version_note",
]
