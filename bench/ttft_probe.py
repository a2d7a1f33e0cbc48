"""Where a warm turn's time to first token goes in the server: the client path and the prompt's length, apart.

The question: the runtime's warm turns took 1.31x the naive game's time to the first token although both
evaluated ~25 new tokens. This plays the same append-only conversation (each request = the previous
one, its reply and a ~25-token player line; 16-token replies, temperature 0) through three client paths
of one hosted SmolLM2-135M, round-robin so that load hits all alike:

- `direct`: what `build_orchestrator(server=...)` uses (the engine's Unix socket, llama-server's dialect:
  `id_slot`, `timings_per_token`);
- `direct-plain`: the same socket, a plain OpenAI request (no slot, no per-token timings);
- `public`: the public model port (`model/public_port.py`'s proxy hop over TCP), a plain request: what
  `bench_npcs.py`'s naive pass uses;

and, with `direct`, prompts of about `--sizes` tokens (the runtime's prompt is longer than the naive
game's by the memory tool's contract and the summary). Per path and size, medians: the client's time to
the first text, and the server's own `timings` (prompt_n evaluated, prompt_ms, predicted_per_token_ms).

Run: `nice -n 10 .venv/bin/python bench/ttft_probe.py [--turns 10] [--sizes 400 1100]`
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.history import LlamaTokenCounter, count_chat_tokens
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.slots import conversation_id
from pyruntime.model.client.types import TextDelta
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.fixtures import free_port

WORDS = ("road river smith iron blade miller flour guard wolves tower rain bridge gold sword crown cat apple "
         "winter shield night sister king coin mentor village inn goat captain merchant").split()


@dataclass
class Series:
    """One path x size: per turn, the client's time to first text and the server's timings."""

    ttft: list[float] = field(default_factory=list)
    prompt_n: list[int] = field(default_factory=list)
    prompt_ms: list[float] = field(default_factory=list)
    per_token_ms: list[float] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)


def _line(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words))


def _conversation(tag: str, tokens: int, counter: LlamaTokenCounter) -> list[dict[str, str]]:
    """A system prompt and filler exchanges until about `tokens` prompt tokens."""
    messages = [{"role": "system", "content": f"You are Bram ({tag}), the village blacksmith. Answer briefly."}]
    seed = sum(map(ord, tag))
    while count_chat_tokens(counter, messages) < tokens:
        seed += 1
        messages += [{"role": "user", "content": _line(seed, 14)}, {"role": "assistant", "content": _line(seed, 12)}]
    return messages


def _timings(client: OpenAICompatClient, into: dict[str, Any]) -> None:
    """Keep the last `timings` object the server streamed (llama-server's own counts) in `into`."""
    parse = client._json

    def kept(content: bytes | str) -> Any:
        data = parse(content)
        if isinstance(data.get("timings"), dict):
            into["timings"] = data["timings"]
        return data

    client._json = kept  # type: ignore[method-assign]  # keeping the timings it parses


async def _turn(client: OpenAICompatClient, messages: list[dict[str, str]], series: Series, seen: dict[str, Any],
                conversation: str | None, counter: LlamaTokenCounter, record: bool) -> None:
    seen.clear()
    began = time.perf_counter()
    first = None
    text = []
    options: dict[str, Any] = {"conversation": conversation} if conversation else {}
    async with client.stream_chat(messages, max_tokens=16, temperature=0.0, extra={"seed": 0}, **options) as stream:
        async for delta in stream:
            if isinstance(delta, TextDelta) and delta.text:
                first = first if first is not None else time.perf_counter() - began
                text.append(delta.text)
    if record:
        timings = seen.get("timings") or {}
        series.ttft.append(first if first is not None else time.perf_counter() - began)
        series.prompt_n.append(int(timings.get("prompt_n", 0)))
        series.prompt_ms.append(float(timings.get("prompt_ms", 0.0)))
        series.per_token_ms.append(float(timings.get("predicted_per_token_ms", 0.0)))
        series.sent.append(count_chat_tokens(counter, messages))
    messages.append({"role": "assistant", "content": "".join(text)})


async def run(args: argparse.Namespace, server: LlamaServerProcess, counter: LlamaTokenCounter) -> None:
    engine = server.client_options()
    plain = {k: engine[k] for k in ("base_url", "api_key", "unix_socket", "model")}  # a pool of its own
    clients = {
        "direct": OpenAICompatClient(**engine),
        "direct-plain": OpenAICompatClient(**plain),
        "public": OpenAICompatClient(server.base_url, model=server.config.alias),
    }
    seen: dict[str, dict[str, Any]] = {name: {} for name in clients}
    for name, client in clients.items():
        _timings(client, seen[name])
    # (path, size) -> conversation; the paths at the first size, then `direct` at the others
    cases = [(name, args.sizes[0]) for name in clients] + [("direct", size) for size in args.sizes[1:]]
    conversations = {case: _conversation(f"{case[0]} {case[1]}", case[1], counter) for case in cases}
    series = {case: Series() for case in cases}
    for turn in range(args.turns + 1):  # the first turn of each conversation is cold
        for case in cases:
            name, _ = case
            messages = conversations[case]
            messages.append({"role": "user", "content": f"{_line(turn + case[1], 18)}? (turn {turn + 1})"})
            await _turn(clients[name], messages, series[case], seen[name],
                        conversation_id(f"probe {case}") if name == "direct" else None, counter, turn > 0)
    for client in clients.values():
        await client.aclose()
    print("| path | prompt tokens sent, median | evaluated (prompt_n) | TTFT median ms | server prompt_ms | "
          "server ms per generated token |")
    print("|---|---|---|---|---|---|")
    for (name, _size), s in series.items():
        print(f"| {name} | {statistics.median(s.sent):g} | {statistics.median(s.prompt_n):g} | "
              f"{1000 * statistics.median(s.ttft):.0f} | {statistics.median(s.prompt_ms):.0f} | "
              f"{statistics.median(s.per_token_ms):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="warm turns per path and size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[950, 1150, 400],
                        help="approximate prompt tokens; the first is used for every path")
    args = parser.parse_args()
    config = LlamaServerConfig(model_path=embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS, port=free_port())
    counter = LlamaTokenCounter(config.model_path)
    with LlamaServerProcess(config) as server:
        asyncio.run(run(args, server, counter))
    print("\nRun: nice -n 10 .venv/bin/python bench/ttft_probe.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
