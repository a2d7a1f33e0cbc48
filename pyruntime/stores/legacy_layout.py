"""The legacy conversation an old `<stem>.json` still carries, as pure functions: no I/O here.

Read tolerantly, never written: `chatHistoryJson` holds a JSON array of `{role, content, timestamp}`
objects, or an object wrapping that array in one list-valued field (JsonUtility cannot write a bare
array: CoreAI writes `{"Items":[{"Role","Content","Timestamp"}]}`); `transcriptEntriesJson` holds the
same kind of array of `{kind, key|name|role|toolName, content, callId, timestamp}` objects (CoreAI's
Newtonsoft `ConversationEntry` list names the speaker or the tool in `Key`), where `kind` is 0-3 or
a name (`user`, `assistant`, `tool_call`/`ToolCall`, `tool_result`/`ToolResult`). Field names match
case-insensitively; timestamps may be seconds, milliseconds (> 1e11), numeric strings or ISO-8601
strings. A chat message that also appears in the transcript (same kind, name and content, in order)
becomes one row marked as chat message; every other message and entry becomes its own row (an
unmatched message goes after the previous message and after the entries no newer than it), so
nothing is lost. `file_legacy` moves these rows into the history file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pyruntime.stores.base import TranscriptEntry, TranscriptKind, chat_kind
from pyruntime.stores.file_layout import (
    DocumentError,
    MemoryDocument,
    normalize_timestamp,
    strict_json_loads,
)
from pyruntime.stores.file_layout import _unwrap_array as unwrap_array  # one reading of JsonUtility's arrays


def _ci_get(obj: dict[str, Any], *names: str) -> Any:
    lowered = {k.lower(): v for k, v in obj.items() if isinstance(k, str)}
    for name in names:
        if name.lower() in lowered and lowered[name.lower()] is not None:
            return lowered[name.lower()]
    return None


def _legacy_timestamp(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return normalize_timestamp(int(value))
    if isinstance(value, str):
        text = value.strip()
        try:
            return normalize_timestamp(int(float(text)))
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return 0
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp())
    return 0


_KIND_NAMES = {
    "user": TranscriptKind.USER,
    "assistant": TranscriptKind.ASSISTANT,
    "toolcall": TranscriptKind.TOOL_CALL,
    "tool_call": TranscriptKind.TOOL_CALL,
    "toolresult": TranscriptKind.TOOL_RESULT,
    "tool_result": TranscriptKind.TOOL_RESULT,
    "tool": TranscriptKind.TOOL_RESULT,
}


def _legacy_kind(value: Any, name: str) -> TranscriptKind:
    if isinstance(value, int) and not isinstance(value, bool) and value in TranscriptKind._value2member_map_:
        return TranscriptKind(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit() and int(text) in TranscriptKind._value2member_map_:
            return TranscriptKind(int(text))
        if text.lower() in _KIND_NAMES:
            return _KIND_NAMES[text.lower()]
    return chat_kind(name)


def _legacy_items(text: str) -> list[dict[str, Any]]:
    if not text.strip():
        return []
    items = unwrap_array(strict_json_loads(text, "legacy conversation field"))
    if items is None:
        raise DocumentError("legacy conversation field is not a JSON array")
    return [item for item in items if isinstance(item, dict)]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def legacy_conversation_rows(document: MemoryDocument) -> list[TranscriptEntry]:
    """The rows a legacy `<stem>.json` carries, oldest first, with order 0 (legacy rows).

    Raises DocumentError when a legacy field is not readable (the caller then leaves it alone).
    """
    transcript: list[TranscriptEntry] = []
    for item in _legacy_items(document.legacy_transcript_json):
        name = _text(_ci_get(item, "key", "name", "role", "toolName", "tool"))
        call_id = _text(_ci_get(item, "callId", "call_id", "id")) or None
        transcript.append(
            TranscriptEntry(
                kind=_legacy_kind(_ci_get(item, "kind", "type"), name),
                name=name,
                content=_text(_ci_get(item, "content", "text", "message")),
                call_id=call_id,
                timestamp=_legacy_timestamp(_ci_get(item, "timestamp", "time", "t")),
            )
        )
    rows = list(transcript)
    matched = [False] * len(rows)
    pos = 0
    for item in _legacy_items(document.legacy_chat_json):
        role = _text(_ci_get(item, "role", "name"))
        message = TranscriptEntry(
            kind=chat_kind(role),
            name=role,
            content=_text(_ci_get(item, "content", "text", "message")),
            timestamp=_legacy_timestamp(_ci_get(item, "timestamp", "time", "t")),
            is_chat_message=True,
        )
        for j in range(pos, len(rows)):
            row = rows[j]
            if not matched[j] and row.kind == message.kind and row.name == role and row.content == message.content:
                rows[j] = TranscriptEntry(
                    kind=row.kind,
                    name=row.name,
                    content=row.content,
                    call_id=row.call_id,
                    timestamp=row.timestamp or message.timestamp,
                    is_chat_message=True,
                )
                matched[j] = True
                pos = j + 1
                break
        else:
            # Unmatched: after the previous message and after any older transcript entries.
            while (
                pos < len(rows)
                and not matched[pos]
                and rows[pos].timestamp
                and message.timestamp
                and rows[pos].timestamp <= message.timestamp
            ):
                pos += 1
            rows.insert(pos, message)
            matched.insert(pos, True)
            pos += 1
    return rows
