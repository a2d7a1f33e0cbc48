"""The saves CLI: inspect or fix one player's memory, history and snapshots, on disk or through a running runtime.

Subcommands `memory`, `history`, `export` and `import` work on the file stores under
`<--data-dir>/CoreAI/` (the game's persistentDataPath), or, with `--runtime URL`, through the
runtime that owns those files while the game runs (`grpc://HOST:PORT` or `http://HOST:PORT` =
Connect; token from `--token-file`, else $COREAI_RUNTIME_TOKEN, else `<data-dir>/CoreAI/runtime/token`).
Both ways print the same output. Results go to stdout (JSON where it is JSON); errors go to stderr
as one log line, never a traceback. Exit codes: 0 success, 1 the operation failed (an unreachable
runtime included), 2 bad input, a missing or refused runtime token included (nothing was written).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from google.protobuf import json_format

from pyruntime.client import (
    RuntimeCallError,
    RuntimeClient,
    RuntimeLimitExceededError,
    RuntimeMemoryUnreadableError,
    RuntimeNotFoundError,
    RuntimeUnavailableError,
    UnauthenticatedError,
    read_token_file,
)
from pyruntime.errors import CoreAIError, InvalidArgumentError, MemoryUnreadableError
from pyruntime.memory.actions import MEMORY_ACTIONS, MemoryToolResult
from pyruntime.memory.state import MemoryVersion
from pyruntime.memory.tool import MemoryTool
from pyruntime.memory.versions import diff_versions, list_versions, revert_memory
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc.auth import TOKEN_ENV, check_token, default_token_file
from pyruntime.scopes import AgentMemoryScope, normalize_role_id
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    LoadStatus,
    ScopedAgentMemoryStore,
    ScopeSnapshot,
    StoreBundle,
    TranscriptEntry,
    export_scope_snapshot,
    import_scope_snapshot,
    open_stores,
    validate_scope_snapshot,
)
from pyruntime.stores.fileio import atomic_write, read_bytes
from pyruntime.stores.snapshot import entry_to_proto

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

VERSION_ACTIONS = ("versions", "revert", "diff")
MAX_SNAPSHOT_FILE_BYTES = 512 * 1024 * 1024
"""Largest snapshot file `import` reads (an export of every save of a scope; larger ones are refused unread)."""


class UsageError(InvalidArgumentError):
    """Bad command-line input; reported with exit code 2 before anything is written."""


class RuntimeUnreachableError(CoreAIError):
    """--runtime names a runtime that does not answer (the game is not running, or another port)."""


# -- shared option groups ------------------------------------------------------------------


def _save_options(parser: argparse.ArgumentParser) -> None:
    """Where the saves are: --data-dir (the files), or --runtime URL with its token."""
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="the game's persistentDataPath (the runtime adds CoreAI/...); required without "
                             "--runtime, with it only where the token file is")
    parser.add_argument("--runtime", metavar="URL", default=None,
                        help="go through a running runtime instead of the files: grpc://127.0.0.1:13334 (gRPC) "
                             "or http://127.0.0.1:13335 (Connect)")
    parser.add_argument("--token-file", dest="token_file", type=Path, default=None,
                        help=f"the runtime's token (default: ${TOKEN_ENV}, else <data-dir>/CoreAI/runtime/token)")


def _target_options(parser: argparse.ArgumentParser, *, role: bool = True) -> None:
    """Where the saves are, the scope flags and (optionally) --role and --actor."""
    _save_options(parser)
    if role:
        parser.add_argument("--role", required=True, help="role id (trimmed; must not be blank)")
        parser.add_argument("--actor", default=None, help="named actor (NPC instance); 'local' = none")
    parser.add_argument("--tenant", default=None)
    parser.add_argument("--user", default=None)
    parser.add_argument("--session", default=None)
    parser.add_argument("--topic", default=None)


def _edit_options(parser: argparse.ArgumentParser) -> None:
    """The `memory` tool's arguments, as flags."""
    parser.add_argument("--content", default=None)
    parser.add_argument("--old-text", dest="old_text", default=None)
    parser.add_argument("--new-text", dest="new_text", default=None)
    parser.add_argument("--anchor", default=None)
    parser.add_argument("--line", type=int, default=None, help="insert: 1-based line number")
    parser.add_argument("--replace-all", dest="replace_all", action="store_true", default=None)
    parser.add_argument("--max-memory-chars", dest="max_memory_chars", type=int, default=None,
                        help="size limit of the document (default: the role's policy; 0 = unlimited); "
                             "files only: a runtime applies its own policy")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `memory`, `history`, `export` and `import` subcommands."""
    memory = subparsers.add_parser("memory", help="run a memory tool action or inspect versions of one save")
    actions = memory.add_subparsers(dest="memory_action", required=True, metavar="action")
    for action in MEMORY_ACTIONS:
        p = actions.add_parser(action, help=f"run the memory tool's {action} action; prints its result JSON")
        _target_options(p)
        _edit_options(p)
        p.set_defaults(handler=_guarded(_run_tool_action))
    p = actions.add_parser("versions", help="list retained versions, oldest first")
    _target_options(p)
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(handler=_guarded(_run_versions))
    p = actions.add_parser("revert", help="set the memory to version N (recorded as a new version)")
    p.add_argument("version", type=int)
    _target_options(p)
    p.set_defaults(handler=_guarded(_run_revert))
    p = actions.add_parser("diff", help="unified diff between two retained versions")
    p.add_argument("a", type=int)
    p.add_argument("b", type=int)
    _target_options(p)
    p.add_argument("--json", action="store_true", help="print {\"diff\": ...}")
    p.set_defaults(handler=_guarded(_run_diff))

    history = subparsers.add_parser("history", help="show or clear one save's chat history")
    history_actions = history.add_subparsers(dest="history_action", required=True, metavar="action")
    p = history_actions.add_parser("show", help="print the rolling summary and the newest history rows")
    _target_options(p)
    p.add_argument("--max", dest="max_entries", type=int, default=0, help="newest N rows (0 = all)")
    p.add_argument("--json", action="store_true", help="print proto3 JSON rows and the summary")
    p.set_defaults(handler=_guarded(_run_history_show))
    p = history_actions.add_parser("clear", help="clear chat history, transcript and rolling summary (memory stays)")
    _target_options(p)
    p.set_defaults(handler=_guarded(_run_history_clear))

    export = subparsers.add_parser("export", help="write a snapshot of one scope (proto3 JSON)")
    _target_options(export, role=False)
    export.add_argument("--out", required=True, type=Path, help="snapshot file to write")
    export.add_argument("--role", dest="roles", action="append", default=None,
                        help="role to export (repeatable; default: every role with saves in the scope)")
    export.add_argument("--actor", dest="actors", action="append", default=None,
                        help="named actor to export (repeatable; default: no actor with --role, else every actor)")
    export.set_defaults(handler=_guarded(_run_export))

    imp = subparsers.add_parser("import", help="import a snapshot, replacing the data of its identities")
    imp.add_argument("file", type=Path, help="snapshot file (proto3 JSON)")
    _save_options(imp)
    for part in ("tenant", "user", "session", "topic"):
        imp.add_argument(f"--into-{part}", dest=f"into_{part}", default=None,
                         help="import into this scope instead of the snapshot's own (any --into-* flag)")
    imp.set_defaults(handler=_guarded(_run_import))


# -- error handling ------------------------------------------------------------------------


def _error_name(exc: CoreAIError) -> str:
    """The core error's name, the same whether the core raised it here or a runtime answered with it."""
    for cls in type(exc).__mro__:
        if cls.__module__ == CoreAIError.__module__ and cls is not CoreAIError:
            return cls.__name__
    return exc.code.name if isinstance(exc, RuntimeCallError) else type(exc).__name__


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn every error into one stderr log line and an exit code; never a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except UnauthenticatedError:
            log.error("the runtime refused the token (missing or wrong): give --token-file, set %s, or use "
                      "the token file of the running runtime", TOKEN_ENV)
            return EXIT_USAGE
        except RuntimeUnreachableError as exc:
            log.error("%s", exc)
            return EXIT_FAILED
        except InvalidArgumentError as exc:
            log.error("invalid input: %s", exc)
            return EXIT_USAGE
        except CoreAIError as exc:
            # Runtime errors are written to name no key, role or content.
            log.error("%s: %s", _error_name(exc), exc)
            return EXIT_FAILED
        except OSError as exc:
            # The OS message may carry a path (a key stem); log only what failed.
            log.error("I/O error (%s, errno %s)", type(exc).__name__, exc.errno)
            return EXIT_FAILED
        except Exception as exc:  # the CLI promises one line, not a traceback
            log.error("unexpected %s", type(exc).__name__)
            log.debug("details", exc_info=True)
            return EXIT_FAILED

    run.__name__ = handler.__name__
    return run


# -- where the saves are: the files, or a running runtime -------------------------------------


@dataclass(frozen=True)
class Target:
    """One save: the (trimmed) role, the scope and the actor (None = none)."""

    role: str
    scope: AgentMemoryScope
    actor: str | None


class SaveBackend(Protocol):
    """What the commands need from the saves; the files and a running runtime give the same answers."""

    def apply_memory_tool(self, target: Target, arguments: Mapping[str, Any],
                          max_memory_chars: int | None) -> MemoryToolResult:
        """One `memory` call (None: the role policy's limit)."""
        ...

    def list_versions(self, target: Target) -> list[MemoryVersion]:
        """Retained versions, oldest first."""
        ...

    def revert_memory(self, target: Target, version: int) -> MemoryToolResult:
        """Set the memory to a retained version (recorded as a new version)."""
        ...

    def diff_versions(self, target: Target, from_version: int, to_version: int) -> str:
        """Unified diff between two retained versions."""
        ...

    def get_transcript(self, target: Target, max_entries: int) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all)."""
        ...

    def load_summary(self, target: Target) -> str | None:
        """The rolling summary, None if there is none."""
        ...

    def clear_chat_history(self, target: Target) -> None:
        """Delete chat history, transcript and rolling summary; memory stays."""
        ...

    def export_snapshot(self, scope: AgentMemoryScope, roles: Sequence[str] | None,
                        actors: Sequence[str]) -> ScopeSnapshot:
        """The named roles x actors of scope (roles None: every save of the scope; actors empty: all / no actor)."""
        ...

    def import_snapshot(self, snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None) -> int:
        """Replace the data of the snapshot's identities; returns how many were imported."""
        ...

    def close(self) -> None:
        """Release what the backend holds."""
        ...


class FileSaves:
    """The file stores under <data-dir>/CoreAI, opened by this process (with the built-in role policy)."""

    def __init__(self, bundle: StoreBundle) -> None:
        self._bundle = bundle
        self._policy = AgentMemoryPolicy()

    def _view(self, target: Target) -> ScopedAgentMemoryStore:
        return self._bundle.scoped(target.scope, target.actor)

    def _key(self, target: Target) -> str:
        return self._view(target).key(target.role)

    def apply_memory_tool(self, target: Target, arguments: Mapping[str, Any],
                          max_memory_chars: int | None) -> MemoryToolResult:
        """One `memory` call (None: the role policy's limit)."""
        if max_memory_chars is None:
            max_memory_chars = self._policy.get(target.role).effective_max_memory_chars
        return MemoryTool(self._bundle.memory, self._key(target), max_memory_chars=max_memory_chars).execute(
            arguments)

    def list_versions(self, target: Target) -> list[MemoryVersion]:
        """Retained versions, oldest first."""
        return list_versions(self._bundle.memory, self._key(target))

    def revert_memory(self, target: Target, version: int) -> MemoryToolResult:
        """Set the memory to a retained version (recorded as a new version)."""
        return revert_memory(self._bundle.memory, self._key(target), version)

    def diff_versions(self, target: Target, from_version: int, to_version: int) -> str:
        """Unified diff between two retained versions."""
        return diff_versions(self._bundle.memory, self._key(target), from_version, to_version)

    def get_transcript(self, target: Target, max_entries: int) -> list[TranscriptEntry]:
        """Oldest first, the newest max_entries (0 = all)."""
        return self._view(target).get_transcript(target.role, max_entries)

    def load_summary(self, target: Target) -> str | None:
        """The rolling summary, None if there is none."""
        return self._view(target).load_summary(target.role)

    def clear_chat_history(self, target: Target) -> None:
        """Delete chat history, transcript and rolling summary; memory stays."""
        self._view(target).clear_chat_history(target.role)

    def export_snapshot(self, scope: AgentMemoryScope, roles: Sequence[str] | None,
                        actors: Sequence[str]) -> ScopeSnapshot:
        """The named roles x actors of scope (roles None: every save of the scope; actors empty: all / no actor)."""
        candidates = [c.role_id for c in self._policy.roles()]
        return export_scope_snapshot(self._bundle, scope, roles, list(actors) or None, candidate_roles=candidates)

    def import_snapshot(self, snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None) -> int:
        """Replace the data of the snapshot's identities; returns how many were imported."""
        return import_scope_snapshot(self._bundle, snapshot, target_scope)

    def close(self) -> None:
        """Nothing to release: every store call opens and closes its own files."""


# The runtime answers these refusals of a memory call with a status where the tool itself returns a
# failed result; RuntimeSaves turns them back into that result so both ways print the same JSON.
_REFUSALS_AS_STATUS = (RuntimeMemoryUnreadableError, RuntimeLimitExceededError, RuntimeNotFoundError,
                       RuntimeUnavailableError)


class RuntimeSaves:
    """A running runtime, through `RuntimeClient`; the runtime applies its own role policy and locks."""

    def __init__(self, client: RuntimeClient) -> None:
        self._client = client

    @classmethod
    def connect(cls, url: str, token: str) -> RuntimeSaves:
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

    def apply_memory_tool(self, target: Target, arguments: Mapping[str, Any],
                          max_memory_chars: int | None) -> MemoryToolResult:
        """One `memory` call under the runtime's policy (max_memory_chars must be None)."""
        if max_memory_chars is not None:
            raise UsageError("--max-memory-chars applies to the files only; a runtime applies its role policy")
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


def _check_data_dir(data_dir: Path | None) -> Path:
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


@contextlib.contextmanager
def _open_backend(args: argparse.Namespace) -> Iterator[SaveBackend]:
    """The saves the command works on: the files under --data-dir, or the runtime at --runtime."""
    backend: SaveBackend
    if args.runtime is not None:
        backend = RuntimeSaves.connect(args.runtime, _runtime_token(args))
    else:
        backend = FileSaves(open_stores(AgentMemoryPersistenceMode.PERSISTENT, _check_data_dir(args.data_dir)))
    try:
        yield backend
    finally:
        backend.close()


def _scope(tenant: str | None, user: str | None, session: str | None, topic: str | None) -> AgentMemoryScope:
    return AgentMemoryScope(tenant, user, session, topic)


def _target(args: argparse.Namespace) -> Target:
    # Validate everything first: bad input must create nothing on disk.
    role = normalize_role_id(args.role)
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    if args.runtime is None:
        _check_data_dir(args.data_dir)
    return Target(role, scope, args.actor)


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))


# -- memory ---------------------------------------------------------------------------------


def _tool_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The `memory` tool's argument object: the action plus every flag that was given."""
    arguments: dict[str, Any] = {"action": args.memory_action}
    for name in ("content", "old_text", "new_text", "anchor", "line", "replace_all"):
        value = getattr(args, name)
        if value is not None:
            arguments[name] = value
    return arguments


def _run_tool_action(args: argparse.Namespace) -> int:
    if args.max_memory_chars is not None and args.max_memory_chars < 0:
        raise UsageError("--max-memory-chars must be >= 0 (0 = unlimited)")
    if args.max_memory_chars is not None and args.runtime is not None:
        raise UsageError("--max-memory-chars applies to the files only; a runtime applies its role policy")
    target = _target(args)
    with _open_backend(args) as saves:
        result = saves.apply_memory_tool(target, _tool_arguments(args), args.max_memory_chars)
    print(result.to_json())
    return EXIT_OK if result.success else EXIT_FAILED


def _version_dict(version: MemoryVersion) -> dict[str, Any]:
    """A version in the file format's keys (contract §3.1)."""
    return {
        "Version": version.version,
        "Timestamp": version.timestamp,
        "Action": version.action,
        "ContentAfter": version.content_after,
        "Note": version.note,
    }


def _run_versions(args: argparse.Namespace) -> int:
    target = _target(args)
    with _open_backend(args) as saves:
        versions = saves.list_versions(target)
    if args.json:
        _print_json([_version_dict(v) for v in versions])
    else:
        for v in versions:
            print(f"{v.version}\t{v.timestamp}\t{v.action}\t{v.note}")
    return EXIT_OK


def _run_revert(args: argparse.Namespace) -> int:
    target = _target(args)
    with _open_backend(args) as saves:
        result = saves.revert_memory(target, args.version)
    print(result.to_json())
    return EXIT_OK if result.success else EXIT_FAILED


def _run_diff(args: argparse.Namespace) -> int:
    target = _target(args)
    with _open_backend(args) as saves:
        diff = saves.diff_versions(target, args.a, args.b)
    if args.json:
        _print_json({"diff": diff})
    else:
        sys.stdout.write(diff if not diff or diff.endswith("\n") else diff + "\n")
    return EXIT_OK


# -- history --------------------------------------------------------------------------------


def _run_history_show(args: argparse.Namespace) -> int:
    if args.max_entries < 0:
        raise UsageError("--max must be >= 0 (0 = all)")
    target = _target(args)
    with _open_backend(args) as saves:
        rows = saves.get_transcript(target, args.max_entries)
        summary = saves.load_summary(target)
    if args.json:
        _print_json({"summary": summary, "history": [json_format.MessageToDict(entry_to_proto(r)) for r in rows]})
        return EXIT_OK
    if summary:
        print("## Conversation Summary")
        print(summary)
        print("## History")
    for row in rows:
        # One row per line: newlines inside the content are escaped.
        content = row.content.replace("\\", "\\\\").replace("\n", "\\n")
        print(f"{row.timestamp}\t{row.kind.name.lower()}\t{row.name}\t{content}")
    return EXIT_OK


def _run_history_clear(args: argparse.Namespace) -> int:
    target = _target(args)
    with _open_backend(args) as saves:
        try:
            rows = len(saves.get_transcript(target, 0))
        except MemoryUnreadableError:
            rows = 0  # a history that cannot be read (a link, a FIFO): clearing is how it is fixed
        try:
            had_summary = saves.load_summary(target) is not None
        except MemoryUnreadableError:
            had_summary = True  # clearing is how an unreadable summary is fixed
        saves.clear_chat_history(target)  # chat history, transcript and the rolling summary
    _print_json({"Success": True, "ClearedRows": rows, "SummaryCleared": had_summary})
    return EXIT_OK


# -- export / import ------------------------------------------------------------------------


def _run_export(args: argparse.Namespace) -> int:
    roles = [normalize_role_id(r) for r in args.roles] if args.roles is not None else None
    if not args.out.parent.is_dir():
        raise UsageError("--out must be in an existing directory")
    if args.out.is_dir():
        raise UsageError("--out must be a file, not a directory")
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    if args.runtime is None:
        _check_data_dir(args.data_dir)
    with _open_backend(args) as saves:
        snapshot = saves.export_snapshot(scope, roles, args.actors or [])
    # Atomic: a reader (or a crash) never leaves half a snapshot behind.
    atomic_write(args.out, (snapshot.to_json() + "\n").encode("utf-8"))
    _print_json({"Success": True, "RolesExported": len(snapshot.roles)})
    return EXIT_OK


def _run_import(args: argparse.Namespace) -> int:
    if args.runtime is None:
        _check_data_dir(args.data_dir)
    # Links the user made are followed; a FIFO or device is never opened, a huge file never read whole.
    try:
        data = read_bytes(Path(os.path.realpath(args.file)), limit=MAX_SNAPSHOT_FILE_BYTES, what="snapshot file")
    except MemoryUnreadableError as exc:
        raise UsageError(str(exc)) from None
    if data is None:
        raise UsageError("the snapshot file does not exist")
    # Parse and validate before opening the saves: a bad file writes nothing.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"the snapshot file is not valid UTF-8 (byte {exc.start})") from None
    snapshot = ScopeSnapshot.from_json(text)
    into = (args.into_tenant, args.into_user, args.into_session, args.into_topic)
    target = _scope(*into) if any(v is not None for v in into) else None
    validate_scope_snapshot(snapshot, target)
    with _open_backend(args) as saves:
        imported = saves.import_snapshot(snapshot, target)
    _print_json({"Success": True, "RolesImported": imported})
    return EXIT_OK
