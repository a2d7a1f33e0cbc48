"""Python client of a running runtime, sync (`RuntimeClient`) and async (`AsyncRuntimeClient`), over either transport.

    with RuntimeClient("http://127.0.0.1:13335", token=read_token_file(path)) as client:   # Connect
        client.apply_memory_tool("Teacher", {"action": "append", "content": "likes swords"})
    async with AsyncRuntimeClient("grpc://127.0.0.1:13334", token=token) as client:        # gRPC
        state = await client.load_state("Teacher", scope=AgentMemoryScope(user_id="u1"))

Methods take role id, scope and actor and return the core's types (LoadResult, MemoryToolResult,
MemoryVersion, ChatMessage, TranscriptEntry, ScopeSnapshot, RoleMemoryConfig); the turn RPCs
return the `coreai.v1` messages (RunTaskResponse, TurnEvent). A failed call raises the
`pyruntime.client.errors` class of its status, which is also the core error of that meaning.
"""

from __future__ import annotations

from pyruntime.client._async import AsyncRuntimeClient
from pyruntime.client._messages import MemoryArguments, ModelDownloadStatus, PlayerForgotten, RuntimeHealth
from pyruntime.client._sync import RuntimeClient
from pyruntime.client._tools import ClientTool
from pyruntime.client.errors import (
    PermissionDeniedError,
    RuntimeCallError,
    RuntimeInvalidArgumentError,
    RuntimeLimitExceededError,
    RuntimeMemoryUnreadableError,
    RuntimeNotFoundError,
    RuntimeUnavailableError,
    UnauthenticatedError,
)
from pyruntime.net.auth import read_token_file
from pyruntime.tool_output import ToolOutput

__all__ = [
    "AsyncRuntimeClient",
    "ClientTool",
    "MemoryArguments",
    "ModelDownloadStatus",
    "PermissionDeniedError",
    "PlayerForgotten",
    "RuntimeCallError",
    "RuntimeClient",
    "RuntimeHealth",
    "RuntimeInvalidArgumentError",
    "RuntimeLimitExceededError",
    "RuntimeMemoryUnreadableError",
    "RuntimeNotFoundError",
    "RuntimeUnavailableError",
    "ToolOutput",
    "UnauthenticatedError",
    "read_token_file",
]
