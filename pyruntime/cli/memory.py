"""The saves CLI: inspect or fix one player's memory, history and snapshots, on disk or through a running runtime.

Subcommands `memory`, `history`, `export` and `import` work on the file stores under
`<--data-dir>/CoreAI/` (the game's persistentDataPath), or, with `--runtime URL`, through the
runtime that owns those files while the game runs (`grpc://HOST:PORT` or `http://HOST:PORT` =
Connect; token from `--token-file`, else $COREAI_RUNTIME_TOKEN, else `<data-dir>/CoreAI/runtime/token`).
Both ways run the same `MemoryStoreService` (the files over `pyruntime.rpc.in_process`, no sockets)
and print the same output. Results go to stdout (JSON where it is JSON); errors go to stderr
as one log line, never a traceback. Exit codes: 0 success, 1 the operation failed (an unreachable
runtime included), 2 bad input, a missing or refused runtime token included (nothing was written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from pyruntime.cli.guard import EXIT_FAILED, EXIT_OK, UsageError, guarded
from pyruntime.cli.saves import Target, check_data_dir, open_saves
from pyruntime.errors import MemoryUnreadableError
from pyruntime.memory.actions import MEMORY_ACTIONS
from pyruntime.memory.state import MemoryVersion
from pyruntime.net.auth import TOKEN_ENV
from pyruntime.scopes import AgentMemoryScope, normalize_role_id
from pyruntime.stores import ScopeSnapshot, validate_scope_snapshot
from pyruntime.stores.fileio import atomic_write, read_bytes
from pyruntime.stores.snapshot import entry_to_proto

VERSION_ACTIONS = ("versions", "revert", "diff")
MAX_SNAPSHOT_FILE_BYTES = 512 * 1024 * 1024
"""Largest snapshot file `import` reads (an export of every save of a scope; larger ones are refused unread)."""


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
        p.set_defaults(handler=guarded(_run_tool_action))
    p = actions.add_parser("versions", help="list retained versions, oldest first")
    _target_options(p)
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(handler=guarded(_run_versions))
    p = actions.add_parser("revert", help="set the memory to version N (recorded as a new version)")
    p.add_argument("version", type=int)
    _target_options(p)
    p.set_defaults(handler=guarded(_run_revert))
    p = actions.add_parser("diff", help="unified diff between two retained versions")
    p.add_argument("a", type=int)
    p.add_argument("b", type=int)
    _target_options(p)
    p.add_argument("--json", action="store_true", help="print {\"diff\": ...}")
    p.set_defaults(handler=guarded(_run_diff))

    history = subparsers.add_parser("history", help="show or clear one save's chat history")
    history_actions = history.add_subparsers(dest="history_action", required=True, metavar="action")
    p = history_actions.add_parser("show", help="print the rolling summary and the newest history rows")
    _target_options(p)
    p.add_argument("--max", dest="max_entries", type=int, default=0, help="newest N rows (0 = all)")
    p.add_argument("--json", action="store_true", help="print proto3 JSON rows and the summary")
    p.set_defaults(handler=guarded(_run_history_show))
    p = history_actions.add_parser("clear", help="clear chat history, transcript and rolling summary (memory stays)")
    _target_options(p)
    p.set_defaults(handler=guarded(_run_history_clear))

    export = subparsers.add_parser("export", help="write a snapshot of one scope (proto3 JSON)")
    _target_options(export, role=False)
    export.add_argument("--out", required=True, type=Path, help="snapshot file to write")
    export.add_argument("--role", dest="roles", action="append", default=None,
                        help="role to export (repeatable; default: every role with saves in the scope)")
    export.add_argument("--actor", dest="actors", action="append", default=None,
                        help="named actor to export (repeatable; default: no actor with --role, else every actor)")
    export.set_defaults(handler=guarded(_run_export))

    forget = subparsers.add_parser(
        "forget", help="erase everything of one player: every save of the user (all sessions, topics, roles, "
                       "actors; --session/--topic narrow it) and what the engine keeps of those conversations")
    _target_options(forget, role=False)
    forget.set_defaults(handler=guarded(_run_forget))

    imp = subparsers.add_parser("import", help="import a snapshot, replacing the data of its identities")
    imp.add_argument("file", type=Path, help="snapshot file (proto3 JSON)")
    _save_options(imp)
    for part in ("tenant", "user", "session", "topic"):
        imp.add_argument(f"--into-{part}", dest=f"into_{part}", default=None,
                         help="import into this scope instead of the snapshot's own (any --into-* flag)")
    imp.set_defaults(handler=guarded(_run_import))



def _scope(tenant: str | None, user: str | None, session: str | None, topic: str | None) -> AgentMemoryScope:
    return AgentMemoryScope(tenant, user, session, topic)


def _target(args: argparse.Namespace) -> Target:
    # Validate everything first: bad input must create nothing on disk.
    role = normalize_role_id(args.role)
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    if args.runtime is None:
        check_data_dir(args.data_dir)
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
    with open_saves(args) as saves:
        result = saves.apply_memory_tool(target, _tool_arguments(args))
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
    with open_saves(args) as saves:
        versions = saves.list_versions(target)
    if args.json:
        _print_json([_version_dict(v) for v in versions])
    else:
        for v in versions:
            print(f"{v.version}\t{v.timestamp}\t{v.action}\t{v.note}")
    return EXIT_OK


def _run_revert(args: argparse.Namespace) -> int:
    target = _target(args)
    with open_saves(args) as saves:
        result = saves.revert_memory(target, args.version)
    print(result.to_json())
    return EXIT_OK if result.success else EXIT_FAILED


def _run_diff(args: argparse.Namespace) -> int:
    target = _target(args)
    with open_saves(args) as saves:
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
    with open_saves(args) as saves:
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
    with open_saves(args) as saves:
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


def _run_forget(args: argparse.Namespace) -> int:
    scope = _scope(args.tenant, args.user, args.session, args.topic)
    if scope.is_empty:
        raise UsageError("name the player: --user (with --tenant), or the --session / --topic to erase")
    if args.runtime is None:
        check_data_dir(args.data_dir)
    with open_saves(args) as saves:
        forgotten = saves.forget_player(scope)
    _print_json({"Success": True, "SavesErased": forgotten.saves_erased,
                 "UnattributedSaves": forgotten.unattributed_saves})
    if forgotten.unattributed_saves:
        print(f"warning: {forgotten.unattributed_saves} save(s) cannot be attributed to a player (written before the "
              "identity index existed) and were left alone: they may be this player's; erase them by naming their "
              "role (ClearMemory, history clear)", file=sys.stderr)
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
        check_data_dir(args.data_dir)
    with open_saves(args) as saves:
        snapshot = saves.export_snapshot(scope, roles, args.actors or [])
    # Atomic: a reader (or a crash) never leaves half a snapshot behind.
    atomic_write(args.out, (snapshot.to_json() + "\n").encode("utf-8"))
    _print_json({"Success": True, "RolesExported": len(snapshot.roles)})
    return EXIT_OK


def _run_import(args: argparse.Namespace) -> int:
    if args.runtime is None:
        check_data_dir(args.data_dir)
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
    with open_saves(args) as saves:
        imported = saves.import_snapshot(snapshot, target)
    _print_json({"Success": True, "RolesImported": imported})
    return EXIT_OK
