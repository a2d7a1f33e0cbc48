"""Token counts: llama-cpp-python in-process (vocabulary-only load) against llama-server's `/tokenize`.

The runtime counts tokens for every message it budgets (history, memory, tails): thousands of counts per
turn, most of them of text counted before (an LRU cache), the rest new. Two ways to count with the same
llama.cpp: `history.tokens.LlamaTokenCounter` (llama-cpp-python, the GGUF's vocabulary only, in this
process) and the hosted engine's `POST /tokenize` over its Unix socket. Measured: whether the counts agree
(texts, and whole chat prompts against llama-server's own `usage.prompt_tokens`), the counter's load time
and RSS cost, and counts per second of distinct texts each way (no cache).

Run: `.venv/bin/python bench/bench_token_counts.py [--texts 400] [--model PATH]`
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.history.tokens import LlamaTokenCounter  # noqa: E402
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path  # noqa: E402
from pyruntime.model.hosting.llama_server import LlamaServerConfig  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402

WORDS = ("sword", "village", "the blacksmith", "gold coins", "my sister Ina", "Riverwood", "a grey cat", "dragon",
         "¡hola!", "naïve café", "30 gold", "{\"tool_calls\": []}", "🙂", "line\nbreak", "tab\tbed")


def texts(count: int) -> list[str]:
    """Distinct texts of 5-60 words, a few with unicode, JSON and control characters."""
    out = []
    for i in range(count):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(5 + i % 56)]
        out.append(f"{i}: " + " ".join(words))
    return out


def chats(count: int) -> list[list[dict[str, str]]]:
    """Chat prompts as the runtime sends them: a system prompt, then alternating turns."""
    lines = texts(count * 3)
    return [[{"role": "system", "content": f"You are NPC {i}. " + lines[3 * i]},
             {"role": "user", "content": lines[3 * i + 1]},
             {"role": "assistant", "content": lines[3 * i + 2]},
             {"role": "user", "content": "And then?"}] for i in range(count)]


async def engine_counts(server: LlamaServerProcess, sample: list[str],
                        prompts: list[list[dict[str, str]]]) -> tuple[list[int], float, list[int]]:
    """Over the engine's own socket, one request at a time: each text's `/tokenize` count, the seconds they took,
    and each chat prompt's `usage.prompt_tokens`."""
    async with httpx.AsyncClient(base_url=server.engine_url, headers=server.engine_headers,
                                 transport=server.engine_transport(), timeout=30) as http:
        began = time.perf_counter()
        remote = []
        for text in sample:
            answer = await http.post("/tokenize", json={"content": text, "add_special": False, "parse_special": True})
            remote.append(len(answer.raise_for_status().json()["tokens"]))
        remote_s = time.perf_counter() - began
        prompt_tokens = []
        for messages in prompts:
            answer = await http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 1,
                                                                  "temperature": 0})
            prompt_tokens.append(answer.raise_for_status().json()["usage"]["prompt_tokens"])
    return remote, remote_s, prompt_tokens


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--model", type=Path)
    args = parser.parse_args(argv)
    model = args.model or embedded_model_path()
    sample = texts(args.texts)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.perf_counter()
    counter = LlamaTokenCounter(model)
    load_s = time.perf_counter() - began
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    server = LlamaServerProcess(LlamaServerConfig(model_path=model, alias=EMBEDDED_MODEL_ALIAS, port=free_port(),
                                                  n_threads=1, slots=1))
    server.start()
    try:
        began = time.perf_counter()
        local = [len(counter.tokenize(t)) for t in sample]
        local_s = time.perf_counter() - began
        remote, remote_s, prompt_tokens = asyncio.run(engine_counts(server, sample, chats(args.chats)))
        disagree = sum(a != b for a, b in zip(local, remote, strict=True))
        prompt_gaps = [counter.count_messages(messages) - tokens
                       for messages, tokens in zip(chats(args.chats), prompt_tokens, strict=True)]
    finally:
        server.stop()
    print(f"model {model.name}: {args.texts} distinct texts, {args.chats} chat prompts")
    print(f"texts whose counts differ (llama-cpp-python vs /tokenize): {disagree} of {len(sample)}")
    print(f"chat prompts: count_messages - llama-server's prompt_tokens: median {statistics.median(prompt_gaps)}, "
          f"min {min(prompt_gaps)}, max {max(prompt_gaps)}")
    print(f"in-process counter: load {load_s:.2f} s, peak RSS +{(rss_after - rss_before) / 1024:.0f} MB; "
          f"{len(sample) / local_s:.0f} counts/s")
    print(f"/tokenize over the engine's socket: {len(sample) / remote_s:.0f} counts/s "
          f"({1000 * remote_s / len(sample):.2f} ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
