"""`serve` with the launcher's flags, for as long as `coreai-runtime serve` does not start the RPC servers.

Composes the real parts the way `serve` will: the hosted model (`LlamaServerProcess`, a llama.cpp child)
plus the real gRPC/Connect servers with file stores (`python -m pyruntime.rpc`), until SIGTERM. The
tests use `python -m pyruntime.cli serve` itself as soon as its `--help` lists `--connect-port`.

Usage: python serve_adapter.py serve --data-dir D --host H --port P --connect-port C --grpc-port G [--model M] [--ctx N]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyruntime.errors import CoreAIError  # noqa: E402
from pyruntime.model.hosting import LlamaServerProcess, hosted_model_config  # noqa: E402
from pyruntime.rpc.__main__ import main as rpc_main  # noqa: E402


def main(argv: list[str]) -> int:
    """Host the model, serve the RPC APIs until signalled, stop the model."""
    parser = argparse.ArgumentParser(prog="serve_adapter")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connect-port", required=True)
    parser.add_argument("--grpc-port", required=True)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--ctx", type=int)
    parser.add_argument("--session-only", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    model = None
    try:
        if args.model is not None:
            model = LlamaServerProcess(hosted_model_config(args.model, host=args.host, port=args.port, n_ctx=args.ctx))
            model.start()
        rpc = ["--data-dir", args.data_dir, "--connect-port", args.connect_port, "--grpc-port", args.grpc_port]
        return rpc_main(rpc + (["--session-only"] if args.session_only else []))
    except CoreAIError as exc:
        logging.getLogger("serve").error("%s", exc)
        return 1
    finally:
        if model is not None:
            model.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
