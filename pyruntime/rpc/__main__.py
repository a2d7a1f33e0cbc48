"""`python -m pyruntime.rpc`: the runtime's gRPC and Connect servers until SIGTERM/SIGINT.

Without `--llm-url` it serves the stores and the role policy only (turns answer UNAVAILABLE); with
it, turns run against that OpenAI-compatible server (a hosted llama.cpp, LM Studio, ...).

Prints one JSON line when ready: {"grpc_port": N, "connect_port": N, "token_file": "..."}.
The token comes from $COREAI_RUNTIME_TOKEN or is generated and written to the token file (0600);
it is never a command-line argument (other users can read those).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from pyruntime.errors import CoreAIError
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc.auth import default_token_file
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT
from pyruntime.rpc.grpc_server import DEFAULT_GRPC_PORT
from pyruntime.rpc.runtime import DEFAULT_HOST, RpcConfig, RpcServers, serve_until_signalled
from pyruntime.service import RuntimeServices
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores


def _services(stores: StoreBundle, llm_url: str | None) -> RuntimeServices:
    """The services over stores; with llm_url, turns run against that model server."""
    if llm_url is None:
        return RuntimeServices.create(stores)
    from pyruntime.turns import build_orchestrator
    from pyruntime.turns.convert import ProtoTurnRunner

    policy = AgentMemoryPolicy()
    orchestrator = build_orchestrator(base_url=llm_url, stores=stores, policy=policy)

    async def model_ready() -> bool:
        return bool(await orchestrator.client.models())

    return RuntimeServices.create(stores, policy, runner=ProtoTurnRunner(orchestrator), model_probe=model_ready)


def main(argv: list[str] | None = None) -> int:
    """Parse flags, open the stores and serve until signalled."""
    parser = argparse.ArgumentParser(prog="python -m pyruntime.rpc", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, type=Path, help="the game's persistentDataPath")
    parser.add_argument("--session-only", action="store_true", help="keep everything in memory, write no files")
    parser.add_argument("--listen", default=DEFAULT_HOST,
                        help="address to bind (default 127.0.0.1; anything else requires COREAI_RUNTIME_TOKEN)")
    parser.add_argument("--grpc-port", type=int, default=DEFAULT_GRPC_PORT, help="0 = any free port")
    parser.add_argument("--connect-port", type=int, default=DEFAULT_CONNECT_PORT, help="0 = any free port")
    parser.add_argument("--token-file", type=Path, default=None,
                        help="where to write the token (default <data-dir>/CoreAI/runtime/token)")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds in-flight calls get on shutdown")
    parser.add_argument("--llm-url", default=None,
                        help="OpenAI-compatible model server for turns, e.g. http://127.0.0.1:13333/v1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    mode = AgentMemoryPersistenceMode.SESSION_ONLY if args.session_only else AgentMemoryPersistenceMode.PERSISTENT
    try:
        services = _services(open_stores(mode, args.data_dir), args.llm_url)
        token_file = args.token_file or default_token_file(args.data_dir)
        config = RpcConfig(host=args.listen, grpc_port=args.grpc_port, connect_port=args.connect_port,
                           token_file=token_file, grace_s=args.grace)

        def announce(servers: RpcServers) -> None:
            print(json.dumps({"grpc_port": servers.grpc_port, "connect_port": servers.connect_port,
                              "token_file": str(token_file)}), flush=True)

        asyncio.run(serve_until_signalled(services, config, on_ready=announce))
    except CoreAIError as exc:
        logging.getLogger(__name__).error("cannot start: %s", exc)
        return 2
    except OSError as exc:
        logging.getLogger(__name__).error("cannot start: %s (errno %s)", type(exc).__name__, exc.errno)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
