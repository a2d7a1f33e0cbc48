"""The `memory` tool: its definition for the model and its execution against a store (contract §1).

`MemoryTool.execute` never raises for bad input: every problem becomes a failure result and
changes nothing. Mutations run through `store.mutate` (atomic, durable before return) and record a
version only when the document changed. `MaxMemoryChars` refuses a mutation that would grow the
document past the limit; one that shrinks or keeps the size is allowed even over the limit, so an
oversized document (limit lowered later) can always be cleaned up.
"""

from __future__ import annotations

import copy
import errno
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyruntime.errors import (
    CoreAIError,
    DiskFullError,
    InvalidArgumentError,
    LimitExceededError,
    MemoryUnreadableError,
    StoreLockedError,
)
from pyruntime.memory.actions import MEMORY_ACTIONS, MemoryToolAction, MemoryToolArgs, MemoryToolResult
from pyruntime.memory.document import DocumentEdit, apply_edit
from pyruntime.memory.documents import LoadStatus, MemoryDocuments
from pyruntime.memory.repair import parse_memory_tool_arguments
from pyruntime.memory.state import AgentMemoryState
from pyruntime.memory.versions import record_version

__all__ = [
    "DEFAULT_MAX_MEMORY_CHARS",
    "MEMORY_TOOL_NAME",
    "MemoryTool",
    "MemoryToolResult",
    "memory_tool_definition",
]

logger = logging.getLogger(__name__)

MEMORY_TOOL_NAME = "memory"
DEFAULT_MAX_MEMORY_CHARS = 16000

_DESCRIPTION = (
    "Your persistent memory: one plain-text document that is kept between conversations. "
    "Actions: read (show the document); write (replace it with content); append (add content as a new line; "
    "a line that already exists is not added twice); clear (empty it); str_replace (replace the first exact "
    "old_text with new_text, or every match with replace_all); insert (content before the 1-based line, or on a "
    "new line after the first line containing anchor, or at the end); delete (remove the first exact old_text, "
    "or every match with replace_all); rename (rename the leading label 'old_text:' of a line to new_text). "
    "Edits are exact and case-sensitive. Preferred action for this role: {default}."
)


def _simplify_schema(node: Any) -> Any:
    """Pydantic's schema made plain for small models and grammars: no titles, no null branches or defaults."""
    if isinstance(node, list):
        return [_simplify_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if isinstance(branches, list):
        concrete = [b for b in branches if b != {"type": "null"}]
        if len(concrete) == 1:
            merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **concrete[0]}
            return _simplify_schema(merged)
    return {k: _simplify_schema(v) for k, v in node.items() if k != "title" and not (k == "default" and v is None)}


@functools.cache
def _definition(default_action: MemoryToolAction) -> dict[str, Any]:
    schema = _simplify_schema(MemoryToolArgs.model_json_schema())
    schema["properties"]["action"]["enum"] = list(MEMORY_ACTIONS)
    # The model's docstring is for Python readers; the tool description already explains the tool.
    parameters = {
        "type": "object",
        "properties": schema["properties"],
        "required": schema["required"],
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {
            "name": MEMORY_TOOL_NAME,
            "description": _DESCRIPTION.format(default=default_action.wire_name),
            "parameters": parameters,
        },
    }


def memory_tool_definition(default_action: MemoryToolAction = MemoryToolAction.Append) -> dict[str, Any]:
    """The OpenAI function-tool dict of `memory`; byte-stable for a given default action (cached prompt prefix)."""
    return copy.deepcopy(_definition(MemoryToolAction.parse(default_action)))


def _reason(exc: BaseException) -> str:
    """An exception as `Type` or `Type: ERRNO`: never a path, key or content (a lock timeout says what to do)."""
    if isinstance(exc, StoreLockedError):
        return f"StoreLockedError: {exc}"  # written to name no key or path
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    return f"{type(exc).__name__}: {name}" if name else type(exc).__name__


class MemoryTool:
    """Runs `memory` tool calls for one storage key."""

    name = MEMORY_TOOL_NAME

    def __init__(self, store: MemoryDocuments, key: str, *, max_memory_chars: int = DEFAULT_MAX_MEMORY_CHARS,
                 clock: Callable[[], float] = time.time) -> None:
        if not isinstance(key, str) or not key.strip():
            raise InvalidArgumentError("key is required and must not be blank")
        if max_memory_chars < 0:
            raise InvalidArgumentError("max_memory_chars must be 0 (unlimited) or positive")
        self._store = store
        self._key = key
        self._max_memory_chars = max_memory_chars
        self._clock = clock

    @property
    def max_memory_chars(self) -> int:
        """The document size limit in chars (0 = unlimited)."""
        return self._max_memory_chars

    def execute(self, arguments: str | Mapping[str, Any] | MemoryToolArgs) -> MemoryToolResult:
        """Run one call; bad arguments, a missing text, an unreadable document or a failed save give a failure."""
        try:
            args = parse_memory_tool_arguments(arguments)
        except InvalidArgumentError as exc:
            return MemoryToolResult.failed(str(exc))
        except RecursionError:
            return MemoryToolResult.failed("arguments are nested too deeply")
        if args.action == "read":
            return self._read()
        return self._mutate(args)

    def _read(self) -> MemoryToolResult:
        try:
            loaded = self._store.try_load(self._key)
        except (CoreAIError, OSError) as exc:
            logger.warning("memory tool: read failed (%s)", type(exc).__name__)
            return MemoryToolResult.failed(f"memory could not be read ({_reason(exc)})")
        if loaded.status is LoadStatus.FAILED:
            # Never "empty": the document exists, and the model must not rebuild it from scratch.
            return MemoryToolResult.failed(
                f"memory could not be read: {loaded.reason}. It was not changed; do not rewrite it from scratch.")
        state = loaded.state if loaded.status is LoadStatus.LOADED and loaded.state is not None else AgentMemoryState()
        if not state.memory:
            return MemoryToolResult.succeeded(f"memory is empty (version {state.latest_version}).", "",
                                              state.latest_version)
        return MemoryToolResult.succeeded(
            f"read memory ({len(state.memory)} chars, version {state.latest_version}).",
            state.memory, state.latest_version)

    def _check_limit(self, before: str, after: str) -> None:
        limit = self._max_memory_chars
        if limit and len(after) > limit and len(after) > len(before):
            raise LimitExceededError(
                f"memory would be {len(after)} chars, over the limit of {limit} chars (MaxMemoryChars); "
                f"nothing was changed. It is {len(before)} chars now: shorten or delete entries first.")

    def _mutate(self, args: MemoryToolArgs) -> MemoryToolResult:
        seen: dict[str, Any] = {}

        def change(state: AgentMemoryState) -> AgentMemoryState | None:
            seen["before"] = state
            edit = apply_edit(state.memory, args)
            seen["edit"] = edit
            if not edit.changed:
                return None
            self._check_limit(state.memory, edit.text)
            return record_version(state, args.action, edit.text, self._clock())

        try:
            after = self._store.mutate(self._key, change)
        except (InvalidArgumentError, LimitExceededError) as exc:
            return self._failure(str(exc), seen.get("before"))
        except MemoryUnreadableError as exc:
            logger.warning("memory tool: %s refused, the document is unreadable", args.action)
            return MemoryToolResult.failed(
                f"memory could not be read, so it was not changed ({exc}). Do not rewrite it from scratch.")
        except DiskFullError as exc:
            logger.warning("memory tool: %s did not fit on the disk", args.action)
            return self._failure(str(exc), seen.get("before"))
        except (CoreAIError, OSError) as exc:
            logger.warning("memory tool: %s did not become durable (%s)", args.action, type(exc).__name__)
            return self._failure(f"the change could not be saved ({_reason(exc)}); nothing was changed",
                                 seen.get("before"))
        return self._success(args.action, seen["edit"], after)

    @staticmethod
    def _failure(error: str, state: AgentMemoryState | None) -> MemoryToolResult:
        if state is None:
            return MemoryToolResult.failed(error)
        return MemoryToolResult.failed(error, version=state.latest_version, memory_length=len(state.memory))

    @staticmethod
    def _success(action: str, edit: DocumentEdit, after: AgentMemoryState) -> MemoryToolResult:
        status = f"Memory is {len(after.memory)} chars, version {after.latest_version}."
        if edit.changed:
            detail = f"{action}: {edit.detail}. {status}"
        elif action == "append":
            detail = f"{edit.detail}. {status}"
        else:
            detail = f"{action}: {edit.detail}; the memory was already like that, so no version was recorded. {status}"
        return MemoryToolResult.succeeded(detail, after.memory, after.latest_version)
