"""The one wiring (`pyruntime.app.Runtime`) with an in-process model double: what serve builds, what the chat builds
(no RPC ports, its role registered first), and what is handed in at construction rather than patched in later."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pyruntime.app import Runtime, RuntimeModel, RuntimeSettings
from pyruntime.client import RuntimeCallError
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.service import StatusCode
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.testing import ScriptedModel
from pyruntime.turns import AiTaskRequest, TaskResult, ToolCallMode
from tests.rpc.conftest import TRANSPORTS, start_runtime

PLAYER = AgentMemoryScope(user_id="p1")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_runtime_with_an_in_process_model_serves_its_turns_over_the_transport(tmp_path: Path,
                                                                                  transport: str) -> None:
    model = ScriptedModel(["Well met, traveller."])
    runtime = start_runtime(tmp_path / "data", model=RuntimeModel(None, "npc-double", client=model),
                            tool_mode=ToolCallMode.NATIVE)
    try:
        with runtime.client(transport) as client:
            health = client.health()
            result = client.run_task("hello", role_id="PlainChat", scope=PLAYER)
    finally:
        runtime.handle.stop(1.0)
    assert (health.ready, health.model_ready, health.model) == (True, True, "npc-double")
    assert result.text == "Well met, traveller."
    assert len(model.requests) == 1 and model.requests[0].messages[-1] == {"role": "user", "content": "hello"}
    assert model.closed  # the runtime's stop closed the client it was given
    history = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path / "data").scoped(PLAYER)
    assert [(m.role, m.content) for m in history.get_chat_history("PlainChat")] == [
        ("user", "hello"), ("assistant", "Well met, traveller.")]


def test_the_chat_s_runtime_opens_no_port_and_runs_its_role_and_timeout_as_given(tmp_path: Path) -> None:
    role = AgentMemoryPolicy().configure_role("Bram", system_prompt="You are Bram.", max_output_tokens=7)
    model = ScriptedModel(["Aye."])
    settings = RuntimeSettings(data_dir=tmp_path, rpc=False, roles=(role,), turn_timeout=42.0,
                               tool_mode=ToolCallMode.NATIVE)

    async def go() -> tuple[Runtime, dict[str, object], TaskResult]:
        async with Runtime(settings, model=RuntimeModel(None, "double", client=model)) as runtime:
            ready = await runtime.start()
            assert runtime.orchestrator is not None
            result = await runtime.orchestrator.run_task(AiTaskRequest("hi", "Bram"))
            return runtime, ready, result

    runtime, ready, result = asyncio.run(go())
    assert ready == {"model_url": None} and runtime.servers is None  # no RPC ports, no token file
    assert not (tmp_path / "CoreAI" / "runtime").exists()
    assert result.text == "Aye."
    assert runtime.orchestrator is not None and runtime.orchestrator.settings.default_timeout == 42.0
    assert runtime.orchestrator.policy.get("Bram") == role
    assert "You are Bram." in model.requests[0].messages[0]["content"]  # the registered role's prompt was sent
    assert model.closed


def test_a_runtime_without_a_model_serves_the_stores_and_refuses_turns(tmp_path: Path) -> None:
    runtime = start_runtime(tmp_path / "data")
    try:
        with runtime.client("connect") as client:
            health = client.health()
            with pytest.raises(RuntimeCallError) as refused:
                client.run_task("hello", role_id="PlainChat")
    finally:
        runtime.handle.stop(1.0)
    assert (health.ready, health.model_ready, health.model_state) == (True, False, "none")
    assert refused.value.code is StatusCode.UNAVAILABLE
    assert (tmp_path / "data" / "CoreAI" / "runtime" / "token").is_file()  # serve's token file, as serve writes it
