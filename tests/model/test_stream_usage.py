"""Streams carry llama-server's own counts (its per-token `timings`): prompt, cached, evaluated, generated."""

from __future__ import annotations

import asyncio

import httpx

from pyruntime.model.client.compat import parse_chunk
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.types import TextDelta, Usage, UsageDelta

FIRST = [{"role": "system", "content": "You are a blacksmith in a village."},
         {"role": "user", "content": "Hello, can you fix my sword?"}]
LONGER = [*FIRST, {"role": "assistant", "content": "Yes, for ten gold."}, {"role": "user", "content": "Deal."}]


def _prompt_tokens(url: str, messages: list[dict[str, str]]) -> int:
    """The whole prompt's tokens as the server's non-streamed usage counts them (cached or not)."""
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    return httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()["usage"]["prompt_tokens"]


async def _stream_usage(url: str, messages: list[dict[str, str]]) -> Usage:
    client = OpenAICompatClient(url, llama_server=True)
    try:
        async with client.stream_chat(messages, max_tokens=4, temperature=0.0) as stream:
            usages = [delta.usage async for delta in stream if isinstance(delta, UsageDelta)]
    finally:
        await client.aclose()
    # Every chunk carries the prompt's counts; the completion grows to the final count.
    first, last = usages[0], usages[-1]
    assert (first.prompt_tokens, first.cached_tokens) == (last.prompt_tokens, last.cached_tokens)
    assert [u.completion_tokens for u in usages] == sorted(u.completion_tokens for u in usages)
    return last


def test_a_stream_reports_the_prompt_and_the_tokens_reused_from_the_cache(tiny_server_url: str) -> None:
    whole_first, whole_longer = _prompt_tokens(tiny_server_url, FIRST), _prompt_tokens(tiny_server_url, LONGER)
    again = asyncio.run(_stream_usage(tiny_server_url, FIRST))
    assert (again.prompt_tokens, again.cached_tokens) == (whole_first, whole_first - 1)
    assert again.completion_tokens == 4  # max_tokens
    warm = asyncio.run(_stream_usage(tiny_server_url, LONGER))
    assert warm.prompt_tokens == whole_longer
    # The first request's prompt is reused; only the new messages (and the reply tokens that differ) are evaluated.
    assert warm.cached_tokens >= whole_first - 1
    assert warm.prompt_tokens - warm.cached_tokens <= whole_longer - whole_first + again.completion_tokens + 1


def test_a_stream_closed_after_its_first_token_already_carries_the_prompt_counts(tiny_server_url: str) -> None:
    # The runtime closes a stream whose visible reply reached its cap: the final usage chunk never comes.
    whole = _prompt_tokens(tiny_server_url, LONGER)

    async def first_token() -> list[UsageDelta | TextDelta]:
        client = OpenAICompatClient(tiny_server_url, llama_server=True)
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
    usages = [d.usage for d in seen if isinstance(d, UsageDelta)]
    assert usages and isinstance(seen[-1], TextDelta | UsageDelta)
    assert usages[0].prompt_tokens == whole
    assert usages[0].cached_tokens == whole - 1  # the non-streamed request just before left it all in the slot


def test_timings_become_usage_and_a_usage_field_wins() -> None:
    timings = {"prompt_n": 5, "cache_n": 20, "predicted_n": 3, "prompt_ms": 1.0}
    [delta] = parse_chunk({"choices": [], "timings": timings})
    assert delta == UsageDelta(Usage(prompt_tokens=25, completion_tokens=3, cached_tokens=20))
    usage = {"prompt_tokens": 25, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 20}}
    [final] = parse_chunk({"choices": [], "usage": usage, "timings": timings})
    assert final == UsageDelta(Usage(25, 4, 20))
    assert parse_chunk({"choices": [], "timings": {"predicted_ms": 1}}) == []  # no prompt count: no usage
