"""The file names of the file stores' saves (contract §3.1), as pure functions: no I/O here.

`file_stem(key)` is the Windows-safe stem of a storage key (FNV-1a-32 suffix when anything was
escaped, as the C# side computes it); the folders and suffixes around it; the Windows path limit.
"""

from __future__ import annotations

import functools

from pyruntime.errors import InvalidArgumentError, UnsafeKeyError
from pyruntime.scopes import check_visible_id

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
    return _file_stem(key)


@functools.lru_cache(maxsize=4096)
def _file_stem(key: str) -> str:
    """`file_stem` of a non-blank string key; recent answers are kept (every store call derives its stem, walking the
    key through Unicode tables). A key that is refused is checked again each time."""
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
