"""The prewarm tests' session: one smith, three facts in memory, a small window that compacts every second turn.

The same session runs on the model doubles (what is sent and decided, exactly) and on the tiny llama-server (what the
engine then evaluates); the turns must send and store the same bytes with the prewarm on and off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pyruntime.memory import MemoryTool
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, RecordingModel
from pyruntime.turns import AiTaskRequest, TaskResult
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from tests.support.doubles import orchestrator_on, run, session_stores

PLAYER = AgentMemoryScope(user_id="player1")
WINDOW = 4  # compaction on every second turn past the window (hysteresis folds down to 2 messages)
HINTS = ["Good morning, smith!", "Have you heard news from the road?", "What would you charge for a sword?",
         "Tell me about this town.", "Do you remember my name?", "Any work for me?", "Will it rain?",
         "I will be back later."]


def is_prewarm(request: ChatRequest) -> bool:
    """A prewarm: streamed like a turn (for its usage), one token."""
    return request.max_tokens == PREWARM_MAX_TOKENS


def is_summarizer(request: ChatRequest) -> bool:
    """The summarizer's call of an LLM fold: its instructions, then the dialogue to fold."""
    return request.roles == ["system", "user"] and request.last_text.startswith("Prior summary:")


def is_turn(request: ChatRequest) -> bool:
    """A player's turn (the writer pass is not streamed)."""
    return request.streamed and not is_prewarm(request) and not is_summarizer(request)


def kind(request: ChatRequest) -> str:
    """"turn", "prewarm", "summarizer" or "writer"."""
    if is_turn(request):
        return "turn"
    return "prewarm" if is_prewarm(request) else "summarizer" if is_summarizer(request) else "writer"


def smith_policy(*, use_memory_tool: bool = True) -> AgentMemoryPolicy:
    """The smith: the memory tool (unless told), a chat history window of `WINDOW` messages, short replies at
    temperature 0."""
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, the village blacksmith. Answer briefly.",
                          max_chat_history_messages=WINDOW, with_chat_history=True, use_memory_tool=use_memory_tool,
                          max_output_tokens=8, temperature=0.0)
    return policy


def played(model: RecordingModel, play: Callable[[], Awaitable[list[TaskResult]]]) -> list[TaskResult]:
    """`play()`'s turns, the model closed after them; every turn must have ended OK."""
    async def go() -> list[TaskResult]:
        try:
            return await play()
        finally:
            await model.aclose()

    results = run(go())
    assert all(r.ok for r in results), [(i, r.status, r.error) for i, r in enumerate(results) if not r.ok]
    return results


def smith_session(model: RecordingModel, *, prewarm: bool, turns: int = len(HINTS),
                  scopes: tuple[AgentMemoryScope, ...] = (PLAYER,), **options: Any) -> dict[str, Any]:
    """One NPC's session on `model`, each turn after the previous turn's prewarm finished (the player read the reply);
    with several `scopes` (players), each hint is taken by each of them in turn. The model is closed after."""
    stores = session_stores()
    tool = MemoryTool(stores.memory, stores.scoped(PLAYER).key("Smith"))
    for fact in ("The player's name is Alex.", "The player owes 30 gold.", "The player fears spiders."):
        assert tool.execute({"action": "append", "content": fact}).success
    orchestrator = orchestrator_on(model, stores, smith_policy(), prewarm=prewarm, **options)

    async def play() -> list[TaskResult]:
        results = []
        for hint in HINTS[:turns]:
            for scope in scopes:
                results.append(await orchestrator.run_task(
                    AiTaskRequest(hint, "Smith", scope=scope, forced_tool_mode="none", extra={"seed": 0})))
                await orchestrator.prewarms.drain()
        return results

    results = played(model, play)
    scoped = stores.scoped(PLAYER)
    return {
        "results": results,
        "turns": model.where(is_turn),
        "prewarms": model.where(is_prewarm),
        "history": [(m.role, m.content) for m in scoped.get_chat_history("Smith")],
        "summary": scoped.load_summary("Smith"),
        "stats": orchestrator.prewarms.stats,
    }


def writer_session(model: RecordingModel, *, prewarm: bool) -> tuple[list[TaskResult], Any]:
    """Two turns with the memory writer pass after each; the next turn waits for both background requests."""
    orchestrator = orchestrator_on(model, None, smith_policy(), prewarm=prewarm, memory_design="writer")

    async def play() -> list[TaskResult]:
        results = []
        for hint in ("My name is Alex and I love horses.", "What do you sell?"):
            results.append(await orchestrator.run_task(
                AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none")))
            await orchestrator.memory_passes.drain()
            await orchestrator.prewarms.drain()
        return results

    results = played(model, play)
    return results, orchestrator.prewarms.stats
