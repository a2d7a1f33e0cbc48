"""What each call tells an external engine, and what it costs on the wire: its conversation named for the engine's
router and prefix cache (the OpenAI `user` field and the `X-CoreAI-Conversation` header), and one kept-alive
connection reused across streamed calls (a call that left its body unread after `[DONE]` lost its connection, so
every turn opened a new one)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from pyruntime.model.client.concurrency import slots_from_props
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.types import TextDelta
from pyruntime.testing.engine import LatencyEngine, LatencyEngineServer, LatencyModel
from pyruntime.testing.minimal_http import serve_minimal

FAST = LatencyModel(first_token_s=0.001, tokens=4, token_gap_s=0.001)


async def _text(client: OpenAICompatClient, conversation: str | None = None) -> str:
    pieces = []
    async with client.stream_chat([{"role": "user", "content": "hello"}], conversation=conversation) as stream:
        async for delta in stream:
            if isinstance(delta, TextDelta):
                pieces.append(delta.text)
    return "".join(pieces)


def test_streamed_calls_reuse_one_kept_alive_connection() -> None:
    with LatencyEngineServer(LatencyEngine(FAST)) as engine:
        async def three() -> list[str]:
            async with OpenAICompatClient(engine.base_url, model="m", connections=4) as client:
                return [await _text(client) for _ in range(3)]

        assert asyncio.run(three()) == ["ok ok ok ok"] * 3
        ports = {r.peer_port for r in engine.engine.requests}
    assert len(ports) == 1, ports


def test_a_call_of_a_conversation_names_it_in_the_body_and_a_header_and_others_name_none() -> None:
    with LatencyEngineServer(LatencyEngine(FAST)) as engine:
        async def calls() -> None:
            async with OpenAICompatClient(engine.base_url, model="m") as client:
                await _text(client, conversation="c0ffee")
                await client.chat([{"role": "user", "content": "hi"}], conversation="c0ffee")
                await _text(client)

        asyncio.run(calls())
        named = [(r.user, r.conversation) for r in engine.engine.requests]
    assert named == [("c0ffee", "c0ffee"), ("c0ffee", "c0ffee"), (None, None)]


def test_a_body_left_open_after_done_ends_the_call_whole_and_soon() -> None:
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    done = threading.Event()

    def serve() -> None:  # answers, then never ends the chunked body
        connection, _ = listener.accept()
        connection.recv(65536)
        chunk = hex(len(body))[2:].encode() + b"\r\n" + body + b"\r\n"
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                           + chunk)
        done.wait(10)
        connection.close()

    threading.Thread(target=serve, daemon=True).start()

    async def call() -> str:
        async with OpenAICompatClient(f"http://127.0.0.1:{port}/v1", model="m") as client:
            return await _text(client)

    began = time.monotonic()
    try:
        assert asyncio.run(call()) == "hi"
        assert time.monotonic() - began < 5
    finally:
        done.set()
        listener.close()


def test_props_give_the_slots_only_when_they_are_a_positive_count() -> None:
    assert slots_from_props({"total_slots": 8}) == 8
    bodies: tuple[object, ...] = ({"total_slots": 0}, {"total_slots": True}, {"total_slots": "8"}, [], None, {})
    assert [slots_from_props(b) for b in bodies] == [None] * 6


def test_a_client_used_from_one_event_loop_after_another_keeps_working() -> None:
    # A script that calls asyncio.run per turn: kept-alive connections belong to the loop that opened them.
    with LatencyEngineServer(LatencyEngine(FAST)) as engine:
        client = OpenAICompatClient(engine.base_url, model="m")
        assert [asyncio.run(_text(client)) for _ in range(2)] == ["ok ok ok ok"] * 2
        asyncio.run(client.aclose())


def test_the_minimal_http_server_serves_the_engine_streamed_and_whole_on_one_kept_alive_connection() -> None:
    # What load benchmarks run the test engine on (a fraction of uvicorn's CPU per reply): the same answers.
    engine = LatencyEngine(FAST)

    async def calls() -> tuple[list[str], str]:
        server = await serve_minimal(engine, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with OpenAICompatClient(f"http://127.0.0.1:{port}/v1", connections=4) as client:
                streamed = [await _text(client, conversation="c0ffee") for _ in range(2)]
                whole = await client.chat([{"role": "user", "content": "hi"}])
                assert await client.models() == ["latency-engine"]
            return streamed, whole.text
        finally:
            server.close()

    assert asyncio.run(calls()) == (["ok ok ok ok"] * 2, "ok ok ok ok")
    assert len({r.peer_port for r in engine.requests}) == 1
    assert [(r.user, r.stream) for r in engine.requests] == [("c0ffee", True), ("c0ffee", True), (None, False)]


def test_a_tcp_engine_is_reached_through_the_proxy_the_environment_names_unless_no_proxy_covers_it(monkeypatch) -> None:
    from pyruntime.model.client.pool import env_proxy

    monkeypatch.setenv("HTTP_PROXY", "http://user:secret@proxy.studio.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxy, auth = env_proxy("http://gpu-engine.studio.example:8000/v1")
    assert proxy == "http://proxy.studio.example:3128" and auth is not None and auth.login == "user"
    monkeypatch.setenv("NO_PROXY", "gpu-engine.studio.example")
    assert env_proxy("http://gpu-engine.studio.example:8000/v1") == (None, None)
