"""`coreai-runtime`: the command line of the runtime.

Each subcommand lives in its own module with a `register(subparsers)` function that adds its
parser and sets `handler` (a callable taking the parsed args and returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from pyruntime import __version__

# Modules that contribute subcommands; a module that does not exist yet is skipped.
COMMAND_MODULES = (
    "pyruntime.cli.memory",
    "pyruntime.cli.serve",
    "pyruntime.cli.chat",
    "pyruntime.cli.migrate",
    "pyruntime.cli.models",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(prog="coreai-runtime", description="Agent-memory runtime for Unity games.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"coreai-runtime {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `coreai-runtime` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
