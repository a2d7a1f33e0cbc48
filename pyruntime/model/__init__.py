"""Local model runtime: hosting llama.cpp's llama-server, the OpenAI-compatible client, and the request queue."""

from __future__ import annotations

from pyruntime.model.client import ChatStream, OpenAICompatClient
from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.errors import (
    ContextOverflowError,
    IncompleteStreamError,
    ModelError,
    ModelStalledError,
    ModelUnavailableError,
)
from pyruntime.model.hosting import LlamaServerProcess, hosted_model_config
from pyruntime.model.llama_server import LlamaServerConfig
from pyruntime.model.queue import ModelRequestQueue, Priority
from pyruntime.model.seam import Gate, ModelClient, ModelStream
from pyruntime.model.supervisor import ModelState, ModelSupervisor, WatchdogSettings
from pyruntime.model.types import (
    ChatCompletion,
    ChatCompletionAccumulator,
    FinishDelta,
    StreamDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageDelta,
)

__all__ = [
    "EMBEDDED_MODEL_ALIAS",
    "ChatCompletion",
    "ChatCompletionAccumulator",
    "ChatStream",
    "ContextOverflowError",
    "FinishDelta",
    "Gate",
    "IncompleteStreamError",
    "LlamaServerConfig",
    "LlamaServerProcess",
    "ModelClient",
    "ModelError",
    "ModelRequestQueue",
    "ModelStalledError",
    "ModelStream",
    "ModelState",
    "ModelSupervisor",
    "ModelUnavailableError",
    "OpenAICompatClient",
    "Priority",
    "StreamDelta",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "UsageDelta",
    "WatchdogSettings",
    "embedded_model_path",
    "hosted_model_config",
]
