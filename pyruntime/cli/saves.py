"""Where the saves commands' saves are: the files under --data-dir, or a running runtime at --runtime.

Both go through `RuntimeClient` to the same `MemoryStoreService`: the files over the in-process
transport (`pyruntime.rpc.in_process`, no sockets), a runtime over gRPC or Connect (token from
`--token-file`, else $COREAI_RUNTIME_TOKEN, else `<data-dir>/CoreAI/runtime/token`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyruntime.cli.guard import RuntimeUnreachableError, UsageError
from pyruntime.client import (
    PlayerForgotten,
    RuntimeCallError,
    RuntimeClient,
    RuntimeLimitExceededError,
    RuntimeMemoryUnreadableError,
    RuntimeNotFoundError,
    RuntimeUnavailableError,
    read_token_file,
)
from pyruntime.memory.actions import MemoryToolResult
from pyruntime.memory.state import MemoryVersion
from pyruntime.net.auth import TOKEN_ENV, check_token, default_token_file
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc.in_process import InProcessTransport
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service.erasure import EngineFilesEraser
from pyruntime.service.memory_store import MemoryStoreService
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, ScopeSnapshot, TranscriptEntry, open_stores


@dataclass(frozen=True)
class Target:
    """One save: the (trimmed) role, the scope and the actor (None = none)."""

    role: str
    scope: AgentMemoryScope
    actor: str | None


# The service answers these refusals of a memory call with a status where the tool itself returns a
# failed result; Saves turns them back into that result, as the `memory` tool would print it.
_REFUSALS_AS_STATUS = (RuntimeMemoryUnreadableError, RuntimeLimitExceededError, RuntimeNotFoundError,
                       RuntimeUnavailableError)


class Saves:
    """The saves through `RuntimeClient`: a running runtime's sockets, or the files over the in-process transport.

    Either way the same `MemoryStoreService` answers, with its role policy and the stores' locks.
    """

    def __init__(self, client: RuntimeClient) -> None:
        self._client = client

    @classmethod
    def open_files(cls, data_dir: Path, policy: AgentMemoryPolicy) -> Saves:
        """The file stores under data_dir/CoreAI, opened by this process, served in-process under policy."""
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
        # A deletion also takes what an engine left of the conversations under the data folder.
        service = MemoryStoreService(stores, policy, workers=1, eraser=EngineFilesEraser(data_dir))
        return cls(RuntimeClient("in-process", token="", transport=InProcessTransport(service)))

    @classmethod
    def connect(cls, url: str, token: str) -> Saves:
        """A client of the runtime at url, after checking that it answers (Health needs no token)."""
        client = RuntimeClient(url, token=token)
        try:
            client.health()
        except RuntimeCallError as exc:
            client.close()
            raise RuntimeUnreachableError(
                f"the runtime at {url.strip()} is not reachable ({exc.code.name}); is the game running on that "
                "port?") from None
        return cls(client)

    def _where(self, target: Target) -> dict[str, Any]:
        return {"scope": target.scope, "actor": target.actor}

    def _as_result(self, target: Target, call: Callable[[], MemoryToolResult]) -> MemoryToolResult:
        try:
            return call()
        except _REFUSALS_AS_STATUS as exc:
            # The tool's failure reports the unchanged document's version and length (0 when unreadable).
            loaded = self._client.load_state(target.role, **self._where(target))
            state = loaded.state if loaded.status is LoadStatus.LOADED else None
            if state is None:
                return MemoryToolResult.failed(str(exc))
            return MemoryToolResult.failed(str(exc), version=state.latest_version, memory_length=len(state.memory))

    def apply_memory_tool(self, target: Target, arguments: Mapping[str, Any]) -> MemoryToolResult:
        """One `memory` call under the service's role policy."""
        return self._as_result(target, lambda: self._client.apply_memory_tool(target.role, arguments,
                                                                              **self._where(target)))

    def list_versions(self, target: Target) -> list[MemoryVersion]:
        """Retained versions, oldest first."""
        return self._client.list_versions(target.role, **self._where(target))

    def revert_memory(self, target: Target, version: int) -> MemoryToolResult:
        """Set the memory to a retained version (recorded as a new version)."""
        return self._as_result(target, lambda: self._client.revert_memory(target.role, version,
                                                                          **self._where(target)))

    def diff_versions(self, target: Target, from_version: int, to_version: int) -> str:
        """Unified diff between two retained versions."""
        return self._client.diff_versions(target.role, from_version, to_version, **self._where(target))

    def get_transcript(self, target: Target, max_entries: int) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all); process-only rows included."""
        return self._client.get_transcript(target.role, max_entries, **self._where(target))

    def load_summary(self, target: Target) -> str | None:
        """The rolling summary, None if there is none."""
        return self._client.load_summary(target.role, **self._where(target))

    def clear_chat_history(self, target: Target) -> None:
        """Delete chat history, transcript and rolling summary; memory stays."""
        self._client.clear_chat_history(target.role, **self._where(target))

    def forget_player(self, scope: AgentMemoryScope) -> PlayerForgotten:
        """Erase every save in one scope (a player), and the engine's states of those conversations."""
        return self._client.forget_player(scope)

    def export_snapshot(self, scope: AgentMemoryScope, roles: Sequence[str] | None,
                        actors: Sequence[str]) -> ScopeSnapshot:
        """The named roles x actors of scope (roles None: every save of the scope; actors empty: all / no actor)."""
        return self._client.export_snapshot(scope, roles or (), actors)

    def import_snapshot(self, snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None) -> int:
        """Replace the data of the snapshot's identities; returns how many were imported."""
        return self._client.import_snapshot(snapshot, target_scope)

    def close(self) -> None:
        """Close the connections."""
        self._client.close()


def check_data_dir(data_dir: Path | None) -> Path:
    """--data-dir, which must name an existing directory (UsageError otherwise)."""
    if data_dir is None:
        raise UsageError("--data-dir is required (or --runtime URL to go through a running runtime)")
    if not data_dir.is_dir():
        raise UsageError("--data-dir must be an existing directory (the game's persistentDataPath)")
    return data_dir


def _runtime_token(args: argparse.Namespace) -> str:
    """--token-file, else $COREAI_RUNTIME_TOKEN, else <data-dir>/CoreAI/runtime/token."""
    if args.token_file is not None:
        path = args.token_file
    elif os.environ.get(TOKEN_ENV, "").strip():
        return check_token(os.environ[TOKEN_ENV].strip())
    elif args.data_dir is not None:
        path = default_token_file(args.data_dir)
    else:
        raise UsageError(f"--runtime needs a token: give --token-file, set {TOKEN_ENV}, or give --data-dir "
                         "(its CoreAI/runtime/token)")
    try:
        token = read_token_file(path)
    except (OSError, UnicodeDecodeError):
        # No path in the message: it may name the player's account.
        raise UsageError("the runtime token file cannot be read (is the runtime running with this data dir?)") \
            from None
    return check_token(token)


def _file_policy(args: argparse.Namespace) -> AgentMemoryPolicy:
    """The built-in role policy, with the role's size limit set to --max-memory-chars where it was given."""
    policy = AgentMemoryPolicy()
    max_memory_chars = getattr(args, "max_memory_chars", None)
    if max_memory_chars is not None:
        policy.set_max_memory_chars(args.role, max_memory_chars)
    return policy


@contextlib.contextmanager
def open_saves(args: argparse.Namespace) -> Iterator[Saves]:
    """The saves the command works on: the files under --data-dir, or the runtime at --runtime."""
    if args.runtime is not None:
        backend = Saves.connect(args.runtime, _runtime_token(args))
    else:
        backend = Saves.open_files(check_data_dir(args.data_dir), _file_policy(args))
    try:
        yield backend
    finally:
        backend.close()

