"""The stores' types as `coreai.v1` messages and back: scopes, memory states, transcript rows. Pure."""

from __future__ import annotations

from typing import Any, cast

from coreai.v1 import common_pb2
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
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
    return common_pb2.AgentMemoryState(
        memory=state.memory,
        last_system_prompt=state.last_system_prompt,
        system_prompt_memory_snapshot=state.system_prompt_memory_snapshot,
        system_prompt_memory_version=state.system_prompt_memory_version,
        max_memory_versions=state.max_memory_versions,
        versions=[
            common_pb2.MemoryVersion(version=v.version, timestamp=v.timestamp, action=v.action,
                                     content_after=v.content_after, note=v.note)
            for v in state.versions
        ],
    )


def state_from_proto(message: common_pb2.AgentMemoryState) -> AgentMemoryState:
    """The state held by a message."""
    return AgentMemoryState(
        memory=message.memory,
        last_system_prompt=message.last_system_prompt,
        system_prompt_memory_snapshot=message.system_prompt_memory_snapshot,
        system_prompt_memory_version=message.system_prompt_memory_version,
        max_memory_versions=message.max_memory_versions,
        versions=tuple(
            MemoryVersion(version=v.version, timestamp=v.timestamp, action=v.action,
                          content_after=v.content_after, note=v.note)
            for v in message.versions
        ),
    )


def entry_to_proto(entry: TranscriptEntry) -> common_pb2.TranscriptEntry:
    """The `coreai.v1.TranscriptEntry` of a row."""
    return common_pb2.TranscriptEntry(
        kind=cast(common_pb2.TranscriptKind, int(entry.kind)), name=entry.name, content=entry.content,
        call_id=entry.call_id or "", timestamp=entry.timestamp, order=entry.order,
        is_chat_message=entry.is_chat_message,
    )


def entry_from_proto(message: common_pb2.TranscriptEntry) -> TranscriptEntry:
    """The row held by a message; an unknown kind stays an int so validation can name it."""
    kind: Any = TranscriptKind(message.kind) if message.kind in TRANSCRIPT_KIND_VALUES else message.kind
    return TranscriptEntry(kind=kind, name=message.name, content=message.content, call_id=message.call_id or None,
                           timestamp=message.timestamp, order=message.order, is_chat_message=message.is_chat_message)
