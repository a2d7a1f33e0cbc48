"""Deleting conversations from the turn engine: what it keeps of them besides their saves, and the model's states.

A deletion (ClearChatHistory, ClearMemory, ForgetPlayer) stops the conversations' memory writes and prewarms, holds
their gates (their running turns finish first, new ones wait) while the saves are erased (the caller's `clear`),
then drops their staged folds, tail places, block paces and session starts, rewrites the saved places, and has
the model client erase its states of them (slots, parked states: `model/client/slot_moves.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from pyruntime.turns.planning.tail_anchors import conversation_digest

if TYPE_CHECKING:
    from pyruntime.turns.orchestrator import AiOrchestrator

T = TypeVar("T")


async def forget_conversations(engine: AiOrchestrator, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> T:
    """Delete conversations (storage `keys`) wherever `engine` keeps them; `clear` erases their saves. Returns
    `clear`'s result; raises what the model client raised when it could not erase its states (after the rest)."""
    keys = sorted(set(keys))  # one order for every deletion: two never wait for each other's gates
    digests = [conversation_digest(key) for key in keys]
    for key, digest in zip(keys, digests, strict=True):
        await engine.memory_passes.forget(key)
        await engine.prewarms.forget(digest)
    async with contextlib.AsyncExitStack() as held:
        for key in keys:
            await held.enter_async_context(engine.write_gate.write(key))
        result = await clear()
        for digest in digests:
            await engine.prewarms.forget(digest)  # one that a turn ending meanwhile may have started
            engine.staged_folds.forget(digest)
            engine.block_pace.forget(digest)
            engine.session_starts.forget(digest)
        engine.forget_places(digests)
        forget = getattr(engine.client, "forget_conversations", None)
        if forget is not None:
            await forget(digests)
    return result
