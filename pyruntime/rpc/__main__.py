"""Deprecated: `python -m pyruntime.rpc ARGS` is `coreai-runtime serve --no-model ARGS` (or with ARGS' --llm-url)."""

import sys

from pyruntime.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *([] if "--llm-url" in sys.argv else ["--no-model"]), *sys.argv[1:]]))
