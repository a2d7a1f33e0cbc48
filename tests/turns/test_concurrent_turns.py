"""Concurrent turns keep their model calls together: no other turn's call between two rounds of one turn.

Against the scripted model server (real HTTP), each turn makes a memory-tool round and a reply round.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns import AiTaskRequest, build_orchestrator

SCRIPT = {
    "rules": [{"when": {"hint": "(?i)sword"}, "reply": "Thirty gold.", "delay_ms": 30,
               "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
               "after_tools": "Noted."}],
    "default": {"reply": "Hm?"},
}


class TaskNamingClient(OpenAICompatClient):
    """The real client; it also notes which task asked for each streamed reply (each turn runs in a task named
    after its player)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []

    def stream_chat(self, messages: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        self.calls.append(task.get_name() if task is not None else "")
        return super().stream_chat(messages, **kwargs)


def test_four_concurrent_tool_turns_reach_the_model_one_turn_after_the_other() -> None:
    async def go() -> tuple[list[str], list[str]]:
        server = ScriptedModelServer(Script.from_dict(SCRIPT))
        await server.start()
        client = TaskNamingClient(server.base_url)
        orchestrator = build_orchestrator(base_url=server.base_url, client=client,
                                          stores=open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None))

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
        return client.calls, texts

    calls, texts = asyncio.run(asyncio.wait_for(go(), 60))
    assert all(text.endswith("Noted.") for text in texts)
    assert len(calls) == 8  # a tool round and a reply round each
    assert calls == [p for p in ("p1", "p2", "p3", "p4") for _ in range(2)], calls
