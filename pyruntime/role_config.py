"""One role's memory configuration (contract §6): `RoleMemoryConfig`, which validates every field on
assignment so a config can never hold an obviously bad value, and its proto twin (`coreai.v1.RoleMemoryConfig`).

The role table and the fluent builder are `policy.py`'s (which re-exports these names).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Any, cast

from coreai.v1 import common_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.scopes import normalize_role_id

DEFAULT_MAX_CHAT_HISTORY_MESSAGES = 30
DEFAULT_MAX_TOOL_CALL_ROUNDTRIPS = 20
# Visible reply tokens per model round when a role sets no cap: enough for a long NPC answer, and a
# bound on a runaway generation (an uncapped one ran ~8k tokens at 0.4 tok/s and froze a game).
DEFAULT_MAX_OUTPUT_TOKENS = 512
DEFAULT_COMPACTION_TRIGGER_RATIO = 0.8
DEFAULT_MAX_MEMORY_CHARS = 16000
MAX_TEMPERATURE = 2.0  # the OpenAI-compatible range; above it sampling is noise
MAX_INT_SETTING = 2**31 - 1


class ToolResultMemory(enum.Enum):
    """What of a turn's tool results is recorded into the chat history."""

    NONE = "none"
    ERRORS_ONLY = "errors_only"
    COMPACT_SUMMARY = "compact_summary"
    FULL = "full"


def check_bool(name: str, value: Any) -> None:
    """InvalidArgumentError unless `value` is a bool (an int is not)."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be a bool")


def _check_int(name: str, value: Any, *, minimum: int, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer" + (" or None" if optional else ""))
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    if value > MAX_INT_SETTING:
        # The contract carries these as int32; a larger value could never be sent back to a client.
        raise InvalidArgumentError(f"{name} must be <= {MAX_INT_SETTING}, got {value}")


def _check_real(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number" + (" or None" if optional else ""))


def _validate_field(name: str, value: Any) -> Any:
    """Checks one RoleMemoryConfig field; returns the value to store (role ids are trimmed)."""
    if name == "role_id":
        if not isinstance(value, str):
            raise InvalidArgumentError("role_id must be a string")
        return normalize_role_id(value)
    if name in ("use_memory_tool", "with_chat_history", "persist_chat_history", "use_llm_context_compaction"):
        check_bool(name, value)
    elif name == "send_earlier_sessions":
        if value is not None:
            check_bool(name, value)
    elif name == "default_action":
        if not isinstance(value, MemoryToolAction):
            raise InvalidArgumentError("default_action must be a MemoryToolAction")
    elif name == "tool_result_memory":
        if not isinstance(value, ToolResultMemory):
            raise InvalidArgumentError("tool_result_memory must be a ToolResultMemory")
    elif name == "max_chat_history_messages":
        _check_int(name, value, minimum=0, optional=False)
    elif name == "context_tokens":
        _check_int(name, value, minimum=0, optional=False)
    elif name == "max_output_tokens":
        _check_int(name, value, minimum=1, optional=True)
    elif name in ("max_tool_call_roundtrips", "max_memory_chars"):
        _check_int(name, value, minimum=0, optional=True)
    elif name == "temperature":
        _check_real(name, value, optional=True)
        # Refused here, not at the first turn: an Infinity accepted once made every turn of the role fail.
        if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_TEMPERATURE):
            raise InvalidArgumentError(
                f"temperature must be a non-negative number no larger than {MAX_TEMPERATURE:g}, got {value}")
    elif name == "compaction_trigger_ratio":
        # Out-of-range ratios are tolerated and read as the default (contract §5: invalid -> 0.8).
        _check_real(name, value, optional=True)
    elif name == "system_prompt":
        if not isinstance(value, str):
            raise InvalidArgumentError("system_prompt must be a string")
    return value


@dataclass
class RoleMemoryConfig:
    """How one role uses the memory tool, chat history and compaction."""

    role_id: str
    use_memory_tool: bool = True
    default_action: MemoryToolAction = MemoryToolAction.Append
    with_chat_history: bool = True
    persist_chat_history: bool = False
    max_chat_history_messages: int = DEFAULT_MAX_CHAT_HISTORY_MESSAGES
    context_tokens: int = 0  # 0 = inherit the model's context
    max_output_tokens: int | None = None  # None = 512 (DEFAULT_MAX_OUTPUT_TOKENS)
    max_tool_call_roundtrips: int | None = None  # None = 20, 0 = unlimited
    tool_result_memory: ToolResultMemory = ToolResultMemory.COMPACT_SUMMARY
    temperature: float | None = None
    use_llm_context_compaction: bool = True
    compaction_trigger_ratio: float | None = None  # None / invalid = 0.8
    max_memory_chars: int | None = None  # None = 16000, 0 = unlimited
    system_prompt: str = ""
    # The saved history of earlier sessions in the prompt: None = the model profile decides (left out for a
    # small model with memory on), True = sent (the whole saved history), False = left out.
    send_earlier_sessions: bool | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # Validating on every assignment (the generated __init__ assigns too) keeps bad values out.
        super().__setattr__(name, _validate_field(name, value))

    @property
    def effective_max_tool_call_roundtrips(self) -> int:
        """The roundtrip limit in force: None -> 20; 0 means unlimited."""
        if self.max_tool_call_roundtrips is None:
            return DEFAULT_MAX_TOOL_CALL_ROUNDTRIPS
        return self.max_tool_call_roundtrips

    @property
    def effective_max_output_tokens(self) -> int:
        """The visible output cap in force: None -> 512."""
        return DEFAULT_MAX_OUTPUT_TOKENS if self.max_output_tokens is None else self.max_output_tokens

    @property
    def effective_compaction_trigger_ratio(self) -> float:
        """The trigger ratio in force: a value outside (0, 1], NaN or None -> 0.8."""
        ratio = self.compaction_trigger_ratio
        if ratio is None or math.isnan(ratio) or not 0 < ratio <= 1:
            return DEFAULT_COMPACTION_TRIGGER_RATIO
        return float(ratio)

    @property
    def effective_max_memory_chars(self) -> int:
        """The memory size limit in force: None -> 16000; 0 means unlimited."""
        return DEFAULT_MAX_MEMORY_CHARS if self.max_memory_chars is None else self.max_memory_chars

    def copy(self, **changes: Any) -> RoleMemoryConfig:
        """An independent copy, with the given fields changed (validated)."""
        unknown = set(changes) - _FIELD_NAMES
        if unknown:
            raise InvalidArgumentError(f"unknown RoleMemoryConfig field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(RoleMemoryConfig))


# --- proto conversion (coreai.v1.RoleMemoryConfig) -------------------------------------------

_PROTO_ACTION_PREFIX = "MEMORY_TOOL_ACTION_"
_PROTO_TRM_PREFIX = "TOOL_RESULT_MEMORY_"


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


# protoc's .pyi types an enum field as the enum's class while EnumTypeWrapper.Value() is typed int:
# the casts below say that the int is that enum's value, which Value() guarantees.
def _action_to_proto(action: MemoryToolAction) -> common_pb2.MemoryToolAction:
    for proto_name in common_pb2.MemoryToolAction.keys():
        if _squash(proto_name.removeprefix(_PROTO_ACTION_PREFIX)) == _squash(action.name):
            return cast("common_pb2.MemoryToolAction", common_pb2.MemoryToolAction.Value(proto_name))
    raise InvalidArgumentError("default_action has no proto counterpart")


def _action_from_proto(value: int) -> MemoryToolAction:
    if value == common_pb2.MEMORY_TOOL_ACTION_UNSPECIFIED:
        return MemoryToolAction.Append
    try:
        name = _squash(common_pb2.MemoryToolAction.Name(value).removeprefix(_PROTO_ACTION_PREFIX))
    except ValueError:
        raise InvalidArgumentError(f"unknown MemoryToolAction value {value}") from None
    for member in MemoryToolAction:
        if _squash(member.name) == name:
            return member
    raise InvalidArgumentError(f"unknown MemoryToolAction value {value}")


def _trm_to_proto(mode: ToolResultMemory) -> common_pb2.ToolResultMemory:
    return cast("common_pb2.ToolResultMemory", common_pb2.ToolResultMemory.Value(_PROTO_TRM_PREFIX + mode.name))


def _trm_from_proto(value: int) -> ToolResultMemory:
    if value == common_pb2.TOOL_RESULT_MEMORY_UNSPECIFIED:
        return ToolResultMemory.COMPACT_SUMMARY
    try:
        return ToolResultMemory[common_pb2.ToolResultMemory.Name(value).removeprefix(_PROTO_TRM_PREFIX)]
    except (ValueError, KeyError):
        raise InvalidArgumentError(f"unknown ToolResultMemory value {value}") from None


_PROTO_FIELDS = (
    "send_earlier_sessions",
    "use_memory_tool",
    "with_chat_history",
    "persist_chat_history",
    "max_chat_history_messages",
    "context_tokens",
    "max_output_tokens",
    "max_tool_call_roundtrips",
    "temperature",
    "use_llm_context_compaction",
    "compaction_trigger_ratio",
    "max_memory_chars",
    "system_prompt",
)


def config_to_proto(cfg: RoleMemoryConfig) -> common_pb2.RoleMemoryConfig:
    """The proto twin of a config; None optionals stay unset."""
    msg = common_pb2.RoleMemoryConfig(
        role_id=cfg.role_id,
        default_action=_action_to_proto(cfg.default_action),
        tool_result_memory=_trm_to_proto(cfg.tool_result_memory),
    )
    for name in _PROTO_FIELDS:
        value = getattr(cfg, name)
        if value is not None:
            setattr(msg, name, value)
    return msg


def config_from_proto(msg: common_pb2.RoleMemoryConfig, base: RoleMemoryConfig | None = None) -> RoleMemoryConfig:
    """A validated config from its proto twin: unset fields and UNSPECIFIED enums keep `base` (default: defaults)."""
    base = base or RoleMemoryConfig(role_id=msg.role_id)
    changes: dict[str, Any] = {name: getattr(msg, name) for name in _PROTO_FIELDS if msg.HasField(name)}
    if msg.default_action:
        changes["default_action"] = _action_from_proto(msg.default_action)
    if msg.tool_result_memory:
        changes["tool_result_memory"] = _trm_from_proto(msg.tool_result_memory)
    return base.copy(role_id=msg.role_id, **changes)
