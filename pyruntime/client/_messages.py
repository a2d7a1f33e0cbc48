"""Requests built from the client's arguments and responses turned into the core's types (pure, no I/O)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coreai.v1 import common_pb2
from coreai.v1 import memory_store_pb2 as ms
from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MEMORY_ARGUMENT_NAMES, MemoryToolResult
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.scopes import AgentMemoryScope, conversation_id
from pyruntime.stores import ChatMessage, LoadResult, ScopeSnapshot, TranscriptEntry
from pyruntime.stores.snapshot import entry_from_proto, scope_to_proto, state_from_proto, state_to_proto

MemoryArguments = str | Mapping[str, Any]
"""A `memory` call: the model's raw JSON text, or an argument object (`{"action": "append", ...}`)."""


@dataclass(frozen=True)
class PlayerForgotten:
    """What ForgetPlayer erased: the player's saves, and how many saves nobody can be told the owner of (they may be
    this player's; erase them by role)."""

    saves_erased: int
    unattributed_saves: int


@dataclass(frozen=True)
class RuntimeHealth:
    """What the Health RPC says."""

    ready: bool
    model: str
    version: str
    model_ready: bool
    memory_design: str = ""  # "tool" | "writer" | "" (no model)
    model_rss_bytes: int = 0  # the hosted model server's resident memory (0: none, or not Linux)
    prompt_cache_used_bytes: int = 0
    prompt_cache_limit_bytes: int = 0  # 0: the prompt cache is off
    model_download: ModelDownloadStatus | None = None  # while the runtime downloads its model first
    model_state: str = ""  # "none" | "loading" | "ready" | "restarting" | "failed"
    model_state_reason: str = ""  # why the model is not ready ("" when it is)
    model_restarts: int = 0
    model_slots: int = 0  # the hosted engine's parallel slots (0: none hosted)
    model_slots_busy: int = 0
    prompt_cache_entries: int = 0
    model_gpu_layers: int = 0  # layers on the GPU now (0: CPU)
    model_gpu_fallback_reason: str = ""  # why fewer layers than asked run on the GPU
    turns_running: int = 0  # turns running now
    turns_queued: int = 0  # turns waiting for a place
    max_turns_running: int = 0  # admission's limits (serve --max-turns-*)
    max_turns_queued: int = 0
    max_turns_per_conversation: int = 0
    model_concurrency: int = 0  # model calls the engine is sent at once (0: no model)


@dataclass(frozen=True)
class ModelDownloadStatus:
    """A model download the runtime is doing before it loads the model."""

    model: str
    received_bytes: int
    total_bytes: int  # 0: not known yet


def target(role_id: str, scope: AgentMemoryScope | None, actor: str | None) -> common_pb2.AgentTarget:
    """The `AgentTarget` of (role, scope, actor)."""
    if not isinstance(role_id, str):
        raise InvalidArgumentError("role_id must be a string")
    message = common_pb2.AgentTarget(role_id=role_id, actor=actor or "")
    if scope is not None:
        message.scope.CopyFrom(scope_to_proto(scope))
    return message


def affinity(request: Any, default_role: str = "") -> str:
    """The conversation id of the request's target (`conversation_affinity`); "" for a request that names none."""
    if "target" not in request.DESCRIPTOR.fields_by_name:
        return ""
    message: common_pb2.AgentTarget = request.target
    scope = AgentMemoryScope(message.scope.tenant_id or None, message.scope.user_id or None,
                             message.scope.session_id or None, message.scope.topic_id or None)
    return conversation_affinity(message.role_id, scope, message.actor or None, default_role)


def conversation_affinity(role_id: str, scope: AgentMemoryScope | None, actor: str | None,
                          default_role: str = "") -> str:
    """The id a load balancer keeps one conversation's calls on one runtime by (`scopes.conversation_id`).

    "" for an invalid role: such a call is refused alike by whichever runtime gets it. default_role:
    what a blank role means for the call (turns run as Creator).
    """
    try:
        return conversation_id((role_id or "").strip() or default_role, scope or AgentMemoryScope(), actor)
    except InvalidArgumentError:
        return ""


def memory_tool_request(role_id: str, arguments: MemoryArguments, scope: AgentMemoryScope | None,
                        actor: str | None) -> ms.ApplyMemoryToolRequest:
    """Raw text goes as arguments_json (repaired like a model's call); an object as the typed fields."""
    request = ms.ApplyMemoryToolRequest(target=target(role_id, scope, actor))
    if isinstance(arguments, str):
        request.arguments_json = arguments
        return request
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentError("arguments must be a JSON string or a mapping")
    unknown = sorted(set(arguments) - set(MEMORY_ARGUMENT_NAMES))
    if unknown:
        # The typed fields are strict; the raw JSON path names (or repairs) them server-side.
        request.arguments_json = json.dumps(dict(arguments), ensure_ascii=False)
        return request
    try:
        for name, value in arguments.items():
            if value is not None:
                setattr(request, name, value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"memory argument has the wrong type: {exc}") from None
    return request


def load_result(response: ms.LoadStateResponse) -> LoadResult:
    """TryLoad's outcome."""
    if response.status == ms.LOAD_STATUS_LOADED:
        return LoadResult.loaded(state_from_proto(response.state))
    if response.status == ms.LOAD_STATUS_FAILED:
        return LoadResult.failed(response.reason)
    return LoadResult.not_found()


def tool_result(response: ms.MemoryToolResult) -> MemoryToolResult:
    """The memory tool's result."""
    return MemoryToolResult(response.success, response.message or None, response.error or None, response.version,
                            response.memory_length, response.memory if response.HasField("memory") else None)


def versions(response: ms.ListVersionsResponse) -> list[MemoryVersion]:
    """Retained versions, oldest first."""
    return [MemoryVersion(v.version, v.timestamp, v.action, v.content_after, v.note) for v in response.versions]


def chat_messages(response: ms.GetChatHistoryResponse) -> list[ChatMessage]:
    """Chat messages, oldest first."""
    return [ChatMessage(m.role, m.content, m.timestamp, m.order) for m in response.messages]


def transcript(response: ms.GetTranscriptResponse) -> list[TranscriptEntry]:
    """Transcript rows, oldest first."""
    return [entry_from_proto(e) for e in response.entries]


def save_state_request(role_id: str, state: AgentMemoryState, scope: AgentMemoryScope | None,
                       actor: str | None) -> ms.SaveStateRequest:
    """SaveState of a state."""
    if not isinstance(state, AgentMemoryState):
        raise InvalidArgumentError("state must be an AgentMemoryState")
    return ms.SaveStateRequest(target=target(role_id, scope, actor), state=state_to_proto(state))


def export_request(scope: AgentMemoryScope | None, role_ids: Sequence[str],
                   actors: Sequence[str]) -> ms.ExportSnapshotRequest:
    """ExportSnapshot of named roles and actors (none named: every known role, no actor)."""
    if isinstance(role_ids, str) or isinstance(actors, str):
        raise InvalidArgumentError("role_ids and actors must be sequences, not a single string")
    request = ms.ExportSnapshotRequest(role_ids=list(role_ids), actors=list(actors))
    if scope is not None:
        request.scope.CopyFrom(scope_to_proto(scope))
    return request


def import_request(snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None) -> ms.ImportSnapshotRequest:
    """ImportSnapshot, optionally into another scope."""
    if not isinstance(snapshot, ScopeSnapshot):
        raise InvalidArgumentError("snapshot must be a ScopeSnapshot")
    request = ms.ImportSnapshotRequest(snapshot=snapshot.to_proto())
    if target_scope is not None:
        request.target_scope.CopyFrom(scope_to_proto(target_scope))
    return request


def task_request(hint: str, role_id: str, scope: AgentMemoryScope | None, actor: str | None,
                 options: Mapping[str, Any]) -> orch.RunTaskRequest:
    """A RunTaskRequest; options are its other fields (source_tag, trace_id, timeout_ms, ...)."""
    request = orch.RunTaskRequest(target=target(role_id, scope, actor), hint=hint)
    try:
        for name, value in options.items():
            if name == "allowed_tool_names":
                if value is not None:  # unset = every tool, [] = none: presence matters
                    request.allowed_tool_names.SetInParent()
                    request.allowed_tool_names.names.extend(value)
            elif name == "client_tools":  # repeated: ClientToolDefinition messages
                request.client_tools.extend(value or ())
            elif value is not None:
                setattr(request, name, value)
    except (AttributeError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"bad RunTask option: {exc}") from None
    return request


def wait_writes_request(role_id: str, scope: AgentMemoryScope | None, actor: str | None, trace_id: str,
                        timeout_ms: int) -> orch.WaitMemoryWritesRequest:
    """A WaitMemoryWritesRequest."""
    if not isinstance(trace_id, str) or isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
        raise InvalidArgumentError("trace_id must be a string and timeout_ms an integer")
    return orch.WaitMemoryWritesRequest(target=target(role_id, scope, actor), trace_id=trace_id, timeout_ms=timeout_ms)


def health(response: orch.HealthResponse) -> RuntimeHealth:
    """The Health answer."""
    return RuntimeHealth(response.ready, response.model, response.version, response.model_ready,
                         response.memory_design, response.model_rss_bytes, response.prompt_cache_used_bytes,
                         response.prompt_cache_limit_bytes,
                         ModelDownloadStatus(response.model_download.model, response.model_download.received_bytes,
                                             response.model_download.total_bytes)
                         if response.HasField("model_download") else None,
                         response.model_state, response.model_state_reason,
                         response.model_restarts, response.model_slots, response.model_slots_busy,
                         response.prompt_cache_entries, response.model_gpu_layers,
                         response.model_gpu_fallback_reason, response.turns_running, response.turns_queued,
                         response.max_turns_running, response.max_turns_queued, response.max_turns_per_conversation,
                         response.model_concurrency)
