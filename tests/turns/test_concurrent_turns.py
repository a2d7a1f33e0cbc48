"""Concurrent turns keep their model calls together (issue 13): no other turn's call between two rounds of one turn.

Against the scripted model server (real HTTP), each turn makes a memory-tool round and a reply round.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pyruntime.model.scripted import Script
from pyruntime.model.scripted_server import ScriptedModelServer
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, build_orchestrator

SCRIPT = {
    "rules": [{"when": {"hint": "(?i)sword"}, "reply": "Thirty gold.", "delay_ms": 30,
               "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
               "after_tools": "Noted."}],
    "default": {"reply": "Hm?"},
}


def test_four_concurrent_tool_turns_reach_the_model_one_turn_after_the_other() -> None:
    async def go() -> tuple[list[str], list[str]]:
        server = ScriptedModelServer(Script.from_dict(SCRIPT))
        await server.start()
        orchestrator = build_orchestrator(base_url=server.base_url,
                                          stores=open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None))
        calls: list[str] = []
        real_stream = orchestrator.client.stream_chat

        @contextlib.asynccontextmanager
        async def spy(messages: list[dict[str, Any]], **kwargs: Any) -> AsyncIterator[Any]:
            calls.append(asyncio.current_task().get_name())  # each turn runs in a task named after its player
            async with real_stream(messages, **kwargs) as stream:
                yield stream

        orchestrator.client.stream_chat = spy  # type: ignore[method-assign]

        async def turn(player: str) -> str:
            request = AiTaskRequest(hint="I want a sword", role_id="BlacksmithNPC",
                                    scope=AgentMemoryScope(user_id=player))
            return (await orchestrator.run_task(request)).text

        try:
            tasks = [asyncio.create_task(turn(p), name=p) for p in ("p1", "p2", "p3", "p4")]
            texts = await asyncio.gather(*tasks)
        finally:
            await orchestrator.client.aclose()
            await server.stop()
        return calls, texts

    calls, texts = asyncio.run(asyncio.wait_for(go(), 60))
    assert all(text.endswith("Noted.") for text in texts)
    assert len(calls) == 8  # a tool round and a reply round each
    assert calls == [p for p in ("p1", "p2", "p3", "p4") for _ in range(2)], calls
