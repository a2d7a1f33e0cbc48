"""The in-process model doubles (`pyruntime.testing`): what they stream, return, record and raise.

The parity test sends the same requests to a `ScriptedModel` and, over HTTP, to the scripted server
through the real client: the doubles must answer as the script file does in play-mode tests.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from pyruntime.model.client.errors import ContextOverflowError, ModelError, ModelUnavailableError
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.seam import ModelClient
from pyruntime.model.client.types import (
    ChatCompletionAccumulator,
    FinishDelta,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageDelta,
)
from pyruntime.testing import (
    Answer,
    ChatRequest,
    FunctionModel,
    Script,
    ScriptedCall,
    ScriptedError,
    ScriptedModel,
    scripted_answer,
)
from pyruntime.testing.scripted_server import ScriptedModelServer
from tests.model.test_scripted_model import SCRIPT

MESSAGES = [{"role": "system", "content": "You are BlacksmithNPC."}, {"role": "user", "content": "a sword?"}]
STRUCTURED = {"type": "json_object", "schema": {"type": "object"}}


async def deltas(client: ModelClient, messages: list[dict[str, Any]] = MESSAGES, **kwargs: Any) -> list[StreamDelta]:
    async with client.stream_chat(messages, **kwargs) as stream:
        return [d async for d in stream]


def test_replies_stream_in_order_piece_by_piece_and_the_last_one_repeats() -> None:
    model = ScriptedModel([Answer(("Thirty ", "gold.")), ScriptedCall("roll", {"sides": 6}), "Done here."])

    async def go() -> list[list[StreamDelta]]:
        return [await deltas(model) for _ in range(4)]

    got = asyncio.run(go())
    prompt = (len("You are BlacksmithNPC.") + len("a sword?")) // 4 + 1
    assert got[0] == [TextDelta("Thirty "), TextDelta("gold."), UsageDelta(Usage(prompt, 4)), FinishDelta("stop")]
    assert got[1] == [ToolCallDelta(0, "call_1", "roll", '{"sides": 6}'), UsageDelta(Usage(prompt, 1)),
                      FinishDelta("tool_calls")]
    assert got[2] == got[3] == [TextDelta("Done "), TextDelta("here."), UsageDelta(Usage(prompt, 3)),
                                FinishDelta("stop")]
    assert [r.number for r in model.requests] == [1, 2, 3, 4]
    assert model.requests[0].body == {"messages": MESSAGES, "stream": True}


def test_a_structured_request_gets_the_json_object_and_a_raw_answer_goes_as_it_is() -> None:
    model = ScriptedModel([ScriptedCall("roll", {"sides": 6}), Answer(('{"tool_calls": [',), structured=True)])

    async def go() -> tuple[str, str]:
        first = ChatCompletionAccumulator()
        for delta in await deltas(model, response_format=STRUCTURED):
            first.add(delta)
        second = await model.chat(MESSAGES, response_format=STRUCTURED)
        return first.result().text, second.text

    first, second = asyncio.run(go())
    assert json.loads(first) == {"tool_calls": [{"name": "roll", "arguments": {"sides": 6}}], "reply": ""}
    assert second == '{"tool_calls": ['
    assert model.requests[0].facts.structured and model.requests[0].body["response_format"] == STRUCTURED


def test_a_json_format_of_other_fields_gets_the_reply_as_written() -> None:
    decision = '{"kind": "fact", "topic": "name", "value": "Tobin"}'
    writer = {"type": "json_object", "schema": {"type": "object", "properties": {"kind": {"enum": ["fact"]}}}}
    tool_mode = {"type": "json_object", "schema": {"type": "object", "properties": {"tool_calls": {}, "reply": {}}}}
    model = ScriptedModel([decision, "Hello."])
    assert asyncio.run(model.chat(MESSAGES, response_format=writer)).text == decision
    assert json.loads(asyncio.run(model.chat(MESSAGES, response_format=tool_mode)).text) == {
        "tool_calls": [], "reply": "Hello."}
    assert [r.facts.structured for r in model.requests] == [False, True]


def test_chat_returns_the_whole_reply_with_parsed_tool_calls() -> None:
    model = ScriptedModel([scripted_answer("Rolling.", [ScriptedCall("roll", {"sides": 6}),
                                                       ScriptedCall("roll", {"sides": 20})])])
    completion = asyncio.run(model.chat(MESSAGES, temperature=0.0, max_tokens=40, conversation="c1"))
    assert completion.text == "Rolling." and completion.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.parsed_arguments) for c in completion.tool_calls] == [
        ("call_1", "roll", {"sides": 6}), ("call_2", "roll", {"sides": 20})]
    assert completion.model == "scripted" and completion.usage == Usage(8, 3)
    request = model.requests[0]
    assert (request.conversation, request.body["temperature"], request.body["max_tokens"]) == ("c1", 0.0, 40)


def test_an_error_reply_fails_the_call_as_that_http_status_would() -> None:
    model = ScriptedModel([ScriptedError(400, "request exceeds the available context size"),
                           ScriptedError(503, "loading"), ScriptedError(500, "boom")])

    async def go() -> list[ModelError]:
        errors = []
        for _ in range(3):
            with pytest.raises(ModelError) as caught:
                await deltas(model)
            errors.append(caught.value)
        return errors

    overflow, unavailable, failed = asyncio.run(go())
    assert type(overflow) is ContextOverflowError and type(unavailable) is ModelUnavailableError
    assert type(failed) is ModelError and str(failed) == "model server returned HTTP 500 (500)"


def test_the_gate_and_close_refuse_requests_before_anything_is_sent() -> None:
    restarted = threading.Event()  # the watchdog's state, as the runtime's gate reads it

    def gate() -> None:
        if not restarted.is_set():
            raise ModelUnavailableError("the model is restarting", retry_after_s=2.0)

    model = ScriptedModel(["hi"], gate=gate)
    with pytest.raises(ModelUnavailableError, match="restarting"):
        model.stream_chat(MESSAGES)
    restarted.set()
    assert asyncio.run(model.chat(MESSAGES)).text == "hi"
    asyncio.run(model.aclose())
    with pytest.raises(ModelUnavailableError, match="closed"):
        model.stream_chat(MESSAGES)
    assert len(model.requests) == 1


def test_a_function_model_answers_from_the_request_sync_or_async() -> None:
    seen: list[ChatRequest] = []

    async def echo(request: ChatRequest) -> str:
        seen.append(request)
        await asyncio.sleep(0)
        return f"{request.facts.hint} / {len(request.tools)} tool(s)"

    tools = [{"type": "function", "function": {"name": "roll", "parameters": {"type": "object"}}}]
    assert asyncio.run(FunctionModel(echo).chat(MESSAGES, tools=tools)).text == "a sword? / 1 tool(s)"
    assert seen[0].tools == tools and seen[0].messages == MESSAGES
    calls = FunctionModel(lambda r: ScriptedCall("roll", {"sides": len(r.messages)}))
    assert asyncio.run(calls.chat(MESSAGES)).tool_calls[0].parsed_arguments == {"sides": 2}
    with pytest.raises(TypeError, match="not int"):
        asyncio.run(FunctionModel(lambda r: 3).chat(MESSAGES))  # type: ignore[arg-type, return-value]


def test_a_bad_reply_list_is_refused_when_the_model_is_made() -> None:
    with pytest.raises(ValueError, match="non-empty list"):
        ScriptedModel([])
    with pytest.raises(ValueError, match="non-empty list"):
        ScriptedModel("hello")
    with pytest.raises(TypeError, match="not dict"):
        ScriptedModel(["ok", {"reply": "x"}])  # type: ignore[list-item]


def test_a_script_answers_in_process_as_the_scripted_server_does_over_http() -> None:
    tools = [{"type": "function", "function": {"name": "memory", "parameters": {"type": "object"}}}]
    after_tools = [*MESSAGES, {"role": "tool", "tool_call_id": "call_1", "content": "{}"}]
    requests: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
        (MESSAGES, {"tools": tools}), (after_tools, {}), (MESSAGES, {"response_format": STRUCTURED}),
        ([MESSAGES[0], {"role": "user", "content": "count"}], {})]

    async def answers(client: ModelClient) -> list[list[StreamDelta]]:
        return [await deltas(client, messages, **kwargs) for messages, kwargs in requests]

    async def go() -> tuple[list[list[StreamDelta]], list[list[StreamDelta]]]:
        server = ScriptedModelServer(Script.from_dict(SCRIPT))
        await server.start()
        try:
            async with OpenAICompatClient(server.base_url) as client:
                over_http = await answers(client)
        finally:
            await server.stop()
        return over_http, await answers(ScriptedModel(Script.from_dict(SCRIPT)))

    over_http, in_process = asyncio.run(go())
    assert in_process == over_http
    assert [d for d in in_process[0] if isinstance(d, ToolCallDelta)] == [
        ToolCallDelta(0, "call_1", "memory", '{"action": "append", "content": "Wants a sword"}')]
