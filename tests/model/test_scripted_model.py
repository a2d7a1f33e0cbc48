"""The scripted model: script rules (pure), its OpenAI-compatible endpoint, and a turn through `serve --scripted-model`.

Counted, never timed: delays are scripted but no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import RuntimeClient
from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client.errors import ContextOverflowError
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.types import TextDelta
from pyruntime.net.auth import read_token_file
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from tests.model.test_serve_cli import RPC_ANY_PORT, Serve
from tests.support.loads import loaded

SCRIPT = {
    "rules": [
        {"when": {"system": "Blacksmith", "hint": "(?i)sword"},
         "reply": "Thirty gold for the sword.",
         "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
         "after_tools": "Noted."},
        {"when": {"hint": "^count"}, "reply": ["one", "two"], "pieces": ["o", "n", "e"]},
        {"when": {"hint": "once"}, "reply": "first time", "times": 1},
        {"when": {"hint": "too long"}, "error": {"status": 400, "message": "exceeds the context window"}},
        {"when": {"compaction": True}, "reply": "They haggled."},
    ],
    "default": {"reply": "Hm?"},
}


def user(text: str, system: str = "You are BlacksmithNPC.") -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": text}]}


def test_rules_match_by_system_prompt_hint_and_compaction_in_order() -> None:
    script = Script.from_dict(SCRIPT)
    first = script.answer(user("A SWORD please"))
    assert first.text == "Thirty gold for the sword." and [c.name for c in first.tool_calls] == ["memory"]
    assert script.answer(user("a sword", system="You are the Merchant.")).text == "Hm?"  # system must match
    after = user("a sword")
    after["messages"].append({"role": "tool", "tool_call_id": "call_1", "content": "{}"})
    assert (script.answer(after).text, script.answer(after).tool_calls) == ("Noted.", ())
    assert [script.answer(user("count")).pieces for _ in range(3)] == [("o", "n", "e")] * 3
    assert [script.answer(user("count")).text for _ in range(1)] == ["one"]  # pieces win while scripted
    assert script.answer(user("once")).text == "first time" and script.answer(user("once")).text == "Hm?"
    compaction = {"messages": [{"role": "system", "content": "You are a summarizer."},
                               {"role": "user", "content": "Prior summary:\n(none)\n\nDialogue..."}]}
    assert script.answer(compaction).text == "They haggled."


def test_a_reply_list_is_answered_in_turn_and_its_last_one_repeats() -> None:
    script = Script.from_dict({"rules": [{"when": {"hint": "x"}, "reply": ["a", "b"]}]})
    assert [script.answer(user("x")).text for _ in range(4)] == ["a", "b", "b", "b"]


def test_a_structured_request_gets_the_json_object_that_mode_expects() -> None:
    script = Script.from_dict(SCRIPT)
    body = {**user("sword"), "response_format": {"type": "json_object", "schema": {}}}
    answer = script.answer(body)
    assert answer.tool_calls == ()
    assert json.loads(answer.text) == {
        "tool_calls": [{"name": "memory", "arguments": {"action": "append", "content": "Wants a sword"}}],
        "reply": "Thirty gold for the sword.",
    }


def test_a_request_constrained_to_another_schema_gets_the_reply_as_written() -> None:
    # The memory writer's decision: the script gives the JSON object itself, not a structured reply around it.
    decision = '{"kind": "fact", "topic": "name", "value": "Tobin"}'
    script = Script.from_dict({"rules": [{"when": {"hint": "Tobin"}, "reply": decision}]})
    schema = {"type": "object", "properties": {"kind": {"enum": ["fact", "nothing"]}}}
    answer = script.answer({**user("My name is Tobin."), "response_format": {"type": "json_object", "schema": schema}})
    assert answer.text == decision and not answer.structured


@pytest.mark.parametrize(("script", "names"), [
    ([], "script"),
    ({"rules": [{"reply": 3}]}, "rules[0].reply"),
    ({"rules": [{"when": {"hint": "("}}]}, "rules[0].when.hint"),
    ({"rules": [{"when": {"mood": "x"}}]}, "rules[0].when"),
    ({"rules": [{"tool_calls": [{"arguments": {}}]}]}, "rules[0].tool_calls[0]"),
    ({"rules": [{"error": {"status": 200}}]}, "rules[0].error.status"),
    ({"rules": [{"delay_ms": -1}]}, "rules[0].delay_ms"),
    ({"rules": [{"replies": "x"}]}, "rules[0]"),
])
def test_a_bad_script_is_refused_naming_the_field(script, names: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"^scripted model: {names.replace('[', '.').replace(']', '.')}"):
        Script.from_dict(script)


def test_the_endpoint_streams_pieces_makes_calls_and_fails_as_scripted() -> None:
    async def go() -> None:
        server = ScriptedModelServer(Script.from_dict(SCRIPT))
        await server.start()
        client = OpenAICompatClient(server.base_url)
        try:
            assert await client.models() == ["scripted"]
            async with client.stream_chat(user("count")["messages"]) as stream:
                texts = [d.text async for d in stream if isinstance(d, TextDelta)]
            assert texts == ["o", "n", "e"]
            reply = await client.chat(user("sword")["messages"], tools=[{"type": "function", "function": {
                "name": "memory", "parameters": {"type": "object"}}}])
            assert reply.tool_calls[0].parsed_arguments == {"action": "append", "content": "Wants a sword"}
            with pytest.raises(ContextOverflowError):
                await client.chat(user("too long")["messages"])
            async with httpx.AsyncClient() as raw:
                refused = await raw.post(f"{server.base_url}/chat/completions", json=user("x"),
                                         headers={"Host": f"example.com:{server.port}"})
                assert refused.status_code == 403
                empty = await raw.post(f"{server.base_url}/chat/completions", json={"messages": []})
                assert empty.status_code == 400 and "messages must be a non-empty list" in empty.text
        finally:
            await client.aclose()
            await server.stop()

    asyncio.run(go())


def test_the_scripted_port_takes_the_model_ports_key_and_host_origin_rules() -> None:
    # Without the model port's rules a web page could call the scripted port (a foreign Origin, text/plain).
    async def go() -> None:
        server = ScriptedModelServer(Script.from_dict(SCRIPT), api_key="scripted-key-0123456789")
        await server.start()
        url = f"{server.base_url}/chat/completions"
        key = {"Authorization": "Bearer scripted-key-0123456789"}
        try:
            async with httpx.AsyncClient(timeout=10) as raw:
                page = await raw.post(url, content=json.dumps(user("x")), headers={
                    **key, "Origin": "https://evil.example", "Content-Type": "text/plain"})
                assert page.status_code == 403
                rebound = await raw.post(url, json=user("x"), headers={**key, "Host": f"evil.example:{server.port}"})
                assert rebound.status_code == 403
                wrong_port = await raw.post(url, json=user("x"), headers={**key, "Host": "127.0.0.1:1"})
                assert wrong_port.status_code == 403
                assert (await raw.post(url, json=user("x"))).status_code == 401
                refused = await raw.post(url, json=user("x"), headers={"Authorization": "Bearer nope"})
                assert refused.status_code == 401
                ok = await raw.post(url, json=user("x"), headers={**key, "Origin": f"http://127.0.0.1:{server.port}"})
                assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Hm?"
            client = OpenAICompatClient(server.base_url, api_key="scripted-key-0123456789")
            assert await client.models() == ["scripted"]
            await client.aclose()
        finally:
            await server.stop()

    asyncio.run(go())


def test_the_scripted_port_closes_half_sent_requests_and_evicts_at_its_cap() -> None:
    from pyruntime.net.limits import TransportLimits
    from tests.rpc.test_connection_limits import closed_by_server, connect

    async def go() -> None:
        server = ScriptedModelServer(Script.from_dict(SCRIPT), limits=TransportLimits(
            max_connections=4, request_timeout_s=0.5, idle_timeout_s=0.5))
        await server.start()
        port = server.port
        try:
            half = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            assert await asyncio.to_thread(closed_by_server, connect(port, half))  # the partial-request timeout
            assert await asyncio.to_thread(closed_by_server, connect(port))  # the idle timeout
            oldest = connect(port, half)
            others = [connect(port) for _ in range(3)]
            await asyncio.sleep(0.1)
            async with httpx.AsyncClient(timeout=10) as raw:
                assert (await raw.get(f"{server.base_url}/models")).status_code == 200  # room made for it
            assert await asyncio.to_thread(closed_by_server, oldest, 0.25)  # evicted before its own deadline
            for sock in others:
                sock.close()
        finally:
            await server.stop()

    asyncio.run(go())


def test_a_turn_through_serve_with_a_scripted_model(tmp_path: Path) -> None:
    script = tmp_path / "npc.json"
    script.write_text(json.dumps(SCRIPT))
    serve = Serve(tmp_path, "--scripted-model", str(script), "--port", "0", "--data-dir", str(tmp_path / "data"),
                  *RPC_ANY_PORT)
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        # The scripted port wants the model key like the hosted one (model_key_file, 0600).
        model_key = read_token_file(Path(ready["model_key_file"]))
        assert httpx.get(f"{ready['model_url']}/models", timeout=10).status_code == 401
        assert httpx.get(f"{ready['model_url']}/models", timeout=10,
                         headers={"Authorization": f"Bearer {model_key}"}).status_code == 200
        with RuntimeClient(f"http://127.0.0.1:{ready['connect_port']}", token=token, timeout=60) as client:
            assert client.health().model == "scripted"
            turn = client.run_task("I want a sword", role_id="BlacksmithNPC")
            assert turn.status == pb.TURN_STATUS_OK
            assert turn.text.startswith("Thirty gold for the sword.")
            assert loaded(client.load_state("BlacksmithNPC")).memory == "Wants a sword"
            again = client.run_task("hello", role_id="BlacksmithNPC")
            assert (again.status, again.text) == (pb.TURN_STATUS_OK, "Hm?")
    finally:
        rc = serve.stop()
    assert rc == 0


def test_serve_refuses_a_bad_script_with_a_usage_error(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"rules": [{"when": {"hint": "("}}]}')
    serve = Serve(tmp_path, "--scripted-model", str(script), "--session-only", *RPC_ANY_PORT)
    assert serve.wait() == 2
    assert "scripted model: rules[0].when.hint: is not a valid regular expression" in serve.err
