"""Per-NPC prefix state (issue 13): with the RAM prompt cache on, an NPC's turn after another NPC's starts warm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.llama_server import LlamaServerConfig
from pyruntime.model.types import Usage, UsageDelta
from tests.support.fixtures import start_llama_server


def _npc(name: str) -> list[dict[str, str]]:
    lines = " ".join(f"{name} remembers event number {i} of the village." for i in range(12))
    return [{"role": "system", "content": f"You are {name}. {lines}"}, {"role": "user", "content": "Hello!"}]


async def stream_usage(url: str, messages: list[dict[str, str]]) -> Usage:
    client = OpenAICompatClient(url)
    try:
        async with client.stream_chat(messages, max_tokens=4, temperature=0.0) as stream:
            *_, usage = [d.usage async for d in stream if isinstance(d, UsageDelta)]  # the final counts come last
    finally:
        await client.aclose()
    return usage


def _rotation(url: str) -> tuple[Usage, Usage]:
    """Bram, Elda, then Bram again with one more line: (Bram's first turn, Bram's second turn)."""
    bram, elda = _npc("Bram"), _npc("Elda")
    first = asyncio.run(stream_usage(url, bram))
    asyncio.run(stream_usage(url, elda))
    again = asyncio.run(stream_usage(url, [*bram, {"role": "assistant", "content": "Hi."},
                                     {"role": "user", "content": "Bye"}]))
    return first, again


@pytest.mark.parametrize("cache_mb", [0, 64])
def test_an_npc_finds_its_prefix_after_another_npc_only_with_the_cache(tiny_model_path: Path, cache_mb: int) -> None:
    server = start_llama_server(tiny_model_path, prompt_cache_mb=cache_mb)
    try:
        first, again = _rotation(server.base_url)
    finally:
        server.stop()
    if cache_mb:
        assert again.cached_tokens >= first.prompt_tokens - 1  # Bram's state came back from the cache
    else:
        assert again.cached_tokens < first.prompt_tokens // 2  # Elda's turn evicted it (one KV sequence)


def test_the_cache_keeps_last_row_logits_and_drops_its_own_prefixes() -> None:
    from llama_cpp.llama import LlamaState

    from pyruntime.model.prompt_cache import NpcPromptCache

    def state(tokens: tuple[int, ...], size: int) -> LlamaState:
        return LlamaState(np.array(tokens, dtype=np.intc), np.ones((512, 8), dtype=np.single), len(tokens),
                          b"x" * size, size, 0)

    cache = NpcPromptCache(capacity_bytes=1000)
    cache[(1, 2, 3)] = state((1, 2, 3), 300)
    cache[(7, 8)] = state((7, 8), 300)
    cache[(1, 2, 3, 4, 5)] = state((1, 2, 3, 4, 5), 300)  # the same conversation, one turn later
    assert list(cache.cache_state) == [(7, 8), (1, 2, 3, 4, 5)]
    assert cache[(1, 2, 3, 4, 5, 6)].scores.shape == (1, 8)
    cache[(9,)] = state((9,), 300)
    cache[(10,)] = state((10,), 300)  # over 1000 bytes: the least recently used goes
    assert list(cache.cache_state) == [(1, 2, 3, 4, 5), (9,), (10,)]


def test_a_prewarm_entry_is_dropped_by_the_turn_that_follows_it() -> None:
    from llama_cpp.llama import LlamaState

    from pyruntime.model.prompt_cache import SUPERSEDED_TAIL_TOKENS, NpcPromptCache

    def state(tokens: tuple[int, ...]) -> LlamaState:
        return LlamaState(np.array(tokens, dtype=np.intc), np.ones((1, 8), dtype=np.single), len(tokens), b"x", 1, 0)

    history = tuple(range(100, 140))
    prewarm = history + (1, 2, 3, 77)  # the prompt ends with the generation prompt; one token generated
    other = tuple(range(100, 120)) + tuple(range(500, 530))  # another conversation with the same system prompt
    turn = history + (1, 4, 5, 6, 7, 8, 9)  # the next turn: the player's line instead of the generation prompt
    cache = NpcPromptCache(capacity_bytes=1 << 20)
    for key in (prewarm, other, turn):
        cache[key] = state(key)
    assert list(cache.cache_state) == [other, turn]
    # Only the last few tokens may differ: a key that parts earlier is another prompt, kept.
    parted = history[:-SUPERSEDED_TAIL_TOKENS] + tuple(range(900, 960))
    cache[parted] = state(parted)
    assert list(cache.cache_state) == [other, turn, parted]


def test_a_negative_cache_size_is_refused(tiny_model_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="prompt_cache_mb"):
        LlamaServerConfig(model_path=tiny_model_path, alias="tiny", prompt_cache_mb=-1)


def test_a_light_state_from_the_cache_continues_exactly_like_a_fresh_evaluation(tiny_model_path: Path) -> None:
    import types

    import llama_cpp

    from pyruntime.model.prompt_cache import NpcPromptCache, save_state_last_logits

    def load() -> llama_cpp.Llama:
        return llama_cpp.Llama(model_path=str(tiny_model_path), n_ctx=512, logits_all=False, verbose=False)

    bram = "Bram the smith remembers the village fair and the old mill. Player: hello"
    fresh = load().create_completion(bram + " again", max_tokens=6, temperature=0.0)["choices"][0]["text"]
    llm = load()
    llm.save_state = types.MethodType(save_state_last_logits, llm)  # what install() does for the server
    llm.set_cache(NpcPromptCache(capacity_bytes=64 << 20))
    llm.create_completion(bram, max_tokens=2, temperature=0.0)
    llm.create_completion("Elda the innkeeper pours ale.", max_tokens=2, temperature=0.0)  # evicts Bram's KV
    [state] = [s for k, s in llm.cache.cache_state.items() if len(k) > 10 and s.n_tokens > 10][:1]
    assert state.scores.shape[0] == 1  # one logits row kept, not up to n_batch
    before = llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval
    again = llm.create_completion(bram + " again", max_tokens=6, temperature=0.0)["choices"][0]["text"]
    evaluated = llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval - before
    assert evaluated < len(llm.tokenize(bram.encode())) // 2  # Bram's prefix came from the cache
    assert again == fresh
