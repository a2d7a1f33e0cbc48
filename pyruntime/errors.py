"""The errors the runtime raises; each names the problem without echoing personal data."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Self


class CoreAIError(Exception):
    """Base class of every error the runtime raises on purpose."""


class InvalidArgumentError(CoreAIError, ValueError):
    """A caller passed something malformed (blank role, bad scope, bad argument)."""


class UnsafeKeyError(InvalidArgumentError):
    """A storage key would resolve outside the data root."""


class NotFoundError(CoreAIError, LookupError):
    """The key, version or role asked for does not exist."""


class LimitExceededError(CoreAIError):
    """A size limit (e.g. MaxMemoryChars) would be exceeded; the message names the limit."""


class MemoryUnreadableError(CoreAIError):
    """A memory document exists but cannot be read; it is never overwritten by a mutation."""


class PersistenceError(CoreAIError, OSError):
    """A write did not become durable."""


DISK_FULL_MESSAGE = "the disk is full: nothing was saved and nothing was changed; free some space and try again"
"""What every path says when a save did not fit on the disk (store call, memory tool, revert, CLI, both transports)."""


class DiskFullError(PersistenceError):
    """A write did not fit on the disk or in the user's quota; nothing changed.

    ENOSPC, EDQUOT, or PostgreSQL's disk_full: every path says the same words.
    """

    def __init__(self, message: str = DISK_FULL_MESSAGE) -> None:
        super().__init__(message)


class StoreLockedError(PersistenceError):
    """A save's lock was not obtained in time (another process or call holds it); nothing was done."""


class AlreadyExistsError(CoreAIError):
    """The thing to create exists already (a second result for one game-tool call); nothing was changed."""


class ToolCallEndedError(CoreAIError):
    """A game-tool result came after its call ended without one (timed out, turn cancelled or ended)."""


class SettingChoice(enum.Enum):
    """A setting's closed set of string values; `parse` reads one (trimmed, case-insensitive) or fails clearly.

    A subclass names its setting for the error: `class ToolCallMode(SettingChoice, setting="tool-call mode")`.
    """

    _setting: ClassVar[str]

    def __init_subclass__(cls, *, setting: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._setting = setting

    @classmethod
    def parse(cls, value: str | Self) -> Self:
        """The member `value` names, or InvalidArgumentError naming the setting and its values."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for choice in cls:
                if value.strip().lower() == choice.value:
                    return choice
        expected = " or ".join(repr(choice.value) for choice in cls)
        raise InvalidArgumentError(f"unknown {cls._setting} {value!r}; expected {expected}")
