"""Two runtimes on one PostgreSQL database, each with its own turn engine and caches: a conversation that moves
from one to the other and back (its runtime was taken out of the balancer for a while, then returned) is never
answered from stale state. What each runtime's model was sent is the evidence (the in-process model records it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyruntime.app import RuntimeModel
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, FunctionModel
from pyruntime.turns import ToolCallMode
from tests.rpc.conftest import Runtime, start_runtime

ROLE = "SmartChat"  # built in: chat history persisted
PLAYER = AgentMemoryScope("studio", "alex")


def _prompt(request: ChatRequest) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.messages)


@pytest.fixture
def two_runtimes(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Runtime, Runtime, FunctionModel, FunctionModel]]:
    models = (FunctionModel(lambda r: f"reply to: {r.messages[-1]['content']}"),
              FunctionModel(lambda r: f"reply to: {r.messages[-1]['content']}"))
    runtimes = [start_runtime(tmp_path / name, model=RuntimeModel(None, "double", client=model), store=postgres_url,
                              tool_mode=ToolCallMode.NATIVE) for name, model in zip("ab", models, strict=True)]
    yield runtimes[0], runtimes[1], models[0], models[1]
    for runtime in runtimes:
        runtime.handle.stop(1.0)


@pytest.mark.parametrize("transport", ["grpc", "connect"])
def test_a_conversation_back_on_its_first_runtime_sees_what_the_other_stored(two_runtimes, transport: str) -> None:
    a, b, model_a, model_b = two_runtimes
    with a.client(transport) as on_a, b.client(transport) as on_b:
        on_a.run_task("my name is Alex", role_id=ROLE, scope=PLAYER)
        on_b.apply_memory_tool(ROLE, {"action": "append", "content": "Alex likes dark ale"}, scope=PLAYER)
        on_b.run_task("I sailed from Tortuga", role_id=ROLE, scope=PLAYER)
        on_a.apply_memory_tool(ROLE, {"action": "append", "content": "Alex owes 3 gold"}, scope=PLAYER)
        on_a.run_task("what do you know of me?", role_id=ROLE, scope=PLAYER)
        on_b.run_task("and now?", role_id=ROLE, scope=PLAYER)
        history = [m.content for m in on_a.get_chat_history(ROLE, scope=PLAYER)]
    # B's first turn of the conversation: A's turn and B's memory write are in its prompt.
    first_on_b = _prompt(model_b.requests[0])
    assert "my name is Alex" in first_on_b and "reply to: my name is Alex" in first_on_b
    assert "Alex likes dark ale" in first_on_b
    # Back on A: B's turn and the memory as it is now, not as A last saw it.
    back_on_a = _prompt(model_a.requests[-1])
    for seen in ("my name is Alex", "I sailed from Tortuga", "reply to: I sailed from Tortuga",
                 "Alex likes dark ale", "Alex owes 3 gold"):
        assert seen in back_on_a, seen
    last_on_b = _prompt(model_b.requests[-1])
    assert "what do you know of me?" in last_on_b and "Alex owes 3 gold" in last_on_b
    assert history == ["my name is Alex", "reply to: my name is Alex", "I sailed from Tortuga",
                       "reply to: I sailed from Tortuga", "what do you know of me?",
                       "reply to: what do you know of me?", "and now?", "reply to: and now?"]
