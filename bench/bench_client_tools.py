"""Added latency of one game-tool (client tool) round trip against a runtime-hosted tool doing the same work.

One process: the scripted model (so the model's time is ~0 and the transport is what is measured), the
RPC servers with the real service, and the Python client over gRPC and Connect. Each turn makes exactly
one tool call and one follow-up model call; the hosted turn calls a `ToolRegistry` tool, the client
turn declares the same tool as a game tool (StreamTask + a client_tool_call event + SubmitToolResult).
Turns alternate; the table gives per-turn median and p99 of each and the difference of the medians.

    PYTHONPATH=. .venv/bin/python bench/bench_client_tools.py --turns 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from pydantic import BaseModel

from pyruntime.client import ClientTool, RuntimeClient
from pyruntime.model.scripted import Script
from pyruntime.model.scripted_server import ScriptedModelServer
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc import RpcConfig, start_rpc_servers
from pyruntime.service import RuntimeServices
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import ToolRegistry, build_orchestrator
from pyruntime.turns.convert import ProtoTurnRunner

ROLE = "Bench"
TOKEN = "bench-client-tools-token-0123456789"
PRICES = {"sword": 30, "axe": 22}
SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
SCRIPT = {
    "rules": [
        {"when": {"hint": "^hosted"}, "reply": "", "tool_calls": [{"name": "price_hosted", "arguments": {"item": "sword"}}],
         "after_tools": "30."},
        {"when": {"hint": "^client"}, "reply": "", "tool_calls": [{"name": "price_game", "arguments": {"item": "sword"}}],
         "after_tools": "30."},
    ],
    "default": {"reply": "?"},
}


class Item(BaseModel):
    item: str


def price(item: str) -> dict[str, int]:
    """The work both tools do."""
    return {"gold": PRICES[item]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of each kind per transport")
    parser.add_argument("--tool-mode", default="native", choices=["native", "structured"])
    args = parser.parse_args()

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    model = ScriptedModelServer(Script.from_dict(SCRIPT))
    asyncio.run_coroutine_threadsafe(model.start(), loop).result(30)

    with TemporaryDirectory() as tmp:
        policy = AgentMemoryPolicy()
        policy.configure_role(ROLE, system_prompt="You price things.", use_memory_tool=False,
                              with_chat_history=False, max_tool_call_roundtrips=2)
        registry = ToolRegistry()
        registry.register(ROLE, "price_hosted", "Price of an item.", Item, lambda a: price(a.item))
        stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, Path(tmp))
        orchestrator = build_orchestrator(base_url=model.base_url, stores=stores, policy=policy, tools=registry,
                                          tool_mode=args.tool_mode)
        services = RuntimeServices.create(stores, policy, runner=ProtoTurnRunner(orchestrator), model_alias="scripted")
        handle = start_rpc_servers(services, RpcConfig(grpc_port=0, connect_port=0, token=TOKEN, grace_s=1.0))
        game_tool = ClientTool("price_game", "Price of an item.", SCHEMA, lambda a: price(a["item"]))
        print(f"tool mode {args.tool_mode}, {args.turns} turns of each kind per transport (alternating)\n")
        print("| transport | hosted tool turn median / p99 (ms) | game tool turn median / p99 (ms) | added median / p99 (ms) |")
        print("|---|---|---|---|")
        try:
            for transport, url in (("gRPC", f"grpc://127.0.0.1:{handle.grpc_port}"), ("Connect", handle.connect_url)):
                with RuntimeClient(url, token=TOKEN, timeout=60) as client:
                    hosted: list[float] = []
                    game: list[float] = []
                    for i in range(args.turns + 5):
                        start = time.perf_counter()
                        events = list(client.stream_task("hosted", role_id=ROLE))
                        took_hosted = time.perf_counter() - start
                        start = time.perf_counter()
                        events_game = list(client.stream_task_with_tools("client", [game_tool], role_id=ROLE))
                        took_game = time.perf_counter() - start
                        assert events[-1].final.text == events_game[-1].final.text == "30."
                        if i >= 5:  # warm-up turns left out
                            hosted.append(took_hosted * 1000)
                            game.append(took_game * 1000)
                    mh, mg = statistics.median(hosted), statistics.median(game)
                    ph, pg = percentile(hosted, 0.99), percentile(game, 0.99)
                    print(f"| {transport} | {mh:.2f} / {ph:.2f} | {mg:.2f} / {pg:.2f} | {mg - mh:+.2f} / {pg - ph:+.2f} |")
        finally:
            handle.stop(1.0)
            services.close()
            asyncio.run_coroutine_threadsafe(orchestrator.client.aclose(), loop).result(10)
            asyncio.run_coroutine_threadsafe(model.stop(), loop).result(10)


if __name__ == "__main__":
    main()
