"""`RuntimeClient`: every RPC of a running runtime, over gRPC or Connect, returning the core's types (blocking).

GENERATED from `_async.py` by `tools/gen_sync_client.py`: do not edit; edit `_async.py` and run the script.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from coreai.v1 import memory_store_pb2 as ms
from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client import _messages as m
from pyruntime.client import _tools as t
from pyruntime.client._transports import MEMORY_STORE, ORCHESTRATOR, CaCert, SyncTransport, sync_transport
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryToolResult
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.policy import RoleMemoryConfig, config_from_proto, config_to_proto
from pyruntime.scopes import DEFAULT_TURN_ROLE, AgentMemoryScope
from pyruntime.stores import ChatMessage, LoadResult, ScopeSnapshot, TranscriptEntry
from pyruntime.stores.snapshot import scope_to_proto

DEFAULT_TIMEOUT_S = 60.0


class RuntimeClient:
    """Blocking client of one runtime: `grpc://127.0.0.1:13334` or `http://127.0.0.1:13335` (Connect)."""

    def __init__(self, url: str, *, token: str, timeout: float | None = DEFAULT_TIMEOUT_S,
                 transport: SyncTransport | None = None, ca_cert: CaCert | None = None) -> None:
        # ca_cert: the PEM CA (or self-signed certificate) a grpcs:// or https:// runtime is checked against.
        self._transport = transport if transport is not None else sync_transport(url, token, timeout, ca_cert)

    def close(self) -> None:
        """Close the connections."""
        self._transport.close()

    def __enter__(self) -> RuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _store(self, rpc: str, request: Any) -> Any:
        return self._transport.unary(MEMORY_STORE, rpc, request, affinity=m.affinity(request))

    def _orchestrator(self, rpc: str, request: Any, affinity: str = "") -> Any:
        return self._transport.unary(ORCHESTRATOR, rpc, request, affinity=affinity)

    # -- memory document -------------------------------------------------------------------

    def load_state(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                   actor: str | None = None) -> LoadResult:
        """TryLoad: Loaded (with state), NotFound, or Failed(reason)."""
        request = ms.LoadStateRequest(target=m.target(role_id, scope, actor))
        return m.load_result(self._store("LoadState", request))

    def apply_memory_tool(self, role_id: str, arguments: m.MemoryArguments, *,
                          scope: AgentMemoryScope | None = None, actor: str | None = None) -> MemoryToolResult:
        """One `memory` call; a refused edit is a result with success=False (see pyruntime.service)."""
        request = m.memory_tool_request(role_id, arguments, scope, actor)
        return m.tool_result(self._store("ApplyMemoryTool", request))

    def save_state(self, role_id: str, state: AgentMemoryState, *, scope: AgentMemoryScope | None = None,
                   actor: str | None = None) -> None:
        """Replace the whole state (heals an unreadable document)."""
        self._store("SaveState", m.save_state_request(role_id, state, scope, actor))

    def clear_memory(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                     actor: str | None = None) -> None:
        """Delete the document, its versions and snapshot; chat stays."""
        self._store("ClearMemory", ms.ClearMemoryRequest(target=m.target(role_id, scope, actor)))

    def list_versions(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                      actor: str | None = None) -> list[MemoryVersion]:
        """Retained versions, oldest first."""
        request = ms.ListVersionsRequest(target=m.target(role_id, scope, actor))
        return m.versions(self._store("ListVersions", request))

    def revert_memory(self, role_id: str, version: int, *, scope: AgentMemoryScope | None = None,
                      actor: str | None = None) -> MemoryToolResult:
        """Set the memory to a retained version (recorded as a new version)."""
        request = ms.RevertMemoryRequest(target=m.target(role_id, scope, actor), version=version)
        return m.tool_result(self._store("RevertMemory", request))

    def diff_versions(self, role_id: str, from_version: int, to_version: int, *,
                      scope: AgentMemoryScope | None = None, actor: str | None = None) -> str:
        """Unified diff between two retained versions (0 = the empty document)."""
        request = ms.DiffVersionsRequest(target=m.target(role_id, scope, actor), from_version=from_version,
                                         to_version=to_version)
        response: ms.DiffVersionsResponse = self._store("DiffVersions", request)
        return response.unified_diff

    # -- chat history and transcript ---------------------------------------------------------

    def append_chat_message(self, role_id: str, role: str, content: str, *, persist: bool = True,
                            scope: AgentMemoryScope | None = None, actor: str | None = None) -> None:
        """Append one chat message (persist=False: the runtime process only)."""
        request = ms.AppendChatMessageRequest(target=m.target(role_id, scope, actor), role=role, content=content,
                                              persist=persist)
        self._store("AppendChatMessage", request)

    def get_chat_history(self, role_id: str, max_messages: int = 0, *, scope: AgentMemoryScope | None = None,
                         actor: str | None = None) -> list[ChatMessage]:
        """Oldest first, the newest max_messages (0 = all)."""
        request = ms.GetChatHistoryRequest(target=m.target(role_id, scope, actor), max_messages=max_messages)
        return m.chat_messages(self._store("GetChatHistory", request))

    def clear_chat_history(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                           actor: str | None = None) -> None:
        """Delete chat history, transcript and rolling summary; memory stays."""
        self._store("ClearChatHistory", ms.ClearChatHistoryRequest(target=m.target(role_id, scope, actor)))

    def get_transcript(self, role_id: str, max_entries: int = 0, *, scope: AgentMemoryScope | None = None,
                       actor: str | None = None) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all)."""
        request = ms.GetTranscriptRequest(target=m.target(role_id, scope, actor), max_entries=max_entries)
        return m.transcript(self._store("GetTranscript", request))

    # -- rolling summary -----------------------------------------------------------------------

    def load_summary(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                     actor: str | None = None) -> str | None:
        """The rolling summary, None if there is none."""
        response = self._store("LoadSummary", ms.LoadSummaryRequest(target=m.target(role_id, scope, actor)))
        return response.summary if response.found else None

    def save_summary(self, role_id: str, summary: str, *, scope: AgentMemoryScope | None = None,
                     actor: str | None = None) -> None:
        """Replace the rolling summary."""
        request = ms.SaveSummaryRequest(target=m.target(role_id, scope, actor), summary=summary)
        self._store("SaveSummary", request)

    def clear_summary(self, role_id: str, *, scope: AgentMemoryScope | None = None,
                      actor: str | None = None) -> None:
        """Delete the rolling summary."""
        self._store("ClearSummary", ms.ClearSummaryRequest(target=m.target(role_id, scope, actor)))

    # -- snapshots -----------------------------------------------------------------------------

    def export_snapshot(self, scope: AgentMemoryScope | None = None, role_ids: Sequence[str] = (),
                        actors: Sequence[str] = ()) -> ScopeSnapshot:
        """All data of the named roles x actors in scope (none named: every known role, no actor)."""
        response = self._store("ExportSnapshot", m.export_request(scope, role_ids, actors))
        return ScopeSnapshot.from_proto(response.snapshot)

    def import_snapshot(self, snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None = None) -> int:
        """Replace the data of the snapshot's identities (in target_scope if given); returns roles imported."""
        request = m.import_request(snapshot, target_scope)
        response: ms.ImportSnapshotResponse = self._store("ImportSnapshot", request)
        return response.roles_imported

    def forget_player(self, scope: AgentMemoryScope) -> m.PlayerForgotten:
        """Erase everything of one player (every save whose scope has the non-blank fields of `scope`: tenant + user,
        narrowed by a session or topic), and the engine's states of those conversations; how many saves went, and
        how many saves nobody can be told the owner of."""
        if not isinstance(scope, AgentMemoryScope):
            raise InvalidArgumentError("scope must be an AgentMemoryScope (the player: tenant_id and user_id)")
        request = ms.ForgetPlayerRequest(scope=scope_to_proto(scope))
        response: ms.ForgetPlayerResponse = self._store("ForgetPlayer", request)
        return m.PlayerForgotten(response.saves_erased, response.unattributed_saves)

    # -- orchestrator ----------------------------------------------------------------------------

    def run_task(self, hint: str, *, role_id: str = "", scope: AgentMemoryScope | None = None,
                 actor: str | None = None, **options: Any) -> orch.RunTaskResponse:
        """One turn (blank role = Creator); options are RunTaskRequest fields (source_tag, timeout_ms, ...)."""
        request = m.task_request(hint, role_id, scope, actor, options)
        affinity = m.affinity(request, DEFAULT_TURN_ROLE)
        response: orch.RunTaskResponse = self._orchestrator("RunTask", request, affinity)
        return response

    def stream_task(self, hint: str, *, role_id: str = "", scope: AgentMemoryScope | None = None,
                    actor: str | None = None, **options: Any) -> Generator[orch.TurnEvent]:
        """The same turn as events; closing the iterator early cancels the turn."""
        request = m.task_request(hint, role_id, scope, actor, options)
        affinity = m.affinity(request, DEFAULT_TURN_ROLE)
        yield from self._transport.stream(ORCHESTRATOR, "StreamTask", request, affinity=affinity)

    def stream_task_with_tools(self, hint: str, tools: Sequence[t.ClientTool], *, role_id: str = "",
                               scope: AgentMemoryScope | None = None, actor: str | None = None,
                               **options: Any) -> Generator[orch.TurnEvent]:
        """StreamTask with game tools: each `client_tool_call` runs its handler here and its result is submitted;
        every event is yielded too. The async client runs handlers (sync or async) concurrently with the stream,
        the blocking one runs each, in order, before it reads the next event. Closing the iterator cancels the turn."""
        request = m.task_request(hint, role_id, scope, actor, options)
        handlers = t.with_client_tools(request, tools)
        affinity = m.affinity(request, DEFAULT_TURN_ROLE)  # the results go to the runtime running the turn

        def submit(result: orch.SubmitToolResultRequest) -> None:
            self._orchestrator("SubmitToolResult", result, affinity)

        with t.ToolCalls(handlers, submit) as calls:
            for event in self._transport.stream(ORCHESTRATOR, "StreamTask", request, affinity=affinity):
                if event.HasField("client_tool_call"):
                    calls.start(event.client_tool_call)
                yield event

    def wait_memory_writes(self, role_id: str = "", *, scope: AgentMemoryScope | None = None,
                     actor: str | None = None, trace_id: str = "",
                     timeout_ms: int = 0) -> orch.WaitMemoryWritesResponse:
        """Wait for a conversation's pending memory writes (or one turn's: its response's trace_id) and get them.

        timeout_ms 0 = the runtime's 30 s (at most 120000); keep it below this client's own timeout.
        """
        request = m.wait_writes_request(role_id, scope, actor, trace_id, timeout_ms)
        affinity = m.affinity(request, DEFAULT_TURN_ROLE)
        response: orch.WaitMemoryWritesResponse = self._orchestrator("WaitMemoryWrites", request, affinity)
        return response

    def submit_tool_result(self, turn_id: str, call_id: str, success: bool, content: str, *,
                           role_id: str = "", scope: AgentMemoryScope | None = None,
                           actor: str | None = None) -> None:
        """Answer a game-tool call by hand; NOT_FOUND, FAILED_PRECONDITION (the call ended) and ALREADY_EXISTS raise.

        role_id, scope, actor: the turn's, so that a load balancer sends the result to the runtime running it.
        """
        request = orch.SubmitToolResultRequest(turn_id=turn_id, call_id=call_id, success=success, content=content)
        self._orchestrator("SubmitToolResult", request,
                                 m.conversation_affinity(role_id, scope, actor, DEFAULT_TURN_ROLE))

    def configure_role(self, config: RoleMemoryConfig) -> RoleMemoryConfig:
        """Register or replace a role's config; returns it as the runtime stored it."""
        request = orch.ConfigureRoleRequest(config=config_to_proto(config))
        return config_from_proto(self._orchestrator("ConfigureRole", request))

    def get_role_config(self, role_id: str) -> RoleMemoryConfig:
        """A role's config (defaults for a role the runtime does not know)."""
        request = orch.GetRoleConfigRequest(role_id=role_id)
        return config_from_proto(self._orchestrator("GetRoleConfig", request))

    def list_roles(self) -> list[RoleMemoryConfig]:
        """Every built-in and configured role."""
        response = self._orchestrator("ListRoles", orch.ListRolesRequest())
        return [config_from_proto(c) for c in response.roles]

    def health(self) -> m.RuntimeHealth:
        """Readiness of the runtime and its model (needs no token)."""
        return m.health(self._orchestrator("Health", orch.HealthRequest()))
