"""The role policy and the fluent agent builder (contract §6).

`AgentMemoryPolicy` is the role table (built-in roles plus configured ones) and hands out copies, so
callers can adjust a config for one request without changing the policy. One role's config,
`RoleMemoryConfig` (validated on every assignment), and its proto twin are `role_config.py`'s.
"""

from __future__ import annotations

import threading
from typing import Any

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.role_config import (
    DEFAULT_MAX_CHAT_HISTORY_MESSAGES,
    RoleMemoryConfig,
    ToolResultMemory,
    check_bool,
    config_from_proto,
    config_to_proto,
)
from pyruntime.scopes import normalize_role_id

# One role's config and its proto twin are role_config.py's; re-exported here, where callers always found them.
__all__ = [
    "BUILTIN_ROLE_IDS", "AgentBuilder", "AgentMemoryPolicy", "RoleMemoryConfig", "ToolResultMemory",
    "config_from_proto", "config_to_proto",
]


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
        check_bool("enabled", enabled)
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
