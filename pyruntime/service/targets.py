"""Who a request is about: the `AgentTarget` / `AgentMemoryScope` of a request, checked at the service boundary."""

from __future__ import annotations

from dataclasses import dataclass

from coreai.v1 import common_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import AgentMemoryScope, normalize_role_id

MAX_ID_CHARS = 256
"""Longest role id, actor or scope field accepted over the wire."""

_SCOPE_FIELDS = ("tenant_id", "user_id", "session_id", "topic_id")


def check_id(name: str, value: str) -> str:
    """value, refused when it is too long or holds control characters (ids end up in hashes and logs' counts)."""
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgumentError(f"{name} is {len(value)} chars, longer than the limit of {MAX_ID_CHARS}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise InvalidArgumentError(f"{name} must not contain control characters")
    return value


def scope_from_proto(message: common_pb2.AgentMemoryScope, where: str = "scope") -> AgentMemoryScope:
    """The checked scope of a message ("" as None)."""
    values = [check_id(f"{where}.{field}", getattr(message, field)) for field in _SCOPE_FIELDS]
    return AgentMemoryScope(*(v or None for v in values))


@dataclass(frozen=True)
class Target:
    """A checked `AgentTarget`: trimmed role id, scope and actor (None for none)."""

    role_id: str
    scope: AgentMemoryScope
    actor: str | None


def target_from_proto(message: common_pb2.AgentTarget, *, default_role: str | None = None) -> Target:
    """The checked target; a blank role is an error unless default_role is given (turns run as Creator)."""
    role = check_id("target.role_id", message.role_id)
    if not role.strip() and default_role is not None:
        role = default_role
    if not role.strip():
        raise InvalidArgumentError("target.role_id is required and must not be blank")
    actor = check_id("target.actor", message.actor).strip() or None
    return Target(normalize_role_id(role), scope_from_proto(message.scope, "target.scope"), actor)
