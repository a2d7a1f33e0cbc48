"""Per-role memory configuration, the role policy and the fluent agent builder (contract §6).

`RoleMemoryConfig` validates every field on assignment, so a config can never hold an obviously
bad value; `AgentMemoryPolicy` hands out copies, so callers can adjust a config for one request
without changing the policy.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import threading
from dataclasses import dataclass
from typing import Any, cast

from coreai.v1 import common_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.scopes import normalize_role_id

DEFAULT_MAX_CHAT_HISTORY_MESSAGES = 30
DEFAULT_MAX_TOOL_CALL_ROUNDTRIPS = 20
# Visible reply tokens per model round when a role sets no cap: enough for a long NPC answer, and a
# bound on a runaway generation (an uncapped one ran ~8k tokens at 0.4 tok/s and froze a game; issue 9).
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


def _check_bool(name: str, value: Any) -> None:
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
        _check_bool(name, value)
    elif name == "send_earlier_sessions":
        if value is not None:
            _check_bool(name, value)
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


def _builtin_roles() -> dict[str, RoleMemoryConfig]:
    """The built-in role table (contract §6)."""
    roles = [
        RoleMemoryConfig("Creator", max_tool_call_roundtrips=0),
        # The design note also gives Builder unlimited roundtrips; the spec (which wins) does not.
        RoleMemoryConfig("Builder"),
        RoleMemoryConfig("Analyzer"),
        RoleMemoryConfig(
            "Programmer",
            with_chat_history=False,
            tool_result_memory=ToolResultMemory.FULL,
            use_llm_context_compaction=False,
            max_tool_call_roundtrips=0,
        ),
        RoleMemoryConfig("CoreMechanicAI", tool_result_memory=ToolResultMemory.FULL),
        RoleMemoryConfig("AINpc"),
        RoleMemoryConfig("PlainChat", use_memory_tool=False, persist_chat_history=True),
        RoleMemoryConfig("SmartChat", persist_chat_history=True),
        RoleMemoryConfig("Merchant"),
    ]
    return {r.role_id: r for r in roles}


BUILTIN_ROLE_IDS: tuple[str, ...] = tuple(_builtin_roles())


class AgentMemoryPolicy:
    """The role table: built-in roles plus configured ones; unknown roles get the defaults."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._roles: dict[str, RoleMemoryConfig] = _builtin_roles()

    def get(self, role_id: str) -> RoleMemoryConfig:
        """A copy of the role's config; an unknown role gets the defaults under its (trimmed) id."""
        role = normalize_role_id(role_id)
        with self._lock:
            config = self._roles.get(role)
            return config.copy() if config is not None else RoleMemoryConfig(role)

    def is_known(self, role_id: str) -> bool:
        """True for a built-in or configured role."""
        role = normalize_role_id(role_id)
        with self._lock:
            return role in self._roles

    def roles(self) -> list[RoleMemoryConfig]:
        """Copies of every built-in and configured role, sorted by role id."""
        with self._lock:
            return [self._roles[r].copy() for r in sorted(self._roles)]

    def set(self, config: RoleMemoryConfig) -> None:
        """Register (or replace) a role's config; the policy keeps its own copy."""
        if not isinstance(config, RoleMemoryConfig):
            raise InvalidArgumentError("config must be a RoleMemoryConfig")
        with self._lock:
            self._roles[config.role_id] = config.copy()

    def configure_role(self, role_id: str, /, **fields: Any) -> RoleMemoryConfig:
        """Change the named fields of a role (starting from its current config); returns a copy."""
        if "role_id" in fields:
            raise InvalidArgumentError("role_id cannot be changed by configure_role")
        role = normalize_role_id(role_id)
        with self._lock:
            # copy() validates everything before anything is stored: bad input changes nothing.
            updated = self.get(role).copy(**fields)
            self._roles[role] = updated
            return updated.copy()

    def enable_memory_tool(self, role_id: str) -> None:
        """Turn the memory tool on for a role."""
        self.configure_role(role_id, use_memory_tool=True)

    def disable_memory_tool(self, role_id: str) -> None:
        """Turn the memory tool off for a role."""
        self.configure_role(role_id, use_memory_tool=False)

    def set_memory_tool_for_all(self, enabled: bool) -> None:
        """Turn the memory tool on or off for every built-in role."""
        _check_bool("enabled", enabled)
        with self._lock:
            for role in BUILTIN_ROLE_IDS:
                self.configure_role(role, use_memory_tool=enabled)

    def configure_chat_history(
        self,
        role_id: str,
        enabled: bool,
        context_tokens: int = 0,
        persist: bool = False,
        max_messages: int = DEFAULT_MAX_CHAT_HISTORY_MESSAGES,
    ) -> None:
        """Chat history on/off, its token budget, persistence and window for a role."""
        self.configure_role(
            role_id,
            with_chat_history=enabled,
            context_tokens=context_tokens,
            persist_chat_history=persist,
            max_chat_history_messages=max_messages,
        )

    def configure_llm_context_compaction(self, role_id: str, enabled: bool) -> None:
        """Per-role switch of the LLM-assisted fold (the global switch still applies)."""
        self.configure_role(role_id, use_llm_context_compaction=enabled)

    def set_default_action(self, role_id: str, action: MemoryToolAction) -> None:
        """The memory action shown to the model as the role's default."""
        self.configure_role(role_id, default_action=action)

    def set_context_tokens(self, role_id: str, context_tokens: int) -> None:
        """The role's context size (0 = inherit the model's)."""
        self.configure_role(role_id, context_tokens=context_tokens)

    def set_max_output_tokens(self, role_id: str, max_output_tokens: int | None) -> None:
        """The role's completion cap (None = no role cap)."""
        self.configure_role(role_id, max_output_tokens=max_output_tokens)

    def set_max_tool_call_roundtrips(self, role_id: str, roundtrips: int | None) -> None:
        """The role's tool roundtrip limit (None = 20, 0 = unlimited)."""
        self.configure_role(role_id, max_tool_call_roundtrips=roundtrips)

    def set_tool_result_memory(self, role_id: str, mode: ToolResultMemory) -> None:
        """What of the tool results is recorded into the role's history."""
        self.configure_role(role_id, tool_result_memory=mode)

    def set_temperature(self, role_id: str, temperature: float | None) -> None:
        """The role's sampling temperature (None = the backend's)."""
        self.configure_role(role_id, temperature=temperature)

    def set_compaction_trigger_ratio(self, role_id: str, ratio: float | None) -> None:
        """The history-budget fraction that triggers compaction (invalid reads as 0.8)."""
        self.configure_role(role_id, compaction_trigger_ratio=ratio)

    def set_max_memory_chars(self, role_id: str, max_memory_chars: int | None) -> None:
        """The memory document size limit (None = 16000, 0 = unlimited)."""
        self.configure_role(role_id, max_memory_chars=max_memory_chars)

    def set_system_prompt(self, role_id: str, system_prompt: str) -> None:
        """The role's system prompt."""
        self.configure_role(role_id, system_prompt=system_prompt)


class AgentBuilder:
    """Fluent construction of a role config, starting from the defaults."""

    def __init__(self, role_id: str) -> None:
        self._config = RoleMemoryConfig(role_id)

    def with_memory(self, action: MemoryToolAction = MemoryToolAction.Append) -> AgentBuilder:
        """Memory tool on, with this default action."""
        self._config.default_action = action
        self._config.use_memory_tool = True
        return self

    def without_memory(self) -> AgentBuilder:
        """Memory tool off."""
        self._config.use_memory_tool = False
        return self

    def with_chat_history(
        self,
        context_tokens: int | None = None,
        persist_between_sessions: bool = False,
        max_chat_history_messages: int = DEFAULT_MAX_CHAT_HISTORY_MESSAGES,
    ) -> AgentBuilder:
        """Chat history on; context_tokens None keeps the model's context."""
        self._config.context_tokens = 0 if context_tokens is None else context_tokens
        self._config.max_chat_history_messages = max_chat_history_messages
        self._config.persist_chat_history = persist_between_sessions
        self._config.with_chat_history = True
        return self

    def without_chat_history(self) -> AgentBuilder:
        """Chat history off (and therefore not persisted)."""
        self._config.with_chat_history = False
        self._config.persist_chat_history = False
        return self

    def with_llm_context_compaction(self, enabled: bool = True) -> AgentBuilder:
        """Per-role switch of the LLM-assisted fold."""
        self._config.use_llm_context_compaction = enabled
        return self

    def with_system_prompt(self, text: str) -> AgentBuilder:
        """The role's system prompt."""
        self._config.system_prompt = text
        return self

    def with_temperature(self, temperature: float) -> AgentBuilder:
        """The role's sampling temperature."""
        self._config.temperature = temperature
        return self

    def with_max_output_tokens(self, max_output_tokens: int) -> AgentBuilder:
        """The role's completion cap."""
        self._config.max_output_tokens = max_output_tokens
        return self

    def with_max_tool_call_roundtrips(self, roundtrips: int) -> AgentBuilder:
        """The role's tool roundtrip limit (0 = unlimited)."""
        self._config.max_tool_call_roundtrips = roundtrips
        return self

    def build(self, policy: AgentMemoryPolicy) -> RoleMemoryConfig:
        """Register the config in the policy and return a copy."""
        policy.set(self._config)
        return self._config.copy()

    def build_detached(self) -> RoleMemoryConfig:
        """The config without registering it anywhere."""
        return self._config.copy()


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
