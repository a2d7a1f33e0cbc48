from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TranscriptKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSCRIPT_KIND_USER: _ClassVar[TranscriptKind]
    TRANSCRIPT_KIND_ASSISTANT: _ClassVar[TranscriptKind]
    TRANSCRIPT_KIND_TOOL_CALL: _ClassVar[TranscriptKind]
    TRANSCRIPT_KIND_TOOL_RESULT: _ClassVar[TranscriptKind]

class MemoryToolAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_TOOL_ACTION_UNSPECIFIED: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_WRITE: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_APPEND: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_CLEAR: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_STR_REPLACE: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_INSERT: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_DELETE: _ClassVar[MemoryToolAction]
    MEMORY_TOOL_ACTION_RENAME: _ClassVar[MemoryToolAction]

class ToolResultMemory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_RESULT_MEMORY_UNSPECIFIED: _ClassVar[ToolResultMemory]
    TOOL_RESULT_MEMORY_NONE: _ClassVar[ToolResultMemory]
    TOOL_RESULT_MEMORY_ERRORS_ONLY: _ClassVar[ToolResultMemory]
    TOOL_RESULT_MEMORY_COMPACT_SUMMARY: _ClassVar[ToolResultMemory]
    TOOL_RESULT_MEMORY_FULL: _ClassVar[ToolResultMemory]
TRANSCRIPT_KIND_USER: TranscriptKind
TRANSCRIPT_KIND_ASSISTANT: TranscriptKind
TRANSCRIPT_KIND_TOOL_CALL: TranscriptKind
TRANSCRIPT_KIND_TOOL_RESULT: TranscriptKind
MEMORY_TOOL_ACTION_UNSPECIFIED: MemoryToolAction
MEMORY_TOOL_ACTION_WRITE: MemoryToolAction
MEMORY_TOOL_ACTION_APPEND: MemoryToolAction
MEMORY_TOOL_ACTION_CLEAR: MemoryToolAction
MEMORY_TOOL_ACTION_STR_REPLACE: MemoryToolAction
MEMORY_TOOL_ACTION_INSERT: MemoryToolAction
MEMORY_TOOL_ACTION_DELETE: MemoryToolAction
MEMORY_TOOL_ACTION_RENAME: MemoryToolAction
TOOL_RESULT_MEMORY_UNSPECIFIED: ToolResultMemory
TOOL_RESULT_MEMORY_NONE: ToolResultMemory
TOOL_RESULT_MEMORY_ERRORS_ONLY: ToolResultMemory
TOOL_RESULT_MEMORY_COMPACT_SUMMARY: ToolResultMemory
TOOL_RESULT_MEMORY_FULL: ToolResultMemory

class AgentMemoryScope(_message.Message):
    __slots__ = ("tenant_id", "user_id", "session_id", "topic_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    user_id: str
    session_id: str
    topic_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...

class AgentTarget(_message.Message):
    __slots__ = ("role_id", "scope", "actor")
    ROLE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    role_id: str
    scope: AgentMemoryScope
    actor: str
    def __init__(self, role_id: _Optional[str] = ..., scope: _Optional[_Union[AgentMemoryScope, _Mapping]] = ..., actor: _Optional[str] = ...) -> None: ...

class MemoryVersion(_message.Message):
    __slots__ = ("version", "timestamp", "action", "content_after", "note")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_AFTER_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    version: int
    timestamp: int
    action: str
    content_after: str
    note: str
    def __init__(self, version: _Optional[int] = ..., timestamp: _Optional[int] = ..., action: _Optional[str] = ..., content_after: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class AgentMemoryState(_message.Message):
    __slots__ = ("memory", "last_system_prompt", "system_prompt_memory_snapshot", "system_prompt_memory_version", "max_memory_versions", "versions")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    LAST_SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_MEMORY_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_MEMORY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    memory: str
    last_system_prompt: str
    system_prompt_memory_snapshot: str
    system_prompt_memory_version: int
    max_memory_versions: int
    versions: _containers.RepeatedCompositeFieldContainer[MemoryVersion]
    def __init__(self, memory: _Optional[str] = ..., last_system_prompt: _Optional[str] = ..., system_prompt_memory_snapshot: _Optional[str] = ..., system_prompt_memory_version: _Optional[int] = ..., max_memory_versions: _Optional[int] = ..., versions: _Optional[_Iterable[_Union[MemoryVersion, _Mapping]]] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content", "timestamp", "order")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    timestamp: int
    order: int
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., timestamp: _Optional[int] = ..., order: _Optional[int] = ...) -> None: ...

class TranscriptEntry(_message.Message):
    __slots__ = ("kind", "name", "content", "call_id", "timestamp", "order", "is_chat_message")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    IS_CHAT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: TranscriptKind
    name: str
    content: str
    call_id: str
    timestamp: int
    order: int
    is_chat_message: bool
    def __init__(self, kind: _Optional[_Union[TranscriptKind, str]] = ..., name: _Optional[str] = ..., content: _Optional[str] = ..., call_id: _Optional[str] = ..., timestamp: _Optional[int] = ..., order: _Optional[int] = ..., is_chat_message: _Optional[bool] = ...) -> None: ...

class RoleMemoryConfig(_message.Message):
    __slots__ = ("role_id", "use_memory_tool", "default_action", "with_chat_history", "persist_chat_history", "max_chat_history_messages", "context_tokens", "max_output_tokens", "max_tool_call_roundtrips", "tool_result_memory", "temperature", "use_llm_context_compaction", "compaction_trigger_ratio", "max_memory_chars", "system_prompt", "send_earlier_sessions")
    ROLE_ID_FIELD_NUMBER: _ClassVar[int]
    USE_MEMORY_TOOL_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACTION_FIELD_NUMBER: _ClassVar[int]
    WITH_CHAT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    PERSIST_CHAT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    MAX_CHAT_HISTORY_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALL_ROUNDTRIPS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_MEMORY_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    USE_LLM_CONTEXT_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_TRIGGER_RATIO_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_CHARS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SEND_EARLIER_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    role_id: str
    use_memory_tool: bool
    default_action: MemoryToolAction
    with_chat_history: bool
    persist_chat_history: bool
    max_chat_history_messages: int
    context_tokens: int
    max_output_tokens: int
    max_tool_call_roundtrips: int
    tool_result_memory: ToolResultMemory
    temperature: float
    use_llm_context_compaction: bool
    compaction_trigger_ratio: float
    max_memory_chars: int
    system_prompt: str
    send_earlier_sessions: bool
    def __init__(self, role_id: _Optional[str] = ..., use_memory_tool: _Optional[bool] = ..., default_action: _Optional[_Union[MemoryToolAction, str]] = ..., with_chat_history: _Optional[bool] = ..., persist_chat_history: _Optional[bool] = ..., max_chat_history_messages: _Optional[int] = ..., context_tokens: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., max_tool_call_roundtrips: _Optional[int] = ..., tool_result_memory: _Optional[_Union[ToolResultMemory, str]] = ..., temperature: _Optional[float] = ..., use_llm_context_compaction: _Optional[bool] = ..., compaction_trigger_ratio: _Optional[float] = ..., max_memory_chars: _Optional[int] = ..., system_prompt: _Optional[str] = ..., send_earlier_sessions: _Optional[bool] = ...) -> None: ...
