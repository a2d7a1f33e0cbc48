"""How many model calls an external engine (`serve --llm-url`) is sent at once, and how a call names its conversation.

A GPU server batches: it decodes many streams together, so the runtime's request queue must let that many
calls through, or every turn waits for the one before it (a capacity of one held a batching server at one
call's duration per turn, ~7 turns/s). Where the engine says what it runs at once it is asked: llama-server
answers `GET /props` with `total_slots` (its `--parallel`). Other servers (vLLM, SGLang, TGI, LM Studio, Ollama)
say nothing comparable, so they get `DEFAULT_EXTERNAL_CONCURRENCY`, enough for a batching GPU server and harmless
for a one-slot one (it queues what it cannot run, first come first served). `serve --llm-concurrency N` wins over
both. The hosted engine is not asked: the runtime started it with its slot count.

Every call made for a conversation's prompt (a turn's rounds, a prewarm) names the conversation for the routers
and prefix caches in front of or inside the engine: the OpenAI `user` field and the `X-CoreAI-Conversation`
header, both the conversation's digest (`turns/tail_anchors.conversation_digest`: a SHA-256 of the storage key,
the same from every runtime, never a player's id or name). vLLM's production-stack router keeps a session on one
engine with `--routing-logic session --session-key x-coreai-conversation` (or `--session-key user`); gateways that
key on `user` do the same.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

log = logging.getLogger("pyruntime.model")

DEFAULT_EXTERNAL_CONCURRENCY = 64
MAX_CONCURRENCY = 4096
CONVERSATION_HEADER = "X-CoreAI-Conversation"
PROPS_TIMEOUT_S = 5.0


def slots_from_props(body: Any) -> int | None:
    """llama-server's `total_slots` from a `/props` body; None when it is not a positive integer."""
    if not isinstance(body, Mapping):
        return None
    slots = body.get("total_slots")
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        return None
    return min(slots, MAX_CONCURRENCY)


def conversation_fields(conversation: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(body fields, headers) that name a conversation to the engine; empty for a call of no conversation."""
    if not conversation:
        return {}, {}
    return {"user": conversation}, {CONVERSATION_HEADER: conversation}


async def engine_concurrency(base_url: str, *, api_key: str | None = None,
                             headers: Mapping[str, str] | None = None) -> int:
    """What an external engine runs at once: llama-server's `/props` total slots, else the default."""
    root = base_url.rstrip("/").removesuffix("/v1")
    sent = dict(headers or {})
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    try:
        async with httpx.AsyncClient(timeout=PROPS_TIMEOUT_S) as http:
            response = await http.get(f"{root}/props", headers=sent)
        slots = slots_from_props(response.json()) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        slots = None
    if slots is None:
        log.info("the model server does not say how many calls it runs at once: sending up to %d "
                 "(--llm-concurrency sets it)", DEFAULT_EXTERNAL_CONCURRENCY)
        return DEFAULT_EXTERNAL_CONCURRENCY
    log.info("the model server runs %d calls at once (its /props): sending up to that many", slots)
    return slots
