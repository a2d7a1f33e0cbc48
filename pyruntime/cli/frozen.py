"""Entry point of the frozen `coreai-runtime` executable (PyInstaller; built by tools/build_runtime.py).

A frozen executable has no `python -m`, yet the runtime starts its model child as
`sys.executable -m pyruntime.model.llama_server CONFIG` (sys.executable is this executable when frozen),
so this entry runs that child by the same command line; everything else is the ordinary CLI.
"""

from __future__ import annotations

import sys

MODEL_CHILD = ["-m", "pyruntime.model.llama_server"]


def main(argv: list[str] | None = None) -> int:
    """`-m pyruntime.model.llama_server CONFIG` runs the model child; anything else is `coreai-runtime ARGS`."""
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == MODEL_CHILD:
        from pyruntime.model.llama_server import main as model_child_main

        return model_child_main(args[2:])
    from pyruntime.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
