"""Game tools over both transports: a real `serve --scripted-model` child, the Python client's tool handlers.

The scripted model forces exact calls; the Python client runs the handlers and answers with
SubmitToolResult. Round trip (sync and async clients), a handler that raises, RunTask refused, a
result for an unknown / answered / ended call, and a client that disconnects mid-call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import AsyncRuntimeClient, ClientTool, RuntimeCallError, RuntimeClient
from pyruntime.client.errors import RuntimeInvalidArgumentError, RuntimeNotFoundError
from pyruntime.service.status import StatusCode
from pyruntime.stores import TranscriptKind
from tests.rpc.conftest import TOKEN, TRANSPORTS, RuntimeProcess, spawn_runtime

ROLE = "BlacksmithNPC"
SCRIPT = {
    "rules": [
        {"when": {"hint": "(?i)buy"}, "reply": "One moment.",
         "tool_calls": [{"name": "give_item", "arguments": {"item": "sword"}}], "after_tools": "Here you go."},
        {"when": {"hint": "(?i)anvil"}, "reply": "Hm.",
         "tool_calls": [{"name": "give_item", "arguments": {"item": "anvil"}}], "after_tools": "Sorry."},
    ],
    "default": {"reply": "Hm?"},
}
GIVE_SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


class Inventory:
    """The game's side: hands items over, refuses an anvil by raising."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def give(self, args: dict[str, Any]) -> dict[str, Any]:
        if args["item"] == "anvil":
            raise RuntimeError("the anvil is bolted to the floor")
        self.given.append(args["item"])
        return {"given": args["item"]}

    def tool(self) -> ClientTool:
        return ClientTool("give_item", "Hand an item to the player.", GIVE_SCHEMA, self.give)


@pytest.fixture(scope="module", params=["native", "structured"])
def scripted_runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[RuntimeProcess]:
    """A runtime child serving the scripted model in one tool-call mode."""
    root = tmp_path_factory.mktemp("client-tools")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    runtime = spawn_runtime(root / "data", model=("--scripted-model", str(script), "--port", "0",
                                                  "--tool-mode", str(request.param)))
    yield runtime
    runtime.terminate()


def url(runtime: RuntimeProcess, transport: str) -> str:
    return f"grpc://127.0.0.1:{runtime.grpc_port}" if transport == "grpc" else \
        f"http://127.0.0.1:{runtime.connect_port}"


@pytest.fixture(params=TRANSPORTS)
def client(request: pytest.FixtureRequest, scripted_runtime: RuntimeProcess) -> Iterator[RuntimeClient]:
    with RuntimeClient(url(scripted_runtime, str(request.param)), token=TOKEN, timeout=120) as c:
        yield c


def test_round_trip_runs_the_handler_and_the_model_gets_its_result(client: RuntimeClient) -> None:
    inventory = Inventory()
    user = f"u-{time.monotonic_ns()}"
    from pyruntime.scopes import AgentMemoryScope
    scope = AgentMemoryScope(user_id=user)
    events = list(client.stream_task_with_tools("I'll buy the sword", [inventory.tool()], role_id=ROLE, scope=scope))
    final = events[-1].final
    assert final.status == pb.TURN_STATUS_OK and final.text.endswith("Here you go.")
    asked = [e.client_tool_call for e in events if e.HasField("client_tool_call")]
    assert [(c.name, json.loads(c.arguments_json)) for c in asked] == [("give_item", {"item": "sword"})]
    assert inventory.given == ["sword"]
    results = [e.tool_result for e in events if e.HasField("tool_result")]
    assert [(r.call_id, r.success, r.content) for r in results] == [(asked[0].call_id, True, '{"given": "sword"}')]
    rows = client.get_transcript(ROLE, scope=scope)
    assert [r.kind for r in rows] == [TranscriptKind.USER, TranscriptKind.TOOL_CALL, TranscriptKind.TOOL_RESULT,
                                      TranscriptKind.USER, TranscriptKind.ASSISTANT]
    # A second result for the answered call: ALREADY_EXISTS; an unknown call: NOT_FOUND.
    with pytest.raises(RuntimeCallError) as again:
        client.submit_tool_result(asked[0].turn_id, asked[0].call_id, True, "twice")
    assert again.value.code is StatusCode.ALREADY_EXISTS
    with pytest.raises(RuntimeNotFoundError):
        client.submit_tool_result(asked[0].turn_id, "call_404", True, "x")


def test_a_handler_that_raises_is_a_failed_result_the_model_sees(client: RuntimeClient) -> None:
    events = list(client.stream_task_with_tools("give me the anvil", [Inventory().tool()], role_id=ROLE))
    results = [e.tool_result for e in events if e.HasField("tool_result")]
    assert [(r.success, r.content) for r in results] == [
        (False, "tool 'give_item' failed: RuntimeError: the anvil is bolted to the floor")]
    assert events[-1].final.status == pb.TURN_STATUS_OK and events[-1].final.text.endswith("Sorry.")


def test_an_async_handler_on_the_blocking_client_is_a_failed_result_naming_the_fix(client: RuntimeClient) -> None:
    async def give(args: dict[str, Any]) -> str:
        return "never run"

    tool = ClientTool("give_item", "Hand an item to the player.", GIVE_SCHEMA, give)
    events = list(client.stream_task_with_tools("I'll buy the sword", [tool], role_id=ROLE))
    results = [e.tool_result for e in events if e.HasField("tool_result")]
    assert [(r.success, r.content) for r in results] == [
        (False, "tool 'give_item' failed: its handler is async; use AsyncRuntimeClient")]
    assert events[-1].final.status == pb.TURN_STATUS_OK


def test_run_task_with_client_tools_is_refused(client: RuntimeClient) -> None:
    request_tools = [pb.ClientToolDefinition(name="give_item", description="Hand over.",
                                             parameters_json_schema=json.dumps(GIVE_SCHEMA))]
    with pytest.raises(RuntimeInvalidArgumentError, match="StreamTask"):
        client.run_task("buy", role_id=ROLE, client_tools=request_tools)
    with pytest.raises(RuntimeInvalidArgumentError, match="collides with the runtime's 'memory' tool"):
        list(client.stream_task_with_tools("buy", [ClientTool("memory", "Mine.")], role_id=ROLE))


def test_a_client_that_disconnects_mid_call_ends_the_turn(client: RuntimeClient) -> None:
    from pyruntime.scopes import AgentMemoryScope
    scope = AgentMemoryScope(user_id=f"gone-{time.monotonic_ns()}")
    stream = client.stream_task("I'll buy the sword", role_id=ROLE, scope=scope,
                                client_tools=[Inventory().tool().definition()])
    call = next(e.client_tool_call for e in stream if e.HasField("client_tool_call"))
    stream.close()  # the game went away while the turn waits for it
    # The cancelled turn records the hint alone; bounded wait for that, then the call is over.
    for _ in range(400):
        rows = client.get_transcript(ROLE, scope=scope)
        if rows:
            break
        time.sleep(0.05)
    assert [r.kind for r in rows] == [TranscriptKind.USER]
    with pytest.raises(RuntimeCallError) as late:
        client.submit_tool_result(call.turn_id, call.call_id, True, "too late")
    assert late.value.code is StatusCode.FAILED_PRECONDITION


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_client_with_an_async_handler(scripted_runtime: RuntimeProcess, transport: str) -> None:
    given: list[str] = []

    async def give(args: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        given.append(args["item"])
        return "handed over"

    async def go() -> list[pb.TurnEvent]:
        async with AsyncRuntimeClient(url(scripted_runtime, transport), token=TOKEN, timeout=120) as client:
            tool = ClientTool("give_item", "Hand an item to the player.", GIVE_SCHEMA, give)
            return [e async for e in client.stream_task_with_tools("buy it", [tool], role_id=ROLE)]

    events = asyncio.run(go())
    assert given == ["sword"]
    assert [(e.tool_result.success, e.tool_result.content) for e in events if e.HasField("tool_result")] == [
        (True, "handed over")]
    assert events[-1].final.status == pb.TURN_STATUS_OK


def test_a_tool_from_a_pydantic_model_gets_an_instance(client: RuntimeClient) -> None:
    from pydantic import BaseModel

    class Give(BaseModel):
        item: str

    given: list[Give] = []

    def give(item: Give) -> str:
        given.append(item)
        return "ok"

    tool = ClientTool.from_model("give_item", "Hand an item to the player.", Give, give)
    assert json.loads(tool.definition().parameters_json_schema) == {
        "type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"],
        "additionalProperties": False}
    events = list(client.stream_task_with_tools("buy one", [tool], role_id=ROLE))
    assert given == [Give(item="sword")] and events[-1].final.status == pb.TURN_STATUS_OK
