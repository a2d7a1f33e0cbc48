"""The on-disk layout of the file stores (contract §3.1), as pure functions: no I/O here.

- `file_stem(key)`: the file-name stem of a storage key (Windows-safe, FNV-1a-32 suffix).
- `check_windows_path_length(path)`: a clear error for a path beyond Windows' MAX_PATH.
- `encode_memory_document` / `decode_memory_document`: the byte-exact `<stem>.json`.
- `encode_history_row(s)` / `parse_history`: the `<stem>.history.jsonl` rows.
- `encode_summary` / `decode_summary`: `ConversationSummaries/<stem>.json`.
- `legacy_conversation_rows`: the conversation an old `<stem>.json` still carries.

JSON is written the way Unity's JsonUtility writes it: compact (no spaces), UTF-8, non-ASCII
not escaped, fields in declaration order.

Legacy conversation shape (read tolerantly, never written): `chatHistoryJson` holds a JSON array
of `{role, content, timestamp}` objects, or an object wrapping that array in one list-valued field
(JsonUtility cannot write a bare array, e.g. `{"Messages":[...]}`); `transcriptEntriesJson` holds
the same kind of array of `{kind, name|role|toolName, content, callId, timestamp}` objects, where
`kind` is 0-3 or a name (`user`, `assistant`, `tool_call`/`ToolCall`, `tool_result`/`ToolResult`).
Field names match case-insensitively; timestamps may be seconds, milliseconds (> 1e11), numeric
strings or ISO-8601 strings. A chat message that also appears in the transcript (same kind,
name and content, in order) becomes one row marked as chat message; every other message and
entry becomes its own row (an unmatched message goes after the previous message and after the
entries no newer than it), so nothing is lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyruntime.errors import InvalidArgumentError, UnsafeKeyError
from pyruntime.memory.state import DEFAULT_MAX_MEMORY_VERSIONS, AgentMemoryState, MemoryVersion
from pyruntime.scopes import check_visible_id
from pyruntime.stores.base import TranscriptEntry, TranscriptKind, chat_kind

FNV_OFFSET_BASIS = 2166136261
FNV_PRIME = 16777619
INVALID_FILE_NAME_CHARS = frozenset('<>:"/\\|?*') | frozenset(chr(c) for c in range(32))

_CONTROL_TO_SPACE = {c: " " for c in range(32)}

AGENT_MEMORY_DIR = "AgentMemory"
SUMMARIES_DIR = "ConversationSummaries"
MEMORY_SUFFIX = ".json"
HISTORY_SUFFIX = ".history.jsonl"
MAX_FILE_NAME_BYTES = 255  # the common limit of ext4, NTFS, APFS
WINDOWS_MAX_PATH = 260  # characters, the terminating NUL included: a full path may have 259
TEMP_NAME_CHARS = 13  # `.` + 8 random characters + `.tmp` (tempfile.mkstemp in fileio)

# Names Windows maps to devices whatever the extension or case (`CON.json` opens the console).
# COM0/LPT0 and the superscript digits are reserved too (Win32 "Naming Files" documentation).
WINDOWS_RESERVED_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{dev}{n}" for dev in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"]
)

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


class PathTooLongError(InvalidArgumentError):
    """A save's full path would be longer than Windows allows (MAX_PATH)."""


class KeyCollisionError(InvalidArgumentError):
    """Two keys would share one file (they differ only in case, on a case-insensitive file system)."""


# --- stems -------------------------------------------------------------------------------------


def fnv1a32_utf16(text: str) -> int:
    """FNV-1a-32 over the UTF-16 code units of text (what C# gets iterating a string's chars)."""
    data = text.encode("utf-16-le", "surrogatepass")
    h = FNV_OFFSET_BASIS
    for i in range(0, len(data), 2):
        h ^= data[i] | (data[i + 1] << 8)
        h = (h * FNV_PRIME) & 0xFFFFFFFF
    return h


def is_windows_device_name(stem: str) -> bool:
    """True when a file named `<stem>.<suffix>` would name a Windows device (CON, NUL, COM1, ...)."""
    # Windows ignores everything from the first dot, and trailing spaces before it.
    return stem.split(".", 1)[0].rstrip(" ").upper() in WINDOWS_RESERVED_NAMES


def file_stem(key: str) -> str:
    """The file-name stem of a storage key: invalid characters -> `_`, plus `_<fnv8hex>` if any were replaced.

    A key whose name Windows reserves for a device (`CON`, `nul.x`, `Com1`, ...) is escaped the
    same way, its dots counting as invalid (`CON_<fnv8>`, `nul_x_<fnv8>`), so it names an ordinary
    file everywhere (a reserved name opens the device on Windows, whatever its extension); every other
    key keeps the stem of the original layout. Trailing dots and spaces need no escape: every file
    name ends with its suffix, so none ends in a dot or space. Keys that differ only in case are
    refused by the stores' identity index (see `IdentityIndex.verify`), not renamed here, since
    mixed-case role ids (`Teacher`) are the layout's ordinary names.
    """
    if not isinstance(key, str) or not key.strip():
        raise InvalidArgumentError("key is required and must not be blank")
    check_visible_id("key", key.translate(_CONTROL_TO_SPACE))  # control characters are escaped below
    replaced = "".join("_" if ch in INVALID_FILE_NAME_CHARS else ch for ch in key)
    device = is_windows_device_name(replaced)
    if device:
        replaced = replaced.replace(".", "_")  # `nul.x_<fnv8>` would still open NUL
    stem = replaced if replaced == key and not device else f"{replaced}_{fnv1a32_utf16(key):08x}"
    if set(stem) <= {"."}:
        # `.` and `..` name the folder itself or its parent on every platform.
        raise UnsafeKeyError("key would resolve outside the data root")
    if len((stem + HISTORY_SUFFIX).encode("utf-8", "surrogatepass")) > MAX_FILE_NAME_BYTES:
        raise InvalidArgumentError(f"key is too long for a file name (at most {MAX_FILE_NAME_BYTES} bytes with suffix)")
    return stem


def pre_escape_stem(key: str) -> str | None:
    """The stem a device-named key had before device names were escaped (None for every other key).

    Such files could only be written outside Windows; the stores move them to the new name.
    """
    replaced = "".join("_" if ch in INVALID_FILE_NAME_CHARS else ch for ch in key)
    if not is_windows_device_name(replaced):
        return None
    return replaced if replaced == key else f"{replaced}_{fnv1a32_utf16(key):08x}"


def check_windows_path_length(path: str) -> None:
    """Raise PathTooLongError when a Windows path (or the temp file beside it) is beyond MAX_PATH.

    Windows without the long-path opt-in cannot create it, and the Unity side reading the same
    folder has no `\\?\\` prefix either, so the runtime refuses such a path clearly instead.
    """
    name_start = max(path.rfind("\\"), path.rfind("/")) + 1
    longest = max(len(path), name_start + TEMP_NAME_CHARS)
    if longest >= WINDOWS_MAX_PATH:
        raise PathTooLongError(
            f"the save file's full path would be {longest} characters, beyond Windows' limit of "
            f"{WINDOWS_MAX_PATH - 1}: use a shorter data folder (persistentDataPath) or a shorter role id")


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
    return _field(obj, "Summary", str, "", "summary file")


# --- legacy migration --------------------------------------------------------------------------


def normalize_timestamp(value: int) -> int:
    """Unix seconds; a millisecond value (> 1e11) is divided by 1000."""
    return value // 1000 if value > MILLISECONDS_THRESHOLD else value


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
            parsed = parsed.replace(tzinfo=timezone.utc)
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
    items = _unwrap_array(strict_json_loads(text, "legacy conversation field"))
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
        name = _text(_ci_get(item, "name", "role", "toolName", "tool"))
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
