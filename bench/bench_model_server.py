"""Benchmark of the hosted llama.cpp server: load time, prompt and generation speed, per model.

Compares the runtime's game settings (n_threads = all cores, logits_all off, n_ctx 8192 clamped to
the model) against llama-cpp-python's server defaults (cores/2 threads, logits_all on, n_ctx 2048)
in the same run, for the tiny random test model and the embedded SmolLM2-135M. Every request goes
through the real HTTP server and `OpenAICompatClient`.

- start: spawn of the child until `GET /v1/models` answers (model load included)
- first: latency of the first chat request after start (cold caches)
- prompt tok/s: a ~300-token prompt with max_tokens=1 (first word varied to defeat the prefix cache)
- gen tok/s: completion tokens / wall time of a non-streamed reply at temperature 0

Medians of several runs. Run: `.venv/bin/python bench/bench_model_server.py [--runs N]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting import LlamaServerProcess
from pyruntime.model.llama_server import LlamaServerConfig
from tests.support.fixtures import free_port
from tests.support.tiny_model import write_tiny_model

PROMPT_WORDS = "the blacksmith said the sword would be ready by dawn and asked for thirty gold coins " * 18


@dataclass
class Row:
    model: str
    settings: str
    start_s: float
    first_s: float
    prompt_tps: float
    gen_tps: float


async def measure_requests(base_url: str, runs: int, gen_tokens: int) -> tuple[float, float, float]:
    async with OpenAICompatClient(base_url) as client:
        t = time.perf_counter()
        await client.chat([{"role": "user", "content": "hello"}], max_tokens=1, temperature=0)
        first = time.perf_counter() - t
        prompt, gen = [], []
        for i in range(runs):
            t = time.perf_counter()
            r = await client.chat([{"role": "user", "content": f"{i} {PROMPT_WORDS}"}], max_tokens=1, temperature=0)
            prompt.append(r.usage.prompt_tokens / (time.perf_counter() - t))
            t = time.perf_counter()
            r = await client.chat(
                [{"role": "user", "content": f"Tell me a story number {i}."}],
                max_tokens=gen_tokens,
                temperature=0,
            )
            gen.append(r.usage.completion_tokens / (time.perf_counter() - t))
    return first, statistics.median(prompt), statistics.median(gen)


def measure(name: str, settings: str, config: LlamaServerConfig, runs: int, gen_tokens: int) -> Row:
    starts, firsts, prompts, gens = [], [], [], []
    for _ in range(runs):
        server = LlamaServerProcess(replace(config, port=free_port()))
        server.start(timeout=120)
        try:
            starts.append(server.startup_seconds or 0.0)
            first, prompt, gen = asyncio.run(measure_requests(server.base_url, 3, gen_tokens))
            firsts.append(first)
            prompts.append(prompt)
            gens.append(gen)
        finally:
            server.stop()
    med = statistics.median
    return Row(name, settings, med(starts), med(firsts), med(prompts), med(gens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="server starts per model and setting")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        tiny = write_tiny_model(Path(tmp) / "tiny.gguf")
        models = [("tiny", tiny, "tiny", 200), ("smollm2-135m", embedded_model_path(), EMBEDDED_MODEL_ALIAS, 64)]
        rows = []
        for name, path, alias, gen_tokens in models:
            game = LlamaServerConfig(model_path=path, alias=alias)
            library = replace(game, n_threads=max(cores // 2, 1), logits_all=True, n_ctx=2048)
            rows.append(measure(name, "library defaults", library, args.runs, gen_tokens))
            rows.append(measure(name, "game settings", game, args.runs, gen_tokens))
    print(f"\ncores={cores}, runs={args.runs} (medians)")
    print(
        f"{'model':<14}{'settings':<18}{'start s':>9}{'first s':>9}"
        f"{'prompt tok/s':>14}{'gen tok/s':>11}{'prompt x':>10}{'gen x':>8}"
    )
    for i, row in enumerate(rows):
        base = rows[i - i % 2]
        print(
            f"{row.model:<14}{row.settings:<18}{row.start_s:>9.2f}{row.first_s:>9.2f}"
            f"{row.prompt_tps:>14.0f}{row.gen_tps:>11.0f}"
            f"{row.prompt_tps / base.prompt_tps:>9.2f}x{row.gen_tps / base.gen_tps:>7.2f}x"
        )
    print("\nreproduce: .venv/bin/python bench/bench_model_server.py --runs", args.runs)


if __name__ == "__main__":
    main()
