"""`coreai-runtime migrate --from SRC --to DST`: move every save between a data folder and a PostgreSQL database.

SRC and DST are each a data folder (the game's persistentDataPath; saves under CoreAI/) or a
`postgresql://` URL. Everything is exported before anything is imported, and the target must hold
no saves (`pyruntime.stores.migration`). Prints `{"scopes": N, "roles": M}`; progress goes to stderr.
Exit codes: 0 moved, 1 failed (unreachable database, unattributable saves), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pyruntime.cli.memory import EXIT_OK, UsageError, _guarded
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.migration import migrate_saves
from pyruntime.stores.postgres import is_database_url

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `migrate` subcommand."""
    p = subparsers.add_parser(
        "migrate", help="move every save between a data folder and a PostgreSQL database (either way)",
        description="Copy every save (memory, history, summaries, identity index) from --from into an empty --to.")
    p.add_argument("--from", dest="source", required=True, metavar="DIR_OR_URL",
                   help="a data folder (the game's persistentDataPath) or a postgresql:// URL")
    p.add_argument("--to", dest="target", required=True, metavar="DIR_OR_URL",
                   help="an empty data folder or database: a folder path or a postgresql:// URL")
    p.set_defaults(handler=_guarded(run))


def _open(where: str, *, source: bool) -> StoreBundle:
    if is_database_url(where):
        return open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=where)
    folder = Path(where)
    if source and not folder.is_dir():
        raise UsageError("--from must be an existing data folder or a postgresql:// URL")
    if folder.exists() and not folder.is_dir():
        raise UsageError("--to exists but is not a folder")
    return open_stores(AgentMemoryPersistenceMode.PERSISTENT, folder)


def run(args: argparse.Namespace) -> int:
    """Handler of `migrate`."""
    if args.source == args.target or (not is_database_url(args.source) and not is_database_url(args.target)
                                      and Path(args.source).resolve() == Path(args.target).resolve()):
        raise UsageError("--from and --to must be different stores")
    source = _open(args.source, source=True)
    try:
        target = _open(args.target, source=False)
        try:
            result = migrate_saves(source, target, progress=lambda done, total: log.info(
                "migrated %d/%d scope(s)", done, total) if done == total or done % 100 == 0 else None)
        finally:
            target.close()
    finally:
        source.close()
    print(json.dumps({"scopes": result.scopes, "roles": result.roles}), flush=True)
    return EXIT_OK
