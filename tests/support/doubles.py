"""Turns on the in-process model doubles (`pyruntime.testing`): one way to build the orchestrator, run and read a turn.

Logic tests (planning, windows, tool loops, repair, cut reports, the writer's gate) build their orchestrator here, so
a change to how the turn engine is constructed touches this module only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from pyruntime.model import ModelClient
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns import AiOrchestrator, AiTaskRequest, FinalEvent, TaskResult, TextDeltaEvent, TurnEvent

T = TypeVar("T")

DOUBLE_CONTEXT_TOKENS = 2048  # as the tiny test model's, so budgets read the same as on the real path


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh event loop."""
    return asyncio.run(coro)


def session_stores() -> StoreBundle:
    """Fresh session-only (in-memory) stores."""
    return open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)


def orchestrator_on(model: ModelClient, stores: StoreBundle | None = None, policy: AgentMemoryPolicy | None = None,
                    **options: Any) -> AiOrchestrator:
    """An orchestrator whose turns call `model` (a double, or a `RecordingModel` around one); `options`: the
    orchestrator's keywords (model context: `DOUBLE_CONTEXT_TOKENS` unless given)."""
    options.setdefault("model_context_tokens", DOUBLE_CONTEXT_TOKENS)
    return AiOrchestrator(policy or AgentMemoryPolicy(), stores or session_stores(), model, **options)


async def stream_events(orchestrator: AiOrchestrator, request: AiTaskRequest) -> list[TurnEvent]:
    """Every event of one streamed turn."""
    return [event async for event in orchestrator.stream_task(request)]


def streamed(orchestrator: AiOrchestrator, request: AiTaskRequest) -> list[TurnEvent]:
    """Every event of one streamed turn, on a fresh event loop."""
    return run(stream_events(orchestrator, request))


def final(events: list[TurnEvent]) -> TaskResult:
    """The result of a streamed turn (its last event must be the final one)."""
    last = events[-1]
    assert isinstance(last, FinalEvent), last
    return last.result


def texts(events: list[TurnEvent]) -> list[str]:
    """The text pieces a streamed turn sent, in order."""
    return [e.text for e in events if isinstance(e, TextDeltaEvent)]


def chat_of(stores: StoreBundle, role: str, scope: AgentMemoryScope = EMPTY_SCOPE) -> list[tuple[str, str]]:
    """(role, text) of each message of a role's chat history."""
    return [(m.role, m.content) for m in stores.scoped(scope).get_chat_history(role)]
