from coreai.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompactionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPACTION_KIND_NONE: _ClassVar[CompactionKind]
    COMPACTION_KIND_DETERMINISTIC: _ClassVar[CompactionKind]
    COMPACTION_KIND_LLM: _ClassVar[CompactionKind]

class TurnStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TURN_STATUS_UNSPECIFIED: _ClassVar[TurnStatus]
    TURN_STATUS_OK: _ClassVar[TurnStatus]
    TURN_STATUS_FAILED: _ClassVar[TurnStatus]
    TURN_STATUS_TIMED_OUT: _ClassVar[TurnStatus]
    TURN_STATUS_CANCELLED: _ClassVar[TurnStatus]
    TURN_STATUS_TOOL_LOOP_ENDED: _ClassVar[TurnStatus]
COMPACTION_KIND_NONE: CompactionKind
COMPACTION_KIND_DETERMINISTIC: CompactionKind
COMPACTION_KIND_LLM: CompactionKind
TURN_STATUS_UNSPECIFIED: TurnStatus
TURN_STATUS_OK: TurnStatus
TURN_STATUS_FAILED: TurnStatus
TURN_STATUS_TIMED_OUT: TurnStatus
TURN_STATUS_CANCELLED: TurnStatus
TURN_STATUS_TOOL_LOOP_ENDED: TurnStatus

class ShutdownRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolNameList(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class RunTaskRequest(_message.Message):
    __slots__ = ("target", "hint", "source_tag", "trace_id", "request_system_instructions", "allowed_tool_names", "forced_tool_mode", "max_output_tokens", "world_state", "temperature", "timeout_ms", "client_tools", "client_tool_timeout_ms", "wait_memory_write")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TAG_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_SYSTEM_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    FORCED_TOOL_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WORLD_STATE_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MEMORY_WRITE_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    hint: str
    source_tag: str
    trace_id: str
    request_system_instructions: str
    allowed_tool_names: ToolNameList
    forced_tool_mode: str
    max_output_tokens: int
    world_state: str
    temperature: float
    timeout_ms: int
    client_tools: _containers.RepeatedCompositeFieldContainer[ClientToolDefinition]
    client_tool_timeout_ms: int
    wait_memory_write: bool
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., hint: _Optional[str] = ..., source_tag: _Optional[str] = ..., trace_id: _Optional[str] = ..., request_system_instructions: _Optional[str] = ..., allowed_tool_names: _Optional[_Union[ToolNameList, _Mapping]] = ..., forced_tool_mode: _Optional[str] = ..., max_output_tokens: _Optional[int] = ..., world_state: _Optional[str] = ..., temperature: _Optional[float] = ..., timeout_ms: _Optional[int] = ..., client_tools: _Optional[_Iterable[_Union[ClientToolDefinition, _Mapping]]] = ..., client_tool_timeout_ms: _Optional[int] = ..., wait_memory_write: _Optional[bool] = ...) -> None: ...

class ClientToolDefinition(_message.Message):
    __slots__ = ("name", "description", "parameters_json_schema")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json_schema: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json_schema: _Optional[str] = ...) -> None: ...

class ClientToolCall(_message.Message):
    __slots__ = ("turn_id", "call_id", "name", "arguments_json", "timeout_ms")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    call_id: str
    name: str
    arguments_json: str
    timeout_ms: int
    def __init__(self, turn_id: _Optional[str] = ..., call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class SubmitToolResultRequest(_message.Message):
    __slots__ = ("turn_id", "call_id", "success", "content")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    call_id: str
    success: bool
    content: str
    def __init__(self, turn_id: _Optional[str] = ..., call_id: _Optional[str] = ..., success: _Optional[bool] = ..., content: _Optional[str] = ...) -> None: ...

class SubmitToolResultResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClippedBullet(_message.Message):
    __slots__ = ("message_id", "chars_kept", "chars_dropped")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CHARS_KEPT_FIELD_NUMBER: _ClassVar[int]
    CHARS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    chars_kept: int
    chars_dropped: int
    def __init__(self, message_id: _Optional[str] = ..., chars_kept: _Optional[int] = ..., chars_dropped: _Optional[int] = ...) -> None: ...

class CutReport(_message.Message):
    __slots__ = ("stored_messages", "sent_verbatim", "pruned_ids", "folded_ids", "deferred_ids", "left_out_ids", "clipped_bullets", "tokens_before", "tokens_after", "compaction", "compaction_fell_back", "summary_tokens_sent", "summary_chars_dropped", "overflow_retries", "lossy", "already_folded", "compaction_deferred", "folded_between_turns", "earlier_session_ids")
    STORED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SENT_VERBATIM_FIELD_NUMBER: _ClassVar[int]
    PRUNED_IDS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_IDS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_IDS_FIELD_NUMBER: _ClassVar[int]
    LEFT_OUT_IDS_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_BULLETS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FELL_BACK_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_TOKENS_SENT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_CHARS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_RETRIES_FIELD_NUMBER: _ClassVar[int]
    LOSSY_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FOLDED_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_DEFERRED_FIELD_NUMBER: _ClassVar[int]
    FOLDED_BETWEEN_TURNS_FIELD_NUMBER: _ClassVar[int]
    EARLIER_SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    stored_messages: int
    sent_verbatim: int
    pruned_ids: _containers.RepeatedScalarFieldContainer[str]
    folded_ids: _containers.RepeatedScalarFieldContainer[str]
    deferred_ids: _containers.RepeatedScalarFieldContainer[str]
    left_out_ids: _containers.RepeatedScalarFieldContainer[str]
    clipped_bullets: _containers.RepeatedCompositeFieldContainer[ClippedBullet]
    tokens_before: int
    tokens_after: int
    compaction: CompactionKind
    compaction_fell_back: bool
    summary_tokens_sent: int
    summary_chars_dropped: int
    overflow_retries: int
    lossy: bool
    already_folded: int
    compaction_deferred: bool
    folded_between_turns: bool
    earlier_session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stored_messages: _Optional[int] = ..., sent_verbatim: _Optional[int] = ..., pruned_ids: _Optional[_Iterable[str]] = ..., folded_ids: _Optional[_Iterable[str]] = ..., deferred_ids: _Optional[_Iterable[str]] = ..., left_out_ids: _Optional[_Iterable[str]] = ..., clipped_bullets: _Optional[_Iterable[_Union[ClippedBullet, _Mapping]]] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., compaction: _Optional[_Union[CompactionKind, str]] = ..., compaction_fell_back: _Optional[bool] = ..., summary_tokens_sent: _Optional[int] = ..., summary_chars_dropped: _Optional[int] = ..., overflow_retries: _Optional[int] = ..., lossy: _Optional[bool] = ..., already_folded: _Optional[int] = ..., compaction_deferred: _Optional[bool] = ..., folded_between_turns: _Optional[bool] = ..., earlier_session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolCallEvent(_message.Message):
    __slots__ = ("call_id", "name", "arguments_json")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    arguments_json: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolResultEvent(_message.Message):
    __slots__ = ("call_id", "name", "success", "content")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    success: bool
    content: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., success: _Optional[bool] = ..., content: _Optional[str] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class TurnUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "model_calls", "cached_prompt_tokens", "evaluated_prompt_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    cached_prompt_tokens: int
    evaluated_prompt_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., model_calls: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ..., evaluated_prompt_tokens: _Optional[int] = ...) -> None: ...

class RunTaskResponse(_message.Message):
    __slots__ = ("status", "text", "error", "tool_calls", "tool_results", "cut_report", "usage", "trace_id", "memory_write_pending", "memory_write")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    CUT_REPORT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WRITE_PENDING_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WRITE_FIELD_NUMBER: _ClassVar[int]
    status: TurnStatus
    text: str
    error: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCallEvent]
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResultEvent]
    cut_report: CutReport
    usage: TurnUsage
    trace_id: str
    memory_write_pending: bool
    memory_write: MemoryWrite
    def __init__(self, status: _Optional[_Union[TurnStatus, str]] = ..., text: _Optional[str] = ..., error: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCallEvent, _Mapping]]] = ..., tool_results: _Optional[_Iterable[_Union[ToolResultEvent, _Mapping]]] = ..., cut_report: _Optional[_Union[CutReport, _Mapping]] = ..., usage: _Optional[_Union[TurnUsage, _Mapping]] = ..., trace_id: _Optional[str] = ..., memory_write_pending: _Optional[bool] = ..., memory_write: _Optional[_Union[MemoryWrite, _Mapping]] = ...) -> None: ...

class MemoryWrite(_message.Message):
    __slots__ = ("trace_id", "changed", "lines", "reason", "version", "summary")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    changed: bool
    lines: _containers.RepeatedCompositeFieldContainer[MemoryWriteLine]
    reason: str
    version: int
    summary: str
    def __init__(self, trace_id: _Optional[str] = ..., changed: _Optional[bool] = ..., lines: _Optional[_Iterable[_Union[MemoryWriteLine, _Mapping]]] = ..., reason: _Optional[str] = ..., version: _Optional[int] = ..., summary: _Optional[str] = ...) -> None: ...

class MemoryWriteLine(_message.Message):
    __slots__ = ("stored", "replaced")
    STORED_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    stored: str
    replaced: str
    def __init__(self, stored: _Optional[str] = ..., replaced: _Optional[str] = ...) -> None: ...

class WaitMemoryWritesRequest(_message.Message):
    __slots__ = ("target", "trace_id", "timeout_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.AgentTarget
    trace_id: str
    timeout_ms: int
    def __init__(self, target: _Optional[_Union[_common_pb2.AgentTarget, _Mapping]] = ..., trace_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WaitMemoryWritesResponse(_message.Message):
    __slots__ = ("writes", "pending")
    WRITES_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    writes: _containers.RepeatedCompositeFieldContainer[MemoryWrite]
    pending: bool
    def __init__(self, writes: _Optional[_Iterable[_Union[MemoryWrite, _Mapping]]] = ..., pending: _Optional[bool] = ...) -> None: ...

class TurnEvent(_message.Message):
    __slots__ = ("text_delta", "tool_call", "tool_result", "cut_report", "final", "client_tool_call", "memory_write")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    CUT_REPORT_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WRITE_FIELD_NUMBER: _ClassVar[int]
    text_delta: TextDelta
    tool_call: ToolCallEvent
    tool_result: ToolResultEvent
    cut_report: CutReport
    final: RunTaskResponse
    client_tool_call: ClientToolCall
    memory_write: MemoryWrite
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallEvent, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultEvent, _Mapping]] = ..., cut_report: _Optional[_Union[CutReport, _Mapping]] = ..., final: _Optional[_Union[RunTaskResponse, _Mapping]] = ..., client_tool_call: _Optional[_Union[ClientToolCall, _Mapping]] = ..., memory_write: _Optional[_Union[MemoryWrite, _Mapping]] = ...) -> None: ...

class ConfigureRoleRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _common_pb2.RoleMemoryConfig
    def __init__(self, config: _Optional[_Union[_common_pb2.RoleMemoryConfig, _Mapping]] = ...) -> None: ...

class GetRoleConfigRequest(_message.Message):
    __slots__ = ("role_id",)
    ROLE_ID_FIELD_NUMBER: _ClassVar[int]
    role_id: str
    def __init__(self, role_id: _Optional[str] = ...) -> None: ...

class ListRolesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRolesResponse(_message.Message):
    __slots__ = ("roles",)
    ROLES_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedCompositeFieldContainer[_common_pb2.RoleMemoryConfig]
    def __init__(self, roles: _Optional[_Iterable[_Union[_common_pb2.RoleMemoryConfig, _Mapping]]] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("ready", "model", "version", "model_ready", "memory_design", "model_rss_bytes", "prompt_cache_used_bytes", "prompt_cache_limit_bytes", "model_state", "model_state_reason", "model_restarts", "model_slots", "model_slots_busy", "prompt_cache_entries", "model_gpu_layers", "model_gpu_fallback_reason", "model_download", "turns_running", "turns_queued", "max_turns_running", "max_turns_queued", "max_turns_per_conversation", "model_concurrency")
    READY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_READY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_DESIGN_FIELD_NUMBER: _ClassVar[int]
    MODEL_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODEL_STATE_FIELD_NUMBER: _ClassVar[int]
    MODEL_STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    MODEL_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_SLOTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_SLOTS_BUSY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MODEL_GPU_LAYERS_FIELD_NUMBER: _ClassVar[int]
    MODEL_GPU_FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    MODEL_DOWNLOAD_FIELD_NUMBER: _ClassVar[int]
    TURNS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    TURNS_QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_PER_CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    MODEL_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    model: str
    version: str
    model_ready: bool
    memory_design: str
    model_rss_bytes: int
    prompt_cache_used_bytes: int
    prompt_cache_limit_bytes: int
    model_state: str
    model_state_reason: str
    model_restarts: int
    model_slots: int
    model_slots_busy: int
    prompt_cache_entries: int
    model_gpu_layers: int
    model_gpu_fallback_reason: str
    model_download: ModelDownload
    turns_running: int
    turns_queued: int
    max_turns_running: int
    max_turns_queued: int
    max_turns_per_conversation: int
    model_concurrency: int
    def __init__(self, ready: _Optional[bool] = ..., model: _Optional[str] = ..., version: _Optional[str] = ..., model_ready: _Optional[bool] = ..., memory_design: _Optional[str] = ..., model_rss_bytes: _Optional[int] = ..., prompt_cache_used_bytes: _Optional[int] = ..., prompt_cache_limit_bytes: _Optional[int] = ..., model_state: _Optional[str] = ..., model_state_reason: _Optional[str] = ..., model_restarts: _Optional[int] = ..., model_slots: _Optional[int] = ..., model_slots_busy: _Optional[int] = ..., prompt_cache_entries: _Optional[int] = ..., model_gpu_layers: _Optional[int] = ..., model_gpu_fallback_reason: _Optional[str] = ..., model_download: _Optional[_Union[ModelDownload, _Mapping]] = ..., turns_running: _Optional[int] = ..., turns_queued: _Optional[int] = ..., max_turns_running: _Optional[int] = ..., max_turns_queued: _Optional[int] = ..., max_turns_per_conversation: _Optional[int] = ..., model_concurrency: _Optional[int] = ...) -> None: ...

class ModelDownload(_message.Message):
    __slots__ = ("model", "received_bytes", "total_bytes")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    model: str
    received_bytes: int
    total_bytes: int
    def __init__(self, model: _Optional[str] = ..., received_bytes: _Optional[int] = ..., total_bytes: _Optional[int] = ...) -> None: ...
