"""The `coreai.v1.MemoryStore` service: proto requests in, proto responses out, core errors as statuses.

No memory logic lives here: every call goes to the core (`MemoryTool`, `revert_memory`,
`list_versions`, `diff_versions`, the scoped stores, snapshots).

Which failures become statuses, and which stay results:
- ApplyMemoryTool and RevertMemory answer with a `MemoryToolResult`, as the model sees it. What the
  edit itself refuses (`old_text was not found`, a text the action requires is missing, a bad line
  number) stays a `success=false` result with its `result_json`. A call that is not a valid memory
  call at all (blank role, bad scope, arguments that cannot be parsed or repaired, unknown action or
  argument, both typed fields and `arguments_json`) is INVALID_ARGUMENT; an unreadable document is
  FAILED_PRECONDITION; MaxMemoryChars is RESOURCE_EXHAUSTED; an unknown version or a revert of a key
  without a document is NOT_FOUND; a write that did not become durable, or a save whose lock another
  process holds past the lock timeout, is UNAVAILABLE. The status message is the tool's own error text.
- LoadState reports an unreadable document as `LOAD_STATUS_FAILED` with its reason (the contract's
  TryLoad), not as an error; LoadSummary answers an unreadable summary with FAILED_PRECONDITION.
- AppendChatMessage, GetChatHistory and GetTranscript carry `integrity` when the history file has (or
  had) unreadable lines: how many, and where the file was kept aside before its readable rows were rewritten.
- ExportSnapshot with no role named exports every save of the scope, found through the identity
  index; saves it cannot attribute fail it with FAILED_PRECONDITION naming their number.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from coreai.v1 import common_pb2
from coreai.v1 import memory_store_pb2 as pb
from pyruntime.errors import (
    CoreAIError,
    InvalidArgumentError,
    LimitExceededError,
    MemoryUnreadableError,
    NotFoundError,
)
from pyruntime.memory import (
    MEMORY_ARGUMENT_NAMES,
    MemoryTool,
    MemoryToolResult,
    diff_versions,
    list_versions,
    parse_memory_tool_arguments,
    revert_memory,
)
from pyruntime.memory.state import AgentMemoryState
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.proto_fields import to_message
from pyruntime.service.erasure import ConversationEraser
from pyruntime.service.executor import BlockingCalls, blocking
from pyruntime.service.status import ServiceError, StatusCode, status_for
from pyruntime.service.targets import Target, check_id, scope_from_proto, target_from_proto
from pyruntime.stores import (
    LoadResult,
    LoadStatus,
    RoleSnapshot,
    ScopeSnapshot,
    StoreBundle,
    export_scope_snapshot,
    import_scope_snapshot,
    validate_scope_snapshot,
)
from pyruntime.stores.base import AgentMemoryStore, ChatMessage, Mutation
from pyruntime.stores.forget import erase_saves, player_saves
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.stores.snapshot import entry_to_proto, state_from_proto, state_to_proto

_TYPED_ARGUMENTS = tuple(name for name in MEMORY_ARGUMENT_NAMES if name != "action")

R = TypeVar("R")


def tool_result_to_proto(result: MemoryToolResult) -> pb.MemoryToolResult:
    """The `coreai.v1.MemoryToolResult` of a result, with the exact JSON the model sees."""
    message = pb.MemoryToolResult(success=result.success, message=result.message or "", error=result.error or "",
                                  version=result.version, memory_length=result.memory_length,
                                  result_json=result.to_json())
    if result.memory is not None:
        message.memory = result.memory
    return message


def chat_message_to_proto(message: ChatMessage) -> common_pb2.ChatMessage:
    """The `coreai.v1.ChatMessage` of a chat message."""
    return to_message(message, common_pb2.ChatMessage)


class _OutcomeRecorder:
    """The key store seen by one tool call, remembering which status a failure of that call deserves.

    The memory tool turns every failure into a result; this lets the service tell a refused edit
    (stays a result) from an unreadable document, a size limit or a failed write (become statuses)
    without reading error texts.
    """

    def __init__(self, store: AgentMemoryStore) -> None:
        self._store = store
        self.status: StatusCode | None = None

    def try_load(self, key: str) -> LoadResult:
        """The store's try_load, noting an unreadable or missing document."""
        try:
            loaded = self._store.try_load(key)
        except Exception as exc:
            self._note(exc)
            raise
        if loaded.status is LoadStatus.FAILED:
            self.status = StatusCode.FAILED_PRECONDITION
        elif loaded.status is LoadStatus.NOT_FOUND:
            self.status = StatusCode.NOT_FOUND
        return loaded

    def mutate(self, key: str, fn: Mutation) -> AgentMemoryState:
        """The store's mutate, noting why it failed."""
        try:
            return self._store.mutate(key, fn)
        except Exception as exc:
            self._note(exc)
            raise

    def _note(self, exc: BaseException) -> None:
        if isinstance(exc, MemoryUnreadableError):
            self.status = StatusCode.FAILED_PRECONDITION
        elif isinstance(exc, LimitExceededError):
            self.status = StatusCode.RESOURCE_EXHAUSTED
        elif isinstance(exc, NotFoundError):
            self.status = StatusCode.NOT_FOUND
        elif isinstance(exc, InvalidArgumentError):
            self.status = None  # the edit was refused: that stays a result
        elif isinstance(exc, (CoreAIError, OSError)):
            self.status = StatusCode.UNAVAILABLE

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _tool_arguments(request: pb.ApplyMemoryToolRequest) -> str | dict[str, Any]:
    """The `memory` call of a request: its arguments_json, or its typed fields as an argument object."""
    typed = {name: getattr(request, name) for name in _TYPED_ARGUMENTS if request.HasField(name)}
    if request.arguments_json.strip():
        if typed or request.action:
            raise InvalidArgumentError("give either the typed fields (action, content, ...) or arguments_json, "
                                       "not both")
        return request.arguments_json
    if not request.action.strip():
        raise InvalidArgumentError("action is required (or arguments_json with the model's raw call)")
    return {"action": request.action, **typed}


def _integrity(view: ScopedAgentMemoryStore, role_id: str) -> pb.HistoryIntegrity | None:
    """The `HistoryIntegrity` of a role's history file, None (field absent) when it is clean."""
    status = view.history_status(role_id)
    if not status.unreadable_lines and not status.quarantine_file:
        return None
    return pb.HistoryIntegrity(unreadable_lines=status.unreadable_lines, quarantine_file=status.quarantine_file)


def _result_or_status(result: MemoryToolResult, recorder: _OutcomeRecorder) -> pb.MemoryToolResult:
    if not result.success and recorder.status is not None:
        raise ServiceError(recorder.status, result.error or "the memory call failed")
    return tool_result_to_proto(result)


class MemoryStoreService(BlockingCalls):
    """Implements every `coreai.v1.MemoryStore` RPC over one runtime's stores and role policy."""

    def __init__(self, stores: StoreBundle, policy: AgentMemoryPolicy | None = None, *, workers: int = 16,
                 eraser: ConversationEraser | None = None) -> None:
        """`eraser`: what a deletion erases besides the saves (`attach_eraser`); None: the saves only."""
        super().__init__(workers)
        self.stores: Final = stores
        """The stores this service reads and writes."""
        self.policy: Final = policy if policy is not None else AgentMemoryPolicy()
        """The role policy (MaxMemoryChars, export's default roles)."""
        self._eraser = eraser

    def attach_eraser(self, eraser: ConversationEraser) -> None:
        """From now on ClearChatHistory, ClearMemory and ForgetPlayer erase the conversations through `eraser` too
        (the turn engine's and the model's states of them: `service/erasure.py`)."""
        self._eraser = eraser

    async def _deleting(self, keys: Sequence[str], clear: Callable[[], Awaitable[None]]) -> None:
        """Run a deletion's store work through the eraser (statuses for what it raises)."""
        if self._eraser is None:
            await clear()
            return
        try:
            await self._eraser(keys, clear)
        except ServiceError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            raise status_for(exc) from None

    async def _clear_conversation(self, message: common_pb2.AgentTarget,
                                  clear: Callable[[ScopedAgentMemoryStore, str], None]) -> None:
        """`clear(view, role_id)` on the target's saves, through the eraser (`_deleting`)."""
        target = await self.run(target_from_proto, message)
        key = await self.run(self._key, target)
        await self._deleting([key], lambda: self.run(clear, self._view(target), target.role_id))

    def _view(self, target: Target) -> ScopedAgentMemoryStore:
        return self.stores.scoped(target.scope, target.actor)

    def _key(self, target: Target) -> str:
        return self._view(target).key(target.role_id)

    def _newest(self, target_message: common_pb2.AgentTarget, read: Callable[[ScopedAgentMemoryStore, str], Sequence[R]]
                ) -> tuple[Sequence[R], pb.HistoryIntegrity | None]:
        """A conversation's newest rows as `read(view, role)` reads them, with its history file's integrity."""
        target = target_from_proto(target_message)
        view = self._view(target)
        return read(view, target.role_id), _integrity(view, target.role_id)

    # -- memory document --------------------------------------------------------------------

    @blocking
    def load_state(self, request: pb.LoadStateRequest) -> pb.LoadStateResponse:
        """TryLoad: Loaded (with state), NotFound, or Failed with a reason."""
        target = target_from_proto(request.target)
        loaded = self._view(target).try_load(target.role_id)
        if loaded.status is LoadStatus.LOADED and loaded.state is not None:
            return pb.LoadStateResponse(status=pb.LOAD_STATUS_LOADED, state=state_to_proto(loaded.state))
        if loaded.status is LoadStatus.FAILED:
            return pb.LoadStateResponse(status=pb.LOAD_STATUS_FAILED, reason=loaded.reason or "unreadable")
        return pb.LoadStateResponse(status=pb.LOAD_STATUS_NOT_FOUND)

    @blocking
    def apply_memory_tool(self, request: pb.ApplyMemoryToolRequest) -> pb.MemoryToolResult:
        """One `memory` tool call, exactly as the model would make it."""
        target = target_from_proto(request.target)
        args = parse_memory_tool_arguments(_tool_arguments(request))
        max_chars = self.policy.get(target.role_id).effective_max_memory_chars
        recorder = _OutcomeRecorder(self.stores.memory)
        result = MemoryTool(recorder, self._key(target), max_memory_chars=max_chars).execute(args)
        return _result_or_status(result, recorder)

    @blocking
    def save_state(self, request: pb.SaveStateRequest) -> pb.SaveStateResponse:
        """Replace the whole state (heals an unreadable document)."""
        target = target_from_proto(request.target)
        if not request.HasField("state"):
            raise InvalidArgumentError("state is required")
        state = state_from_proto(request.state)
        # The snapshot validator checks a state the same way an import does.
        validate_scope_snapshot(ScopeSnapshot(target.scope, [RoleSnapshot(target.role_id, target.actor, state)], 0))
        self._view(target).save(target.role_id, state)
        return pb.SaveStateResponse()

    async def clear_memory(self, request: pb.ClearMemoryRequest) -> pb.ClearMemoryResponse:
        """Store-level Clear: the document, its versions and snapshot; chat stays. The engine's states of the
        conversation go too (they hold the memory as it was sent)."""
        await self._clear_conversation(request.target, ScopedAgentMemoryStore.clear)
        return pb.ClearMemoryResponse()

    @blocking
    def list_versions(self, request: pb.ListVersionsRequest) -> pb.ListVersionsResponse:
        """Retained versions, oldest first."""
        target = target_from_proto(request.target)
        versions = list_versions(self.stores.memory, self._key(target))
        return pb.ListVersionsResponse(versions=[
            common_pb2.MemoryVersion(version=v.version, timestamp=v.timestamp, action=v.action,
                                     content_after=v.content_after, note=v.note)
            for v in versions
        ])

    @blocking
    def revert_memory(self, request: pb.RevertMemoryRequest) -> pb.MemoryToolResult:
        """Set the memory to a retained version (recorded as a new `revert` version)."""
        target = target_from_proto(request.target)
        recorder = _OutcomeRecorder(self.stores.memory)
        result = revert_memory(recorder, self._key(target), request.version)
        return _result_or_status(result, recorder)

    @blocking
    def diff_versions(self, request: pb.DiffVersionsRequest) -> pb.DiffVersionsResponse:
        """Unified diff between two retained versions (0 = the empty document)."""
        target = target_from_proto(request.target)
        diff = diff_versions(self.stores.memory, self._key(target), request.from_version, request.to_version)
        return pb.DiffVersionsResponse(unified_diff=diff)

    # -- chat history and transcript ----------------------------------------------------------

    @blocking
    def append_chat_message(self, request: pb.AppendChatMessageRequest) -> pb.AppendChatMessageResponse:
        """Append one chat message (persist=false: this process only)."""
        target = target_from_proto(request.target)
        role = check_id("role", request.role)
        view = self._view(target)
        view.append_chat_message(target.role_id, role, request.content, request.persist)
        return pb.AppendChatMessageResponse(integrity=_integrity(view, target.role_id))

    @blocking
    def get_chat_history(self, request: pb.GetChatHistoryRequest) -> pb.GetChatHistoryResponse:
        """Oldest first, the newest max_messages (0 = all)."""
        messages, integrity = self._newest(request.target, lambda view, role: view.get_chat_history(
            role, request.max_messages))
        return pb.GetChatHistoryResponse(messages=[chat_message_to_proto(m) for m in messages], integrity=integrity)

    async def clear_chat_history(self, request: pb.ClearChatHistoryRequest) -> pb.ClearChatHistoryResponse:
        """Chat history, transcript and rolling summary; memory stays. The engine's states of the conversation
        (slot, parked and saved states, folds and prewarms of it) go too."""
        await self._clear_conversation(request.target, ScopedAgentMemoryStore.clear_chat_history)
        return pb.ClearChatHistoryResponse()

    @blocking
    def get_transcript(self, request: pb.GetTranscriptRequest) -> pb.GetTranscriptResponse:
        """Oldest first, the newest max_entries (0 = all)."""
        entries, integrity = self._newest(request.target, lambda view, role: view.get_transcript(
            role, request.max_entries))
        return pb.GetTranscriptResponse(entries=[entry_to_proto(e) for e in entries], integrity=integrity)

    # -- rolling summary ------------------------------------------------------------------------

    @blocking
    def load_summary(self, request: pb.LoadSummaryRequest) -> pb.LoadSummaryResponse:
        """The rolling summary, if any."""
        target = target_from_proto(request.target)
        summary = self._view(target).load_summary(target.role_id)
        return pb.LoadSummaryResponse(found=summary is not None, summary=summary or "")

    @blocking
    def save_summary(self, request: pb.SaveSummaryRequest) -> pb.SaveSummaryResponse:
        """Replace the rolling summary."""
        target = target_from_proto(request.target)
        self._view(target).save_summary(target.role_id, request.summary)
        return pb.SaveSummaryResponse()

    @blocking
    def clear_summary(self, request: pb.ClearSummaryRequest) -> pb.ClearSummaryResponse:
        """Delete the rolling summary."""
        target = target_from_proto(request.target)
        self._view(target).clear_summary(target.role_id)
        return pb.ClearSummaryResponse()

    # -- snapshots --------------------------------------------------------------------------------

    @blocking
    def export_snapshot(self, request: pb.ExportSnapshotRequest) -> pb.ExportSnapshotResponse:
        """The named roles x actors of one scope; with no role named, every save the scope has (identity index)."""
        scope = scope_from_proto(request.scope)
        role_ids: Sequence[str] | None = [check_id("role_ids[]", r) for r in request.role_ids] or None
        actors: Sequence[str | None] | None = [check_id("actors[]", a) for a in request.actors] or None
        candidates = [c.role_id for c in self.policy.roles()]
        snapshot = export_scope_snapshot(self.stores, scope, role_ids, actors, candidate_roles=candidates)
        return pb.ExportSnapshotResponse(snapshot=snapshot.to_proto())

    async def forget_player(self, request: pb.ForgetPlayerRequest) -> pb.ForgetPlayerResponse:
        """Erase every save in one scope (a player: tenant + user), and the engine's states of those conversations."""
        scope = await self.run(scope_from_proto, request.scope)
        saves = await self.run(player_saves, self.stores, scope)
        if saves.keys:
            await self._deleting(saves.keys, lambda: self.run(erase_saves, self.stores, saves.keys))
        return pb.ForgetPlayerResponse(saves_erased=len(saves.keys), unattributed_saves=saves.unattributed)

    @blocking
    def import_snapshot(self, request: pb.ImportSnapshotRequest) -> pb.ImportSnapshotResponse:
        """Replace each snapshot identity's data; the whole snapshot is validated before anything is written."""
        if not request.HasField("snapshot"):
            raise InvalidArgumentError("snapshot is required")
        scope_from_proto(request.snapshot.scope, "snapshot.scope")
        for index, role in enumerate(request.snapshot.roles):
            check_id(f"snapshot.roles[{index}].role_id", role.role_id)
            check_id(f"snapshot.roles[{index}].actor", role.actor)
        target = scope_from_proto(request.target_scope, "target_scope") if request.HasField("target_scope") else None
        snapshot = ScopeSnapshot.from_proto(request.snapshot)
        return pb.ImportSnapshotResponse(roles_imported=import_scope_snapshot(self.stores, snapshot, target))
