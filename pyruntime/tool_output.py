"""What a tool gives the model, on either side of the wire: runtime-hosted tools and the client's game tools.

Below both `pyruntime.turns` (which runs tools inside a turn) and `pyruntime.client` (whose game tools
run in the game and answer with SubmitToolResult), so the client needs nothing of the server side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from pyruntime.memory.tool import _simplify_schema as simplify_schema  # one schema style for every tool


@dataclass(frozen=True)
class ToolOutput:
    """What a tool gives back to the model; `success=False` marks a failure the model should see."""

    success: bool
    content: str


def as_tool_output(value: Any) -> ToolOutput:
    """What a handler's return value gives the model (None = "DONE"; a str as is; anything else as JSON)."""
    if isinstance(value, ToolOutput):
        return value
    if value is None:
        return ToolOutput(True, "DONE")
    if isinstance(value, str):
        return ToolOutput(True, value)
    if isinstance(value, BaseModel):
        return ToolOutput(True, value.model_dump_json())
    return ToolOutput(True, json.dumps(value, ensure_ascii=False, default=str))


def tool_parameters(args_model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments from its pydantic model, as every tool shows it to the model."""
    schema = simplify_schema(args_model.model_json_schema())
    parameters: dict[str, Any] = {"type": "object", "properties": schema.get("properties", {})}
    if schema.get("required"):
        parameters["required"] = schema["required"]
    if "$defs" in schema:
        parameters["$defs"] = schema["$defs"]
    parameters["additionalProperties"] = False
    return parameters
