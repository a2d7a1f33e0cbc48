"""Deprecated: `python -m pyruntime.rpc ARGS` is `coreai-runtime serve --no-model ARGS` (serve ARGS with --llm-url)."""

import sys

from pyruntime.cli import main

if __name__ == "__main__":
    print("python -m pyruntime.rpc is deprecated: use coreai-runtime serve (--no-model)", file=sys.stderr)
    sys.exit(main(["serve", *([] if "--llm-url" in sys.argv else ["--no-model"]), *sys.argv[1:]]))
