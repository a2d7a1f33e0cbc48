"""Scopes and the single mapping from (scope, role, actor) to a storage key (contract §4)."""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError

DEFAULT_TURN_ROLE = "Creator"
ANONYMOUS_ACTOR = "local"
RESERVED_KEY_PREFIXES = ("scope-v1-", "actor-v1-")
MAX_ROLE_ID_BYTES = 128
"""Longest role id, in UTF-8 bytes. In the empty scope the role id is the save's file name
(`<role>[_<fnv8>].history.jsonl`); 128 keeps that name at most 151 bytes, far under the 255-byte
name limit of ext4/NTFS/APFS, and leaves about 100 characters of Windows' 260-character MAX_PATH for
`<persistentDataPath>/CoreAI/AgentMemory/` (Unity on Windows does not opt into long paths)."""


@dataclass(frozen=True)
class AgentMemoryScope:
    """Tenant / user / session / topic that isolate one player's data from another's."""

    tenant_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    topic_id: str | None = None

    def parts(self) -> tuple[str, str, str, str]:
        """The four fields, None as "" and trimmed."""
        return tuple((v or "").strip() for v in (self.tenant_id, self.user_id, self.session_id, self.topic_id))  # type: ignore[return-value]

    @property
    def is_empty(self) -> bool:
        """True when every field is blank (the key is then the bare role id)."""
        return not any(self.parts())


EMPTY_SCOPE = AgentMemoryScope()


def _utf16_len(value: str) -> int:
    return len(value.encode("utf-16-le")) // 2


def _part(value: str) -> str:
    return f"{_utf16_len(value)}:{value};"


# Characters that are invisible, reorder text or look like a plain space: two ids differing only by them look
# the same (`Teacher` and `Teacher\u200b`, `Guard` and `\u202eGuard`) but name different saves. Unicode's
# Default_Ignorable_Code_Point set (the ones of no category below), plus all of these categories:
# Cc control, Cf format (zero-width, bidi embeddings/overrides/isolates, BOM, soft hyphen), Co private use,
# Cs surrogates, Cn unassigned, Zl/Zp line and paragraph separators, Zs spaces other than U+0020.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs"})
_DEFAULT_IGNORABLE = ((0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
                      (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0100, 0xE01EF))


_EMOJI_JOINERS = frozenset("\u200d\ufe0e\ufe0f")  # ZWJ and text/emoji presentation selectors


def _is_symbol(ch: str) -> bool:
    return unicodedata.category(ch).startswith("S")


def _refused_character(value: str, index: int) -> bool:
    ch = value[index]
    if ch == " ":
        return False
    if ch in _EMOJI_JOINERS and index > 0 and _is_symbol(value[index - 1]):
        # Inside an emoji sequence (`⚔️`, `👨‍👩‍👧`): visible as part of the symbol. A joiner must join two symbols.
        return ch == "\u200d" and not (index + 1 < len(value) and _is_symbol(value[index + 1]))
    code = ord(ch)
    return unicodedata.category(ch) in _REFUSED_CATEGORIES or any(lo <= code <= hi for lo, hi in _DEFAULT_IGNORABLE)


def check_visible_id(name: str, value: str) -> str:
    """value, refused (InvalidArgumentError) when it holds an invisible, reordering or look-alike character or is
    not in Unicode NFC form: ids that name save files must not have look-alikes that name other files."""
    for index, ch in enumerate(value):
        if _refused_character(value, index):
            label = unicodedata.name(ch, "unnamed")
            raise InvalidArgumentError(
                f"{name} contains U+{ord(ch):04X} ({label}) at position {index}: invisible, bidi-control and "
                "look-alike space characters are refused in ids (two ids that look the same would name two saves)")
    if value and unicodedata.combining(value[0]):
        raise InvalidArgumentError(f"{name} starts with a combining mark (U+{ord(value[0]):04X}): it would join "
                                   "onto whatever is shown before it")
    if unicodedata.normalize("NFC", value) != value:
        raise InvalidArgumentError(
            f"{name} is not in Unicode NFC form (a letter written as base + combining accent): write it composed, "
            "as two spellings that look the same would name two saves")
    return value


# A turn derives its conversation's key a dozen times (each store call, the prompt cache's anchors): the checks
# below walk every character through Unicode tables, so the answers for recent ids are kept. Only answers are kept:
# an id refused is checked again each time (it raises).
_RECENT_IDS = 4096


@functools.lru_cache(maxsize=_RECENT_IDS)
def normalize_role_id(role_id: str | None) -> str:
    """Trimmed role id; a blank one is an error (store calls never default the role)."""
    role = (role_id or "").strip()
    if not role:
        raise InvalidArgumentError("role_id is required and must not be blank")
    size = len(role.encode("utf-8", "surrogatepass"))
    if size > MAX_ROLE_ID_BYTES:
        raise InvalidArgumentError(
            f"role_id is {size} bytes of UTF-8, longer than the limit of {MAX_ROLE_ID_BYTES} (it names the save file)")
    if set(role) <= {"."}:
        # `.` and `..` name a folder itself or its parent: such a role could never have a save file.
        raise InvalidArgumentError("role_id must not consist of dots only")
    check_visible_id("role_id", role)
    if role.startswith(RESERVED_KEY_PREFIXES):
        # The empty scope stores under the bare role id: a role named like a hashed key would collide with one.
        raise InvalidArgumentError(f"role_id must not start with {' or '.join(RESERVED_KEY_PREFIXES)}")
    return role


@functools.lru_cache(maxsize=_RECENT_IDS)
def storage_key(role_id: str | None, scope: AgentMemoryScope = EMPTY_SCOPE, actor: str | None = None) -> str:
    """The storage key of one identity: bare role, `scope-v1-<sha256>` or `actor-v1-<sha256>`."""
    role = normalize_role_id(role_id)
    scope = scope or EMPTY_SCOPE
    actor_id = (actor or "").strip()
    if actor_id and actor_id != ANONYMOUS_ACTOR:
        canonical = _part(actor_id)
        if not scope.is_empty:
            canonical += "".join(_part(p) for p in scope.parts())
        canonical += _part(role)
        return "actor-v1-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    if scope.is_empty:
        return role
    canonical = "".join(_part(p) for p in scope.parts()) + _part(role)
    return "scope-v1-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def conversation_id(role_id: str | None, scope: AgentMemoryScope = EMPTY_SCOPE, actor: str | None = None) -> str:
    """The opaque, stable id of one conversation (role, scope, actor): the SHA-256 of its storage key, in hex.

    What a load balancer keeps a conversation on one runtime by (the clients send it with every call
    about the conversation); it carries no id in clear. Raises what `storage_key` raises for a bad role id.
    """
    return hashlib.sha256(storage_key(role_id, scope, actor).encode("utf-8")).hexdigest()
