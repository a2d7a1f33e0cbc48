"""`coreai-runtime`: the command line of the runtime.

Each subcommand lives in its own module with a `register(subparsers)` function that adds its
parser and sets `handler` (a callable taking the parsed args and returning the exit code).

Only the module of the command being run is imported: the saves commands (`memory`, `history`,
`export`, `import`, `migrate`) come with the base install, while `serve`, `chat` and `models` need the
hosted runtime's extra; without it they exit 2 saying what to install, and the saves commands still work.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from pyruntime import __version__

# subcommand -> (the module that registers it, the extra its imports need; None = the base install)
COMMANDS: dict[str, tuple[str, str | None]] = {
    "serve": ("pyruntime.cli.serve", "serve"),
    "chat": ("pyruntime.cli.chat", "serve"),
    "memory": ("pyruntime.cli.memory", None),
    "history": ("pyruntime.cli.memory", None),
    "export": ("pyruntime.cli.memory", None),
    "import": ("pyruntime.cli.memory", None),
    "migrate": ("pyruntime.cli.migrate", None),
    "models": ("pyruntime.cli.models", "serve"),  # downloads with httpx
}
EXIT_USAGE = 2


class MissingExtraError(Exception):
    """A command's module needs a package of an extra that is not installed."""

    def __init__(self, command: str, extra: str | None, missing: str) -> None:
        install = f"pip install 'coreai-runtime[{extra}]'" if extra else "pip install coreai-runtime"
        super().__init__(f"coreai-runtime {command} needs packages that are not installed "
                         f"(missing module: {missing}): {install}")


def _import_command(command: str) -> object:
    """The module of a command; MissingExtraError when a third-party package it imports is not installed."""
    module_name, extra = COMMANDS[command]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in ("pyruntime", "coreai"):
            raise  # our own code is broken: not an install problem
        raise MissingExtraError(command, extra, missing) from exc


def _register_unavailable(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], command: str,
                          error: MissingExtraError) -> None:
    """A command whose extra is missing, in the full parser: listed with what to install (main refuses it)."""
    p = subparsers.add_parser(command, help=f"(not installed) {error}", add_help=False)
    p.add_argument("args", nargs="*")

    def unavailable(args: argparse.Namespace) -> int:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE

    p.set_defaults(handler=unavailable)


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser with the given subcommands' modules registered (default: every subcommand)."""
    parser = argparse.ArgumentParser(prog="coreai-runtime", description="Agent-memory runtime for Unity games.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"coreai-runtime {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    wanted = list(COMMANDS) if commands is None else list(commands)
    registered: set[str] = set()
    for command in wanted:
        if command in registered:
            continue
        try:
            module = _import_command(command)
        except MissingExtraError as exc:
            _register_unavailable(subparsers, command, exc)
            registered.add(command)
            continue
        module.register(subparsers)  # type: ignore[attr-defined]
        same_module = [c for c, (name, _) in COMMANDS.items() if name == COMMANDS[command][0]]
        registered.update(same_module)
    return parser


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand argv runs, if it names one before any other argument."""
    for arg in argv:
        if arg in ("-v", "--verbose"):
            continue
        return arg if arg in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `coreai-runtime` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _requested_command(argv)
    if command is not None:
        try:
            _import_command(command)
        except MissingExtraError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    parser = build_parser([command] if command is not None else None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
