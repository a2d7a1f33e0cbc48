"""Entry point of the frozen `coreai-runtime` executable (PyInstaller; built by tools/build_runtime.py).

A frozen executable has no `python -m`, yet on macOS the runtime starts its model server under a small
keeper process as `sys.executable -m pyruntime.model.hosting.keeper ...` (model/hosting/lifeline.py; sys.executable is
this executable when frozen), so this entry runs that by the same command line; everything else is the
ordinary CLI. The model server itself is llama.cpp's llama-server binary, shipped next to this one.
"""

from __future__ import annotations

import sys

KEEPER = ["-m", "pyruntime.model.hosting.keeper"]


def main(argv: list[str] | None = None) -> int:
    """`-m pyruntime.model.hosting.keeper ...` runs the keeper; anything else is `coreai-runtime ARGS`."""
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == KEEPER:
        from pyruntime.model.hosting.keeper import main as keeper_main

        return keeper_main(args[2:])
    from pyruntime.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
