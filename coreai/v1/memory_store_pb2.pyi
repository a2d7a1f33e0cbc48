from coreai.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoadStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOAD_STATUS_UNSPECIFIED: _ClassVar[LoadStatus]
    LOAD_STATUS_LOADED: _ClassVar[LoadStatus]
    LOAD_STATUS_NOT_FOUND: _ClassVar[LoadStatus]
    LOAD_STATUS_FAILED: _ClassVar[LoadStatus]
LOAD_STATUS_UNSPECIFIED: LoadStatus
LOAD_STATUS_LOADED: LoadStatus
LOAD_STATUS_NOT_FOUND: LoadStatus
LOAD_STATUS_FAILED: LoadStatus

class LoadStateRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class LoadStateResponse(_message.Message):
    __slots__ = ("status", "state", "reason")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    status: LoadStatus
    state: _common_pb2.AgentMemoryState
    reason: str
    def __init__(self, status: _Optional[_Union[LoadStatus, str]] = ..., state: _Optional[_Union[_common_pb2.AgentMemoryState, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ApplyMemoryToolRequest(_message.Message):
    __slots__ = ("target", "action", "content", "old_text", "new_text", "anchor", "line", "replace_all", "arguments_json")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    OLD_TEXT_FIELD_NUMBER: _ClassVar[int]
    NEW_TEXT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ALL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    action: str
    content: str
    old_text: str
    new_text: str
    anchor: str
    line: int
    replace_all: bool
    arguments_json: str
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., action: _Optional[str] = ..., content: _Optional[str] = ..., old_text: _Optional[str] = ..., new_text: _Optional[str] = ..., anchor: _Optional[str] = ..., line: _Optional[int] = ..., replace_all: _Optional[bool] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class MemoryToolResult(_message.Message):
    __slots__ = ("success", "message", "error", "version", "memory_length", "memory", "result_json")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    success: bool
    message: str
    error: str
    version: int
    memory_length: int
    memory: str
    result_json: str
    def __init__(self, success: _Optional[bool] = ..., message: _Optional[str] = ..., error: _Optional[str] = ..., version: _Optional[int] = ..., memory_length: _Optional[int] = ..., memory: _Optional[str] = ..., result_json: _Optional[str] = ...) -> None: ...

class SaveStateRequest(_message.Message):
    __slots__ = ("target", "state")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    state: _common_pb2.AgentMemoryState
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., state: _Optional[_Union[_common_pb2.AgentMemoryState, _Mapping]] = ...) -> None: ...

class SaveStateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClearMemoryRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class ClearMemoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListVersionsRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class ListVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[_common_pb2.MemoryVersion]
    def __init__(self, versions: _Optional[_Iterable[_Union[_common_pb2.MemoryVersion, _Mapping]]] = ...) -> None: ...

class RevertMemoryRequest(_message.Message):
    __slots__ = ("target", "version")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    version: int
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class DiffVersionsRequest(_message.Message):
    __slots__ = ("target", "from_version", "to_version")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    from_version: int
    to_version: int
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., from_version: _Optional[int] = ..., to_version: _Optional[int] = ...) -> None: ...

class DiffVersionsResponse(_message.Message):
    __slots__ = ("unified_diff",)
    UNIFIED_DIFF_FIELD_NUMBER: _ClassVar[int]
    unified_diff: str
    def __init__(self, unified_diff: _Optional[str] = ...) -> None: ...

class AppendChatMessageRequest(_message.Message):
    __slots__ = ("target", "role", "content", "persist")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    PERSIST_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    role: str
    content: str
    persist: bool
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., role: _Optional[str] = ..., content: _Optional[str] = ..., persist: _Optional[bool] = ...) -> None: ...

class AppendChatMessageResponse(_message.Message):
    __slots__ = ("integrity",)
    INTEGRITY_FIELD_NUMBER: _ClassVar[int]
    integrity: HistoryIntegrity
    def __init__(self, integrity: _Optional[_Union[HistoryIntegrity, _Mapping]] = ...) -> None: ...

class GetChatHistoryRequest(_message.Message):
    __slots__ = ("target", "max_messages")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    max_messages: int
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., max_messages: _Optional[int] = ...) -> None: ...

class GetChatHistoryResponse(_message.Message):
    __slots__ = ("messages", "integrity")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    integrity: HistoryIntegrity
    def __init__(self, messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., integrity: _Optional[_Union[HistoryIntegrity, _Mapping]] = ...) -> None: ...

class ClearChatHistoryRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class ClearChatHistoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTranscriptRequest(_message.Message):
    __slots__ = ("target", "max_entries")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    max_entries: int
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., max_entries: _Optional[int] = ...) -> None: ...

class GetTranscriptResponse(_message.Message):
    __slots__ = ("entries", "integrity")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    INTEGRITY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_common_pb2.TranscriptEntry]
    integrity: HistoryIntegrity
    def __init__(self, entries: _Optional[_Iterable[_Union[_common_pb2.TranscriptEntry, _Mapping]]] = ..., integrity: _Optional[_Union[HistoryIntegrity, _Mapping]] = ...) -> None: ...

class HistoryIntegrity(_message.Message):
    __slots__ = ("unreadable_lines", "quarantine_file")
    UNREADABLE_LINES_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_FILE_FIELD_NUMBER: _ClassVar[int]
    unreadable_lines: int
    quarantine_file: str
    def __init__(self, unreadable_lines: _Optional[int] = ..., quarantine_file: _Optional[str] = ...) -> None: ...

class LoadSummaryRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class LoadSummaryResponse(_message.Message):
    __slots__ = ("found", "summary")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    found: bool
    summary: str
    def __init__(self, found: _Optional[bool] = ..., summary: _Optional[str] = ...) -> None: ...

class SaveSummaryRequest(_message.Message):
    __slots__ = ("target", "summary")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    summary: str
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., summary: _Optional[str] = ...) -> None: ...

class SaveSummaryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClearSummaryRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ...) -> None: ...

class ClearSummaryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RoleSnapshot(_message.Message):
    __slots__ = ("role_id", "actor", "state", "history", "summary")
    ROLE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    role_id: str
    actor: str
    state: _common_pb2.AgentMemoryState
    history: _containers.RepeatedCompositeFieldContainer[_common_pb2.TranscriptEntry]
    summary: str
    def __init__(self, role_id: _Optional[str] = ..., actor: _Optional[str] = ..., state: _Optional[_Union[_common_pb2.AgentMemoryState, _Mapping]] = ..., history: _Optional[_Iterable[_Union[_common_pb2.TranscriptEntry, _Mapping]]] = ..., summary: _Optional[str] = ...) -> None: ...

class ScopeSnapshot(_message.Message):
    __slots__ = ("format_version", "scope", "roles", "exported_at")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_AT_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    scope: _common_pb2.AgentMemoryScope
    roles: _containers.RepeatedCompositeFieldContainer[RoleSnapshot]
    exported_at: int
    def __init__(self, format_version: _Optional[int] = ..., scope: _Optional[_Union[_common_pb2.AgentMemoryScope, _Mapping]] = ..., roles: _Optional[_Iterable[_Union[RoleSnapshot, _Mapping]]] = ..., exported_at: _Optional[int] = ...) -> None: ...

class ExportSnapshotRequest(_message.Message):
    __slots__ = ("scope", "role_ids", "actors")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ROLE_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    scope: _common_pb2.AgentMemoryScope
    role_ids: _containers.RepeatedScalarFieldContainer[str]
    actors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, scope: _Optional[_Union[_common_pb2.AgentMemoryScope, _Mapping]] = ..., role_ids: _Optional[_Iterable[str]] = ..., actors: _Optional[_Iterable[str]] = ...) -> None: ...

class ExportSnapshotResponse(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: ScopeSnapshot
    def __init__(self, snapshot: _Optional[_Union[ScopeSnapshot, _Mapping]] = ...) -> None: ...

class ImportSnapshotRequest(_message.Message):
    __slots__ = ("snapshot", "target_scope")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    TARGET_SCOPE_FIELD_NUMBER: _ClassVar[int]
    snapshot: ScopeSnapshot
    target_scope: _common_pb2.AgentMemoryScope
    def __init__(self, snapshot: _Optional[_Union[ScopeSnapshot, _Mapping]] = ..., target_scope: _Optional[_Union[_common_pb2.AgentMemoryScope, _Mapping]] = ...) -> None: ...

class ImportSnapshotResponse(_message.Message):
    __slots__ = ("roles_imported",)
    ROLES_IMPORTED_FIELD_NUMBER: _ClassVar[int]
    roles_imported: int
    def __init__(self, roles_imported: _Optional[int] = ...) -> None: ...

class ForgetPlayerRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: _common_pb2.AgentMemoryScope
    def __init__(self, scope: _Optional[_Union[_common_pb2.AgentMemoryScope, _Mapping]] = ...) -> None: ...

class ForgetPlayerResponse(_message.Message):
    __slots__ = ("saves_erased", "unattributed_saves")
    SAVES_ERASED_FIELD_NUMBER: _ClassVar[int]
    UNATTRIBUTED_SAVES_FIELD_NUMBER: _ClassVar[int]
    saves_erased: int
    unattributed_saves: int
    def __init__(self, saves_erased: _Optional[int] = ..., unattributed_saves: _Optional[int] = ...) -> None: ...
