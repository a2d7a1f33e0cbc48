"""The message type the history pipeline works on, its stable id, and UTF-16 text clipping.

Lengths are counted in UTF-16 code units, like the C# original (`string.Length`), so the `N` of a
`…[+N chars]` marker is the same number the Unity side would print; a cut never splits a
surrogate pair, i.e. never splits one Python character outside the BMP.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property

from pyruntime.errors import InvalidArgumentError
from pyruntime.stores.base import ChatMessage, TranscriptEntry, TranscriptKind

CLIP_ELLIPSIS = "…"
_NEWLINES = re.compile(r"\s*(?:\r\n|\r|\n)\s*")


def message_id(role: str, content: str) -> str:
    """First 12 hex chars of SHA-256 of `role.strip() + "\\n" + content.strip()` (the fold marker hash)."""
    data = (role.strip() + "\n" + content.strip()).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:12]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (C# `string.Length`)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of at most `units` UTF-16 code units (a character is never split)."""
    if units <= 0:
        return ""
    if text.isascii():
        return text[:units]
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def clip_marked(text: str, limit: int) -> tuple[str, int]:
    """`text` if it fits `limit` UTF-16 units, else `kept.rstrip() + "…[+N chars]"`; returns (text, N).

    N counts every unit not kept (the whitespace `rstrip` removes included), so kept + N = total.
    """
    total = utf16_len(text)
    if total <= limit:
        return text, 0
    kept = utf16_prefix(text, limit).rstrip()
    dropped = total - utf16_len(kept)
    return f"{kept}{CLIP_ELLIPSIS}[+{dropped} chars]", dropped


def clip_to_fit(text: str, limit: int) -> tuple[str, int]:
    """Like `clip_marked`, but the result, `…[+N chars]` included, is at most `limit` units."""
    clipped, dropped = clip_marked(text, limit)
    total = utf16_len(text)
    while dropped and utf16_len(clipped) > limit and total - dropped > 0:
        overshoot = utf16_len(clipped) - limit
        clipped, dropped = clip_marked(text, max(0, total - dropped - overshoot))
    return clipped, dropped


def one_line(text: str) -> str:
    """Content flattened to one line (so a bullet or payload line can never fake a marker line)."""
    return _NEWLINES.sub(" ", text.strip())


@dataclass(frozen=True)
class HistoryMessage:
    """One stored chat message as the pipeline sees it.

    A tool call is an assistant message with a `tool_call_id`; a tool result has role `tool` and the
    call's id. Both travel together: pruning and folding never separate them.
    """

    role: str
    content: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    # The store's monotonic order, the message's identity (0 = unknown: a legacy row, a caller without a
    # store). Not part of equality: two messages compare by what the model sees.
    order: int = field(default=0, compare=False)

    @cached_property  # hashed once per message: fold-point searches and cut reports ask often
    def id(self) -> str:
        """The stable content hash listed in cut reports and fold markers."""
        return message_id(self.role, self.content)

    @property
    def is_tool_result(self) -> bool:
        """A tool result message (role `tool`)."""
        return self.role.strip().lower() == "tool"

    @property
    def is_assistant(self) -> bool:
        """An assistant message (a tool call included)."""
        return self.role.strip().lower() == "assistant"

    def to_dict(self) -> dict[str, str]:
        """The OpenAI-style `{"role", "content"}` (plus `tool_call_id` when set)."""
        out = {"role": self.role, "content": self.content}
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    @classmethod
    def from_chat_message(cls, message: ChatMessage) -> HistoryMessage:
        """A stored chat-window message (no tool call id)."""
        return cls(role=message.role, content=message.content, order=message.order)

    @classmethod
    def from_transcript_entry(cls, entry: TranscriptEntry) -> HistoryMessage:
        """A transcript row: tool calls become assistant messages, tool results `tool` messages."""
        if entry.kind is TranscriptKind.TOOL_CALL:
            return cls("assistant", entry.content, entry.call_id or None, entry.name, entry.order)
        if entry.kind is TranscriptKind.TOOL_RESULT:
            return cls("tool", entry.content, entry.call_id or None, entry.name, entry.order)
        return cls(role=entry.name, content=entry.content, order=entry.order)


def as_history_messages(items: object) -> list[HistoryMessage]:
    """Normalize stored items (HistoryMessage, ChatMessage, TranscriptEntry) to HistoryMessage."""
    out: list[HistoryMessage] = []
    for item in items:  # type: ignore[attr-defined]
        if isinstance(item, HistoryMessage):
            out.append(item)
        elif isinstance(item, ChatMessage):
            out.append(HistoryMessage.from_chat_message(item))
        elif isinstance(item, TranscriptEntry):
            out.append(HistoryMessage.from_transcript_entry(item))
        else:
            raise InvalidArgumentError(f"unsupported history item type: {type(item).__name__}")
    return out
