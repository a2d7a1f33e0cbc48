"""Added latency of one game-tool (client tool) round trip against a runtime-hosted tool doing the same work.

A child process runs the runtime: the scripted model (so the model's time is ~0 and the transport is what is
measured), the RPC servers with the real service and a hosted tool. This process drives it with the Python
client (gRPC and Connect) and the compiled C# package (Connect, timed inside C# with a Stopwatch). Each turn
makes exactly
one tool call and one follow-up model call; the hosted turn calls a `ToolRegistry` tool, the client
turn declares the same tool as a game tool (StreamTask + a client_tool_call event + SubmitToolResult).
Turns alternate (C#: in batches of 10); the table gives per-turn median and p99 of each and the difference of
the medians.

    .venv/bin/python bench/bench_client_tools.py --turns 200 [--tool-mode structured] [--no-csharp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.client import ClientTool, RuntimeClient  # noqa: E402
from pyruntime.policy import AgentMemoryPolicy  # noqa: E402
from pyruntime.rpc import RpcConfig, start_rpc_servers  # noqa: E402
from pyruntime.service import RuntimeServices  # noqa: E402
from pyruntime.service.turn_runner import ProtoTurnRunner  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores  # noqa: E402
from pyruntime.testing.scripted import Script  # noqa: E402
from pyruntime.testing.scripted_server import ScriptedModelServer  # noqa: E402
from pyruntime.turns import ToolRegistry, build_orchestrator  # noqa: E402

WARMUP = 5
ROLE = "Bench"
TOKEN = "bench-client-tools-token-0123456789"
PRICES = {"sword": 30, "axe": 22}
SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
SCRIPT = {
    "rules": [
        {"when": {"hint": "^hosted"}, "reply": "",
         "tool_calls": [{"name": "price_hosted", "arguments": {"item": "sword"}}],
         "after_tools": "30."},
        {"when": {"hint": "^client"}, "reply": "",
         "tool_calls": [{"name": "price_game", "arguments": {"item": "sword"}}],
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


CSHARP_SOURCE = r"""
using System;
using System.Diagnostics;
using System.Threading.Tasks;
using CoreAI.Ai;
using CoreAI.Runtime;

namespace CoreAI.Bench
{
    public sealed class ItemArgs
    {
        public string Item;
    }

    /// <summary>Streamed turns timed with a Stopwatch; milliseconds per turn.</summary>
    public static class ClientToolBench
    {
        public static void Register(CoreAIRuntimeClient client)
        {
            new AgentBuilder("BenchCs", client.Policy).WithoutMemory().WithoutChatHistory().WithMaxToolCallRoundtrips(2)
                .WithTool<ItemArgs>("price_game", "Price of an item.",
                    a => Task.FromResult(a.Item == "sword" ? "{\"gold\": 30}" : "{\"gold\": 22}"),
                    runOnMainThread: false)
                .Build();
        }

        public static double[] Turns(CoreAIRuntimeClient client, string role, string hint, int count)
        {
            return TurnsAsync(client, role, hint, count).GetAwaiter().GetResult();
        }

        private static async Task<double[]> TurnsAsync(CoreAIRuntimeClient client, string role, string hint, int count)
        {
            AiOrchestrator orchestrator = client.CreateOrchestrator();
            var handlers = new AiTaskStreamHandlers { RunOnCallerContext = false };
            var times = new double[count];
            for (int i = 0; i < count; i++)
            {
                Stopwatch watch = Stopwatch.StartNew();
                var request = new AiTaskRequest { RoleId = role, Hint = hint };
                AiTaskResult result = await orchestrator.StreamTaskAsync(request, handlers).ConfigureAwait(false);
                times[i] = watch.Elapsed.TotalMilliseconds;
                if (result.Text != "30.")
                {
                    throw new InvalidOperationException("unexpected reply: " + result.Status + " " + result.Error);
                }
            }
            return times;
        }
    }
}
"""


def serve(tool_mode: str) -> None:
    """The runtime under test (child process): scripted model, RPC servers, the hosted tool; ports on stdout."""
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
                                          tool_mode=tool_mode)
        services = RuntimeServices.create(stores, policy, runner=ProtoTurnRunner(orchestrator), model_alias="scripted")
        handle = start_rpc_servers(services, RpcConfig(grpc_port=0, connect_port=0, token=TOKEN, grace_s=1.0))
        print(json.dumps({"grpc": handle.grpc_port, "connect": handle.connect_url}), flush=True)
        sys.stdin.read()  # until the parent closes it
        handle.stop(1.0)
        services.close()


def row(name: str, hosted: list[float], game: list[float]) -> str:
    """One table row: medians and p99s of both kinds and their differences."""
    mh, mg = statistics.median(hosted), statistics.median(game)
    ph, pg = percentile(hosted, 0.99), percentile(game, 0.99)
    return f"| {name} | {mh:.2f} / {ph:.2f} | {mg:.2f} / {pg:.2f} | {mg - mh:+.2f} / {pg - ph:+.2f} |"


def python_rows(ports: dict[str, object], turns: int) -> list[str]:
    """Alternating hosted / game-tool turns from the Python client, per transport."""
    game_tool = ClientTool("price_game", "Price of an item.", SCHEMA, lambda a: price(a["item"]))
    rows = []
    urls = (("Python, gRPC", f"grpc://127.0.0.1:{ports['grpc']}"), ("Python, Connect", ports["connect"]))
    for transport, url in urls:
        with RuntimeClient(str(url), token=TOKEN, timeout=60) as client:
            hosted: list[float] = []
            game: list[float] = []
            for i in range(turns + WARMUP):
                start = time.perf_counter()
                events = list(client.stream_task("hosted", role_id=ROLE))
                took_hosted = time.perf_counter() - start
                start = time.perf_counter()
                events_game = list(client.stream_task_with_tools("client", [game_tool], role_id=ROLE))
                took_game = time.perf_counter() - start
                assert events[-1].final.text == events_game[-1].final.text == "30."
                if i >= WARMUP:
                    hosted.append(took_hosted * 1000)
                    game.append(took_game * 1000)
        rows.append(row(transport, hosted, game))
    return rows


def csharp_row(ports: dict[str, object], turns: int) -> str:
    """Alternating batches of hosted / game-tool turns from the C# package (Connect), timed inside C#."""
    from bench.bench_csharp_rpc import load_csharp

    load_csharp("CoreAI.Bench.ClientTools", CSHARP_SOURCE)
    from CoreAI.Ai import AgentMemoryPolicy as CsPolicy
    from CoreAI.Bench import ClientToolBench
    from CoreAI.Runtime import CoreAIRuntimeClient

    client = CoreAIRuntimeClient(str(ports["connect"]), TOKEN, CsPolicy())
    ClientToolBench.Register(client)
    ClientToolBench.Turns(client, ROLE, "hosted", WARMUP)
    ClientToolBench.Turns(client, "BenchCs", "client", WARMUP)
    hosted: list[float] = []
    game: list[float] = []
    batch = 10
    for _ in range(max(1, turns // batch)):
        hosted += list(ClientToolBench.Turns(client, ROLE, "hosted", batch))
        game += list(ClientToolBench.Turns(client, "BenchCs", "client", batch))
    client.Dispose()
    return row("C# package, Connect", hosted, game)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of each kind per client")
    parser.add_argument("--tool-mode", default="native", choices=["native", "structured"])
    parser.add_argument("--no-csharp", action="store_true", help="leave out the C# client")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tool_mode)
        return
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--tool-mode", args.tool_mode],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        ports = json.loads(child.stdout.readline())
        print(f"tool mode {args.tool_mode}; {args.turns} turns of each kind per client, alternating; runtime in a "
              "child process\n")
        print("| client | hosted tool turn median / p99 (ms) | game tool turn median / p99 (ms) | "
              "added median / p99 (ms) |")
        print("|---|---|---|---|")
        for line in python_rows(ports, args.turns):
            print(line, flush=True)
        if not args.no_csharp:
            print(csharp_row(ports, args.turns), flush=True)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    sys.stdout.flush()
    os._exit(0)  # skip pythonnet's slow shutdown


if __name__ == "__main__":
    main()
