"""The stores' types as `coreai.v1` messages and back: scopes, memory states, transcript rows. Pure."""

from __future__ import annotations

from typing import Any

from coreai.v1 import common_pb2
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.proto_fields import from_message, to_message
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.base import TranscriptEntry, TranscriptKind

TRANSCRIPT_KIND_VALUES = frozenset(int(k) for k in TranscriptKind)  # what a row's kind may be on the wire

def scope_to_proto(scope: AgentMemoryScope) -> common_pb2.AgentMemoryScope:
    """The `coreai.v1.AgentMemoryScope` of scope (None as "")."""
    fields = (scope.tenant_id, scope.user_id, scope.session_id, scope.topic_id)
    tenant, user, session, topic = ((v or "") for v in fields)
    return common_pb2.AgentMemoryScope(tenant_id=tenant, user_id=user, session_id=session, topic_id=topic)


def scope_from_proto(message: common_pb2.AgentMemoryScope) -> AgentMemoryScope:
    """The scope of a message ("" as None)."""
    return AgentMemoryScope(message.tenant_id or None, message.user_id or None,
                            message.session_id or None, message.topic_id or None)


def state_to_proto(state: AgentMemoryState) -> common_pb2.AgentMemoryState:
    """The `coreai.v1.AgentMemoryState` of state."""
    versions = [to_message(v, common_pb2.MemoryVersion) for v in state.versions]
    return to_message(state, common_pb2.AgentMemoryState, versions=versions)


def state_from_proto(message: common_pb2.AgentMemoryState) -> AgentMemoryState:
    """The state held by a message."""
    versions = tuple(from_message(v, MemoryVersion) for v in message.versions)
    return from_message(message, AgentMemoryState, versions=versions)


def entry_to_proto(entry: TranscriptEntry) -> common_pb2.TranscriptEntry:
    """The `coreai.v1.TranscriptEntry` of a row."""
    return to_message(entry, common_pb2.TranscriptEntry, kind=int(entry.kind), call_id=entry.call_id or "")


def entry_from_proto(message: common_pb2.TranscriptEntry) -> TranscriptEntry:
    """The row held by a message; an unknown kind stays an int so validation can name it."""
    kind: Any = TranscriptKind(message.kind) if message.kind in TRANSCRIPT_KIND_VALUES else message.kind
    return from_message(message, TranscriptEntry, kind=kind, call_id=message.call_id or None)
