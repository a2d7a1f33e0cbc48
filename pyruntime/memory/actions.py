"""The `memory` tool's wire types: actions, the argument model and the result (contract §1)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

MemoryActionName = Literal["read", "write", "append", "clear", "str_replace", "insert", "delete", "rename"]

MEMORY_ACTIONS: tuple[str, ...] = get_args(MemoryActionName)
"""Every action the model may call, in the order the spec lists them."""


class MemoryToolAction(enum.Enum):
    """A role's default memory action, shown to the model in the tool description (default Append)."""

    Write = "write"
    Append = "append"
    Clear = "clear"
    StrReplace = "str_replace"
    Insert = "insert"
    Delete = "delete"
    Rename = "rename"

    @property
    def wire_name(self) -> str:
        """The action name the model sends (`str_replace`, not `StrReplace`)."""
        return self.value

    @classmethod
    def parse(cls, name: str | MemoryToolAction) -> MemoryToolAction:
        """The action for a wire name (`str_replace`) or member name (`StrReplace`), trimmed, case-insensitive."""
        if isinstance(name, cls):
            return name
        if isinstance(name, str):
            wanted = name.strip().lower().replace("_", "")
            for member in cls:
                if wanted == member.name.lower():
                    return member
        valid = ", ".join(m.value for m in cls)
        raise ValueError(f"Unknown default memory action: {name!r}. Valid actions: {valid}")


def unknown_action_message(action: str) -> str:
    """The spec's exact error for an action the tool does not know."""
    return f"Unknown action: '{action}'. Valid actions: {', '.join(MEMORY_ACTIONS)}"


def normalize_action(action: str) -> str:
    """Trimmed and lower-cased, as the spec says actions are matched."""
    return action.strip().lower()


class MemoryToolArgs(BaseModel):
    """Arguments of one `memory` tool call; build it with `parse_memory_tool_arguments` to get repairs."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    action: MemoryActionName = Field(description="What to do with the memory document.")
    content: str | None = Field(
        default=None,
        description="Text to write, append or insert; fallback for new_text (str_replace, rename) "
        "and old_text (delete).",
    )
    old_text: str | None = Field(
        default=None, description="Exact, case-sensitive text to find (str_replace, delete) or label to rename."
    )
    new_text: str | None = Field(
        default=None, description="Replacement text (str_replace; empty string allowed) or new label (rename)."
    )
    anchor: str | None = Field(
        default=None, description="insert: put content on a new line after the first line containing this text."
    )
    line: int | None = Field(
        default=None, description="insert: 1-based line number to insert content before; wins over anchor."
    )
    replace_all: bool | None = Field(
        default=None, description="str_replace/delete: true to change every exact match instead of the first."
    )

    @field_validator("action", mode="before")
    @classmethod
    def _normalize_action(cls, value: Any) -> Any:
        # Actions are trimmed and case-insensitive (contract §1).
        return normalize_action(value) if isinstance(value, str) else value


MEMORY_ARGUMENT_NAMES: tuple[str, ...] = tuple(MemoryToolArgs.model_fields)
"""The argument names the tool accepts, in schema order."""


SUCCESS_PREFIX = "DONE:"


@dataclass(frozen=True)
class MemoryToolResult:
    """What the model gets back from one `memory` call (or a revert): success, text, and the document's state.

    On success `memory` is the current document (so the model sees what it now remembers) and
    `version`/`memory_length` describe it. On failure `memory` is None; `version` and
    `memory_length` describe the unchanged document when it was read, else 0.
    """

    success: bool
    message: str | None
    error: str | None
    version: int
    memory_length: int
    memory: str | None

    def __post_init__(self) -> None:
        if self.success and not (self.message or "").startswith(SUCCESS_PREFIX):
            raise ValueError(f"a success message must start with {SUCCESS_PREFIX}")
        if not self.success and "DONE" in f"{self.message or ''}{self.error or ''}":
            raise ValueError("a failure must never contain DONE")

    @classmethod
    def succeeded(cls, detail: str, memory: str, version: int) -> MemoryToolResult:
        """A success: `DONE: {detail}` with the current document."""
        return cls(True, f"{SUCCESS_PREFIX} {detail}", None, version, len(memory), memory)

    @classmethod
    def failed(cls, error: str, *, version: int = 0, memory_length: int = 0) -> MemoryToolResult:
        """A failure; text echoed from the model that spells DONE is defused so it cannot read as success."""
        return cls(False, None, error.replace("DONE", "Done"), version, memory_length, None)

    def to_dict(self) -> dict[str, object]:
        """The result object with the spec's field names, in the spec's order."""
        return {
            "Success": self.success,
            "Message": self.message,
            "Error": self.error,
            "Version": self.version,
            "MemoryLength": self.memory_length,
            "Memory": self.memory,
        }

    def to_json(self) -> str:
        """The compact JSON the model reads (no spaces, non-ASCII kept as is)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)
