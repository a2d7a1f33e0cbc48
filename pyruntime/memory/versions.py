"""Version snapshots of the memory document: recording (pure), listing, revert and diff (contract §2).

Error style: helpers that return a `MemoryToolResult` (`revert_memory`, like `MemoryTool.execute`)
never raise for a bad request, they return a failure result; helpers that return data
(`list_versions`, `diff_versions`) raise `NotFoundError` / `MemoryUnreadableError`.
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Callable

from pyruntime.errors import CoreAIError, DiskFullError, MemoryUnreadableError, NotFoundError
from pyruntime.memory.actions import MemoryToolAction, MemoryToolResult
from pyruntime.memory.documents import LoadStatus, MemoryDocuments
from pyruntime.memory.state import AgentMemoryState, MemoryVersion

logger = logging.getLogger(__name__)

REVERT_ACTION = "revert"


def version_note(before: int, after: int) -> str:
    """`chars {before}->{after} ({+|-}{delta})`, e.g. `chars 0->11 (+11)`."""
    delta = after - before
    return f"chars {before}->{after} ({'+' if delta >= 0 else '-'}{abs(delta)})"


def record_version(state: AgentMemoryState, action: str | MemoryToolAction, new_memory: str, now: float,
                   *, note: str | None = None) -> AgentMemoryState:
    """state with memory set to new_memory and one more snapshot; only the newest effective_max_versions stay."""
    action_name = action.wire_name if isinstance(action, MemoryToolAction) else action
    snapshot = MemoryVersion(
        version=state.latest_version + 1,
        timestamp=int(now),
        action=action_name,
        content_after=new_memory,
        note=note if note is not None else version_note(len(state.memory), len(new_memory)),
    )
    ordered = sorted(state.versions, key=lambda v: v.version)
    kept = (*ordered, snapshot)[-state.effective_max_versions :]
    return state.evolve(memory=new_memory, versions=tuple(kept))


def _load(store: MemoryDocuments, key: str) -> AgentMemoryState:
    """The state of key; NotFoundError / MemoryUnreadableError otherwise (messages name no key)."""
    loaded = store.try_load(key)
    if loaded.status is LoadStatus.FAILED:
        raise MemoryUnreadableError(f"memory could not be read: {loaded.reason}")
    if loaded.status is LoadStatus.NOT_FOUND or loaded.state is None:
        raise NotFoundError("no memory document exists for this key")
    return loaded.state


def _retained(state: AgentMemoryState) -> str:
    numbers = sorted(v.version for v in state.versions)
    return ", ".join(str(n) for n in numbers) if numbers else "none"


def list_versions(store: MemoryDocuments, key: str) -> list[MemoryVersion]:
    """The retained snapshots of key, oldest first ([] when key has no document)."""
    try:
        state = _load(store, key)
    except NotFoundError:
        return []
    return sorted(state.versions, key=lambda v: v.version)


def revert_memory(store: MemoryDocuments, key: str, version: int, *,
                  clock: Callable[[], float] = time.time) -> MemoryToolResult:
    """Set memory to version's ContentAfter and record a `revert` version; a failure result when that cannot be done."""
    try:
        state = _load(store, key)
    except (NotFoundError, MemoryUnreadableError) as exc:
        return MemoryToolResult.failed(f"cannot revert: {exc}")
    except (CoreAIError, OSError) as exc:
        logger.warning("memory revert: load failed (%s)", type(exc).__name__)
        return MemoryToolResult.failed(f"cannot revert: memory could not be read ({type(exc).__name__})")

    def revert(current: AgentMemoryState) -> AgentMemoryState:
        target = next((v for v in current.versions if v.version == version), None)
        if target is None:
            raise NotFoundError(f"version {version} is not retained (retained versions: {_retained(current)})")
        return record_version(current, REVERT_ACTION, target.content_after, clock(),
                              note=f"Reverted to version {version}.")

    try:
        after = store.mutate(key, revert)
    except NotFoundError as exc:
        return MemoryToolResult.failed(f"cannot revert: {exc}", version=state.latest_version,
                                       memory_length=len(state.memory))
    except MemoryUnreadableError as exc:
        return MemoryToolResult.failed(f"cannot revert: {exc}")
    except DiskFullError as exc:
        return MemoryToolResult.failed(str(exc), version=state.latest_version, memory_length=len(state.memory))
    except (CoreAIError, OSError) as exc:
        logger.warning("memory revert: the change did not become durable (%s)", type(exc).__name__)
        return MemoryToolResult.failed(
            f"cannot revert: the change could not be saved ({type(exc).__name__}); nothing was changed",
            version=state.latest_version, memory_length=len(state.memory))
    return MemoryToolResult.succeeded(
        f"reverted to version {version}. Memory is {len(after.memory)} chars, version {after.latest_version}.",
        after.memory, after.latest_version)


def _diff_lines(text: str) -> list[str]:
    """Lines with their newline; a last line without one is marked the way diff tools mark it."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n\\ No newline at end of file\n")
    return lines


def diff_versions(store: MemoryDocuments, key: str, from_version: int, to_version: int) -> str:
    """Unified diff between two retained versions (0 = the empty document); "" when they are equal."""
    state = _load(store, key)
    contents = {v.version: v.content_after for v in state.versions}
    contents.setdefault(0, "")
    missing = [n for n in (from_version, to_version) if n not in contents]
    if missing:
        listed = ", ".join(str(n) for n in dict.fromkeys(missing))
        raise NotFoundError(f"version(s) {listed} not retained (retained versions: {_retained(state)}; "
                            "0 is the empty document)")
    diff = difflib.unified_diff(_diff_lines(contents[from_version]), _diff_lines(contents[to_version]),
                                fromfile=f"version {from_version}", tofile=f"version {to_version}")
    return "".join(diff)
