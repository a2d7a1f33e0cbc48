"""Streams end with a usage chunk whose counts are llama.cpp's own (issue 13): prompt, cached, evaluated."""

from __future__ import annotations

import asyncio

import httpx

from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.compat import parse_chunk
from pyruntime.model.llama_server import PromptCounters, count_prompt, usage_chunk
from pyruntime.model.types import TextDelta, UsageDelta

FIRST = [{"role": "system", "content": "You are a blacksmith in a village."},
         {"role": "user", "content": "Hello, can you fix my sword?"}]
LONGER = [*FIRST, {"role": "assistant", "content": "Yes, for ten gold."}, {"role": "user", "content": "Deal."}]


def _prompt_tokens(url: str, messages: list[dict[str, str]]) -> int:
    """The whole prompt's tokens as the server's non-streamed usage counts them (cached or not)."""
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    return httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()["usage"]["prompt_tokens"]


async def _stream_usage(url: str, messages: list[dict[str, str]]):
    client = OpenAICompatClient(url)
    try:
        async with client.stream_chat(messages, max_tokens=4, temperature=0.0) as stream:
            usages = [delta.usage async for delta in stream if isinstance(delta, UsageDelta)]
    finally:
        await client.aclose()
    # The prompt's counts come before the first token, the final counts last.
    assert len(usages) == 2
    first, last = usages
    assert (first.prompt_tokens, first.cached_tokens, first.completion_tokens) == (
        last.prompt_tokens, last.cached_tokens, 0)
    return last


def test_a_stream_reports_the_prompt_and_the_tokens_reused_from_the_cache(tiny_server_url: str) -> None:
    whole_first, whole_longer = _prompt_tokens(tiny_server_url, FIRST), _prompt_tokens(tiny_server_url, LONGER)
    _prompt_tokens(tiny_server_url, [{"role": "user", "content": "unrelated"}])  # the cache holds something else
    cold = asyncio.run(_stream_usage(tiny_server_url, FIRST))
    again = asyncio.run(_stream_usage(tiny_server_url, FIRST))
    assert (again.prompt_tokens, again.cached_tokens) == (whole_first, whole_first - 1)
    assert cold.prompt_tokens == whole_first
    assert cold.cached_tokens < whole_first // 2  # at most the template's opening tokens were shared
    assert cold.completion_tokens == 4  # max_tokens
    warm = asyncio.run(_stream_usage(tiny_server_url, LONGER))
    assert warm.prompt_tokens == whole_longer
    # The first request's prompt is reused; only the new messages (and the reply tokens that differ) are evaluated.
    assert warm.cached_tokens >= whole_first - 1
    assert warm.prompt_tokens - warm.cached_tokens <= whole_longer - whole_first + cold.completion_tokens + 1


def test_a_stream_closed_after_its_first_token_already_carries_the_prompt_counts(tiny_server_url: str) -> None:
    # The runtime closes a stream whose visible reply reached its cap: the final usage chunk never comes.
    whole = _prompt_tokens(tiny_server_url, LONGER)

    async def first_token() -> list[UsageDelta | TextDelta]:
        client = OpenAICompatClient(tiny_server_url)
        seen: list[UsageDelta | TextDelta] = []
        try:
            async with client.stream_chat(LONGER, max_tokens=64, temperature=0.0) as stream:
                async for delta in stream:
                    if isinstance(delta, UsageDelta | TextDelta):
                        seen.append(delta)
                    if isinstance(delta, TextDelta):
                        break
        finally:
            await client.aclose()
        return seen

    seen = asyncio.run(first_token())
    assert isinstance(seen[0], UsageDelta) and isinstance(seen[-1], TextDelta)
    assert seen[0].usage.prompt_tokens == whole and seen[0].usage.completion_tokens == 0
    assert seen[0].usage.cached_tokens == whole - 1  # the non-streamed request just before left it all in the cache


def test_the_prompt_count_follows_llama_cpp_python_reuse_rule() -> None:
    assert count_prompt([1, 2, 3, 4, 9, 9], [1, 2, 3, 4, 5, 6, 7]) == PromptCounters(7, 4)
    # A prompt the cache holds whole still evaluates its last token (llama-cpp-python needs its logits).
    assert count_prompt([1, 2, 3, 4, 5], [1, 2, 3]) == PromptCounters(3, 2)
    assert count_prompt([], [1, 2]) == PromptCounters(2, 0)
    chunk = usage_chunk({"id": "c1", "model": "m", "choices": [{"finish_reason": "stop"}]}, PromptCounters(7, 4),
                        cache_after=10)
    assert chunk["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10,
                              "prompt_tokens_details": {"cached_tokens": 4}}
    [delta] = parse_chunk(chunk)
    assert isinstance(delta, UsageDelta)
    assert (delta.usage.prompt_tokens, delta.usage.completion_tokens, delta.usage.cached_tokens) == (7, 3, 4)
    # Cut at the length limit: the last sampled token was never evaluated, it still counts.
    cut = usage_chunk({"choices": [{"finish_reason": "length"}]}, PromptCounters(7, 4), cache_after=10)
    assert cut["usage"]["completion_tokens"] == 4
