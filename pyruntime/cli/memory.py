"""The saves CLI: inspect or fix one player's memory, history and snapshots on disk.

Subcommands `memory`, `history`, `export` and `import` work on the file stores under
`<--data-dir>/CoreAI/` (the game's persistentDataPath). Results go to stdout (JSON where it is
JSON); errors go to stderr as one log line, never a traceback. Exit codes: 0 success, 1 the
operation failed, 2 bad input (nothing was written).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.memory.actions import MEMORY_ACTIONS
from pyruntime.memory.state import MemoryVersion
from pyruntime.memory.tool import MemoryTool
from pyruntime.memory.versions import diff_versions, list_versions, revert_memory
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope, normalize_role_id
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    ScopedAgentMemoryStore,
    ScopeSnapshot,
    StoreBundle,
    export_scope_snapshot,
    import_scope_snapshot,
    open_stores,
    validate_scope_snapshot,
)
from pyruntime.stores.fileio import atomic_write
from pyruntime.stores.snapshot import entry_to_proto

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

VERSION_ACTIONS = ("versions", "revert", "diff")


class UsageError(InvalidArgumentError):
    """Bad command-line input; reported with exit code 2 before anything is written."""


# -- shared option groups ------------------------------------------------------------------


def _target_options(parser: argparse.ArgumentParser, *, role: bool = True) -> None:
    """--data-dir, the scope flags and (optionally) --role and --actor."""
    parser.add_argument("--data-dir", required=True, type=Path,
                        help="the game's persistentDataPath (the runtime adds CoreAI/...)")
    # --runtime URL (talk to a running runtime instead of the files) is added by a later issue;
    # it plugs in where `_open_bundle` opens the stores.
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
                        help="size limit of the document (default: the role's policy; 0 = unlimited)")


def register(subparsers: argparse._SubParsersAction) -> None:
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
                        help="role to export (repeatable; default: every role the policy knows)")
    export.add_argument("--actor", dest="actors", action="append", default=None,
                        help="named actor to export (repeatable; default: no actor)")
    export.set_defaults(handler=_guarded(_run_export))

    imp = subparsers.add_parser("import", help="import a snapshot, replacing the data of its identities")
    imp.add_argument("file", type=Path, help="snapshot file (proto3 JSON)")
    imp.add_argument("--data-dir", required=True, type=Path,
                     help="the game's persistentDataPath (the runtime adds CoreAI/...)")
    for part in ("tenant", "user", "session", "topic"):
        imp.add_argument(f"--into-{part}", dest=f"into_{part}", default=None,
                         help="import into this scope instead of the snapshot's own (any --into-* flag)")
    imp.set_defaults(handler=_guarded(_run_import))


# -- error handling ------------------------------------------------------------------------


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn every error into one stderr log line and an exit code; never a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except InvalidArgumentError as exc:
            log.error("invalid input: %s", exc)
            return EXIT_USAGE
        except CoreAIError as exc:
            # Runtime errors are written to name no key, role or content.
            log.error("%s: %s", type(exc).__name__, exc)
            return EXIT_FAILED
        except OSError as exc:
            # The OS message may carry a path (a key stem); log only what failed.
            log.error("I/O error (%s, errno %s)", type(exc).__name__, exc.errno)
            return EXIT_FAILED
        except Exception as exc:  # noqa: BLE001 - the CLI promises one line, not a traceback
            log.error("unexpected %s", type(exc).__name__)
            log.debug("details", exc_info=True)
            return EXIT_FAILED

    run.__name__ = handler.__name__
    return run


# -- opening the save -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """What one command works on: the opened stores, the scope, the actor and the role."""

    bundle: StoreBundle
    scope: AgentMemoryScope
    actor: str | None
    role: str

    @property
    def view(self) -> ScopedAgentMemoryStore:
        """The scoped store of this scope and actor."""
        return self.bundle.scoped(self.scope, self.actor)

    @property
    def key(self) -> str:
        """The storage key of (scope, actor, role)."""
        return self.view.key(self.role)


def _scope(tenant: str | None, user: str | None, session: str | None, topic: str | None) -> AgentMemoryScope:
    return AgentMemoryScope(tenant, user, session, topic)


def _check_data_dir(data_dir: Path) -> Path:
    if not data_dir.is_dir():
        raise UsageError("--data-dir must be an existing directory (the game's persistentDataPath)")
    return data_dir


def _open_bundle(data_dir: Path) -> StoreBundle:
    """The file stores under data_dir/CoreAI (the one place a future --runtime would switch)."""
    return open_stores(AgentMemoryPersistenceMode.PERSISTENT, _check_data_dir(data_dir))


def _open_target(args: argparse.Namespace) -> _Target:
    # Validate everything first: bad input must create nothing on disk.
    role = normalize_role_id(args.role)
    _check_data_dir(args.data_dir)
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    return _Target(_open_bundle(args.data_dir), scope, args.actor, role)


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
    target = _open_target(args)
    max_chars = args.max_memory_chars
    if max_chars is None:
        max_chars = AgentMemoryPolicy().get(target.role).effective_max_memory_chars
    result = MemoryTool(target.bundle.memory, target.key, max_memory_chars=max_chars).execute(_tool_arguments(args))
    print(result.to_json())
    return EXIT_OK if result.success else EXIT_FAILED


def _version_dict(version: MemoryVersion) -> dict[str, Any]:
    """A version in the file format's keys (spec 3.1)."""
    return {
        "Version": version.version,
        "Timestamp": version.timestamp,
        "Action": version.action,
        "ContentAfter": version.content_after,
        "Note": version.note,
    }


def _run_versions(args: argparse.Namespace) -> int:
    target = _open_target(args)
    versions = list_versions(target.bundle.memory, target.key)
    if args.json:
        _print_json([_version_dict(v) for v in versions])
    else:
        for v in versions:
            print(f"{v.version}\t{v.timestamp}\t{v.action}\t{v.note}")
    return EXIT_OK


def _run_revert(args: argparse.Namespace) -> int:
    target = _open_target(args)
    result = revert_memory(target.bundle.memory, target.key, args.version)
    print(result.to_json())
    return EXIT_OK if result.success else EXIT_FAILED


def _run_diff(args: argparse.Namespace) -> int:
    target = _open_target(args)
    diff = diff_versions(target.bundle.memory, target.key, args.a, args.b)
    if args.json:
        _print_json({"diff": diff})
    else:
        sys.stdout.write(diff if not diff or diff.endswith("\n") else diff + "\n")
    return EXIT_OK


# -- history --------------------------------------------------------------------------------


def _run_history_show(args: argparse.Namespace) -> int:
    if args.max_entries < 0:
        raise UsageError("--max must be >= 0 (0 = all)")
    target = _open_target(args)
    view = target.view
    rows = view.get_transcript(target.role, args.max_entries)
    summary = view.load_summary(target.role)
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
    target = _open_target(args)
    view = target.view
    rows = len(view.get_transcript(target.role))
    had_summary = view.load_summary(target.role) is not None
    view.clear_chat_history(target.role)  # chat history, transcript and the rolling summary
    _print_json({"Success": True, "ClearedRows": rows, "SummaryCleared": had_summary})
    return EXIT_OK


# -- export / import ------------------------------------------------------------------------


def _run_export(args: argparse.Namespace) -> int:
    roles = args.roles if args.roles is not None else [c.role_id for c in AgentMemoryPolicy().roles()]
    roles = [normalize_role_id(r) for r in roles]
    if not args.out.parent.is_dir():
        raise UsageError("--out must be in an existing directory")
    if args.out.is_dir():
        raise UsageError("--out must be a file, not a directory")
    bundle = _open_bundle(args.data_dir)
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    snapshot = export_scope_snapshot(bundle, scope, roles, args.actors if args.actors else (None,))
    # Atomic: a reader (or a crash) never leaves half a snapshot behind.
    atomic_write(args.out, (snapshot.to_json() + "\n").encode("utf-8"))
    _print_json({"Success": True, "RolesExported": len(snapshot.roles)})
    return EXIT_OK


def _run_import(args: argparse.Namespace) -> int:
    _check_data_dir(args.data_dir)
    if not args.file.is_file():
        raise UsageError("the snapshot file does not exist")
    # Parse and validate before opening the stores: a bad file writes nothing.
    snapshot = ScopeSnapshot.from_json(args.file.read_text(encoding="utf-8"))
    into = (args.into_tenant, args.into_user, args.into_session, args.into_topic)
    target = _scope(*into) if any(v is not None for v in into) else None
    validate_scope_snapshot(snapshot, target)
    imported = import_scope_snapshot(_open_bundle(args.data_dir), snapshot, target)
    _print_json({"Success": True, "RolesImported": imported})
    return EXIT_OK

