"""The on-disk layout of the file stores (contract §3.1), as pure functions: no I/O here.

- `file_stem(key)`, the folders and suffixes, the Windows path limit: in `file_names` (imported here too).
- `encode_memory_document` / `decode_memory_document`: the byte-exact `<stem>.json`.
- `encode_history_row(s)` / `parse_history`: the `<stem>.history.jsonl` rows.
- `encode_summary` / `decode_summary`: `ConversationSummaries/<stem>.json`.

JSON is written the way Unity's JsonUtility writes it: compact (no spaces), UTF-8, non-ASCII
not escaped, fields in declaration order.

The legacy conversation an old `<stem>.json` may carry is read by `legacy_layout`. About 400 lines as
one job, the byte-exact layout: its three formats share one strict JSON reader and writer, which the
golden files pin together.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import DEFAULT_MAX_MEMORY_VERSIONS, AgentMemoryState, MemoryVersion
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.file_names import (
    AGENT_MEMORY_DIR,
    FNV_OFFSET_BASIS,
    FNV_PRIME,
    HISTORY_SUFFIX,
    INVALID_FILE_NAME_CHARS,
    MAX_FILE_NAME_BYTES,
    MEMORY_SUFFIX,
    SUMMARIES_DIR,
    TEMP_NAME_CHARS,
    WINDOWS_MAX_PATH,
    WINDOWS_RESERVED_NAMES,
    KeyCollisionError,
    PathTooLongError,
    check_windows_path_length,
    file_stem,
    fnv1a32_utf16,
    is_windows_device_name,
    pre_escape_stem,
)

# file_names' names are part of this module's API too (they were defined here before the split).
__all__ = [
    "AGENT_MEMORY_DIR", "DocumentError", "FNV_OFFSET_BASIS", "FNV_PRIME", "HISTORY_SUFFIX", "INT32_RANGE",
    "INT64_RANGE", "INVALID_FILE_NAME_CHARS", "KeyCollisionError", "MAX_FILE_NAME_BYTES", "MEMORY_FIELDS",
    "MEMORY_SUFFIX", "MILLISECONDS_THRESHOLD", "MemoryDocument", "ParsedHistory", "PathTooLongError",
    "SUMMARIES_DIR", "TEMP_NAME_CHARS", "WINDOWS_MAX_PATH", "WINDOWS_RESERVED_NAMES", "check_windows_path_length",
    "compact_json", "decode_history_row", "decode_memory_document", "decode_summary", "decode_versions",
    "encode_history_row", "encode_history_rows", "encode_memory_document", "encode_summary", "encode_versions",
    "file_stem", "fnv1a32_utf16", "is_windows_device_name", "normalize_timestamp", "parse_history",
    "pre_escape_stem", "retained_mask", "stale_row_count", "strict_json_loads",
]

MILLISECONDS_THRESHOLD = 100_000_000_000  # a timestamp above 1e11 is in milliseconds

MEMORY_FIELDS = (
    "lastSystemPrompt",
    "memory",
    "chatHistoryJson",
    "transcriptEntriesJson",
    "versionsJson",
    "systemPromptMemorySnapshot",
    "systemPromptMemoryVersion",
    "maxMemoryVersions",
)


# --- compact JSON ------------------------------------------------------------------------------

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def compact_json(value: Any) -> str:
    """Compact JSON with non-ASCII kept as is (JsonUtility style)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of JSON text; lone surrogates (not encodable) are written as \\u escapes."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


# --- <stem>.json -------------------------------------------------------------------------------


class DocumentError(ValueError):
    """A file's content cannot be read as the expected document; the message names no content."""


def encode_versions(versions: Sequence[MemoryVersion]) -> str:
    """The `versionsJson` string: a compact JSON array of snapshots, or "" when there are none."""
    if not versions:
        return ""
    return compact_json(
        [
            {
                "Version": v.version,
                "Timestamp": v.timestamp,
                "Action": v.action,
                "ContentAfter": v.content_after,
                "Note": v.note,
            }
            for v in versions
        ]
    )


def _check_range(value: int, bounds: tuple[int, int], name: str) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise InvalidArgumentError(f"{name} does not fit the save format's integer ({value})")


def encode_memory_document(state: AgentMemoryState) -> bytes:
    """The exact bytes of `<stem>.json` for state (legacy conversation fields written as "").

    Integers that the file could not be read back with are an InvalidArgumentError: nothing is
    written that would make the save unreadable.
    """
    _check_range(state.system_prompt_memory_version, INT32_RANGE, "system_prompt_memory_version")
    _check_range(state.max_memory_versions, INT32_RANGE, "max_memory_versions")
    for v in state.versions:
        _check_range(v.version, INT32_RANGE, "version")
        _check_range(v.timestamp, INT64_RANGE, "version timestamp")
    document = {
        "lastSystemPrompt": state.last_system_prompt,
        "memory": state.memory,
        "chatHistoryJson": "",
        "transcriptEntriesJson": "",
        "versionsJson": encode_versions(state.versions),
        "systemPromptMemorySnapshot": state.system_prompt_memory_snapshot,
        "systemPromptMemoryVersion": state.system_prompt_memory_version,
        "maxMemoryVersions": state.max_memory_versions,
    }
    return _utf8(compact_json(document))


@dataclass(frozen=True)
class MemoryDocument:
    """A decoded `<stem>.json`: the state plus the legacy conversation fields it still carries."""

    state: AgentMemoryState
    legacy_chat_json: str = ""
    legacy_transcript_json: str = ""

    @property
    def has_legacy_conversation(self) -> bool:
        """True when the legacy fields still hold something to migrate."""
        return bool(self.legacy_chat_json.strip() or self.legacy_transcript_json.strip())


INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_RANGE = (-(2**63), 2**63 - 1)


class _NotFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise _NotFinite(text[:16])
    return value


def strict_json_loads(text: str, what: str) -> Any:
    """JSON text as a value; NaN, Infinity and numbers that overflow a double (1e999) are a DocumentError.

    Python reads them, but neither Unity's JsonUtility nor proto3 can: a save holding one would load
    here and fail later, half-readable. Refusing them makes the document consistently unreadable.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite:
        raise DocumentError(f"{what} holds a number that is not finite (NaN, Infinity or out of range)") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise DocumentError(f"{what} is nested too deeply") from None


def _loads_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    value = strict_json_loads(text, what)
    if not isinstance(value, dict):
        raise DocumentError(f"{what} is not a JSON object")
    return value


def _field(obj: dict[str, Any], name: str, kind: type, default: Any, what: str,
           bounds: tuple[int, int] = INT32_RANGE) -> Any:
    value = obj.get(name)
    if value is None:
        return default
    if kind is int:
        # Floats reaching here are finite (strict_json_loads); 3.0 is read as 3.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise DocumentError(f"{what} field {name} is not an integer")
        if not bounds[0] <= int(value) <= bounds[1]:
            bits = 32 if bounds == INT32_RANGE else 64
            raise DocumentError(f"{what} field {name} does not fit a {bits}-bit integer")
        return int(value)
    if not isinstance(value, kind):
        raise DocumentError(f"{what} field {name} is not a {kind.__name__}")
    return value


def _unwrap_array(value: Any) -> list[Any] | None:
    """A list, or the single list-valued field of a JsonUtility wrapper object."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    return None


def decode_versions(text: str) -> tuple[MemoryVersion, ...]:
    """Parse a `versionsJson` string ("" means none)."""
    if not text.strip():
        return ()
    items = _unwrap_array(strict_json_loads(text, "memory document field versionsJson"))
    if items is None:
        raise DocumentError("memory document field versionsJson is not a JSON array")
    versions = []
    for item in items:
        if not isinstance(item, dict):
            raise DocumentError("memory document field versionsJson holds a non-object")
        what = "version snapshot"
        versions.append(
            MemoryVersion(
                version=_field(item, "Version", int, 0, what),
                timestamp=_field(item, "Timestamp", int, 0, what, INT64_RANGE),
                action=_field(item, "Action", str, "", what),
                content_after=_field(item, "ContentAfter", str, "", what),
                note=_field(item, "Note", str, "", what),
            )
        )
    return tuple(versions)


def decode_memory_document(data: bytes) -> MemoryDocument:
    """Parse `<stem>.json`; raises DocumentError (naming no content) when it cannot be read."""
    what = "memory document"
    obj = _loads_object(data, what)
    state = AgentMemoryState(
        memory=_field(obj, "memory", str, "", what),
        last_system_prompt=_field(obj, "lastSystemPrompt", str, "", what),
        system_prompt_memory_snapshot=_field(obj, "systemPromptMemorySnapshot", str, "", what),
        system_prompt_memory_version=_field(obj, "systemPromptMemoryVersion", int, 0, what),
        max_memory_versions=_field(obj, "maxMemoryVersions", int, DEFAULT_MAX_MEMORY_VERSIONS, what),
        versions=decode_versions(_field(obj, "versionsJson", str, "", what)),
    )
    return MemoryDocument(
        state=state,
        legacy_chat_json=_legacy_text(obj.get("chatHistoryJson")),
        legacy_transcript_json=_legacy_text(obj.get("transcriptEntriesJson")),
    )


def _legacy_text(value: Any) -> str:
    # Tolerance: a legacy writer may have stored the array itself rather than a string of it.
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value)


# --- <stem>.history.jsonl ----------------------------------------------------------------------


def encode_history_row(row: TranscriptEntry) -> bytes:
    """One compact line, newline included; `id`, `o` and `m` omitted when empty, 0 or false."""
    obj: dict[str, Any] = {"k": int(row.kind), "r": row.name, "c": row.content}
    if row.call_id:
        obj["id"] = row.call_id
    obj["t"] = row.timestamp
    if row.order:
        obj["o"] = row.order
    if row.is_chat_message:
        obj["m"] = True
    return _utf8(compact_json(obj)) + b"\n"


def encode_history_rows(rows: Iterable[TranscriptEntry]) -> bytes:
    """A whole history file."""
    return b"".join(encode_history_row(r) for r in rows)


def decode_history_row(line: bytes) -> TranscriptEntry:
    """Parse one line (without its newline); raises DocumentError when it is not a valid row."""
    obj = _loads_object(line, "history row")
    what = "history row"
    kind = _field(obj, "k", int, None, what)
    if kind is None or kind not in TranscriptKind._value2member_map_:
        raise DocumentError("history row has no valid kind")
    content = obj.get("c")
    if not isinstance(content, str):
        raise DocumentError("history row has no content")
    call_id = _field(obj, "id", str, None, what)
    is_chat = obj.get("m", False)
    if not isinstance(is_chat, bool):
        raise DocumentError("history row field m is not a boolean")
    return TranscriptEntry(
        kind=TranscriptKind(kind),
        name=_field(obj, "r", str, "", what),
        content=content,
        call_id=call_id or None,
        timestamp=normalize_timestamp(_field(obj, "t", int, 0, what, INT64_RANGE)),
        order=_field(obj, "o", int, 0, what, INT64_RANGE),
        is_chat_message=is_chat,
    )


@dataclass(frozen=True)
class ParsedHistory:
    """The rows of a history file (or of a chunk of it) and what was wrong with it."""

    rows: list[TranscriptEntry]
    skipped: int  # unreadable lines (torn or corrupt), left out of rows
    torn_tail: bool  # the chunk does not end with a newline


def parse_history(data: bytes) -> ParsedHistory:
    """Parse history bytes tolerantly: an unreadable line is skipped and counted."""
    rows: list[TranscriptEntry] = []
    skipped = 0
    pos = 0
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl
        line = data[pos:end].strip()
        if line:
            try:
                rows.append(decode_history_row(line))
            except DocumentError:
                skipped += 1
        pos = end + 1
    torn = size > 0 and not data.endswith(b"\n")
    return ParsedHistory(rows=rows, skipped=skipped, torn_tail=torn)


# --- ConversationSummaries/<stem>.json ---------------------------------------------------------


def encode_summary(summary: str) -> bytes:
    """`{"Summary":"..."}`, compact."""
    return _utf8(compact_json({"Summary": summary}))


def decode_summary(data: bytes) -> str:
    """The summary text; raises DocumentError when the file cannot be read."""
    obj = _loads_object(data, "summary file")
    return cast(str, _field(obj, "Summary", str, "", "summary file"))


# --- timestamps --------------------------------------------------------------------------------


def normalize_timestamp(value: int) -> int:
    """Unix seconds; a millisecond value (> 1e11) is divided by 1000."""
    return value // 1000 if value > MILLISECONDS_THRESHOLD else value


# --- retention (caps per key) ------------------------------------------------------------------


def stale_row_count(chat_flags: Sequence[bool], chat_cap: int, transcript_cap: int) -> int:
    """How many rows have left both windows (the newest chat_cap chat rows, the newest transcript_cap rows)."""
    return len(chat_flags) - sum(retained_mask(chat_flags, chat_cap, transcript_cap))


def retained_mask(chat_flags: Sequence[bool], chat_cap: int, transcript_cap: int) -> list[bool]:
    """For each row: True while it is in the chat window or the transcript window."""
    n = len(chat_flags)
    cut = max(0, n - transcript_cap)
    chat_out = max(0, sum(chat_flags) - chat_cap)  # the oldest chat_out chat rows left the chat window
    mask = []
    seen_chat = 0
    for i, is_chat in enumerate(chat_flags):
        in_chat = is_chat and seen_chat >= chat_out
        seen_chat += is_chat
        mask.append(i >= cut or in_chat)
    return mask
