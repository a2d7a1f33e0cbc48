"""The scripted model over HTTP: an OpenAI-compatible endpoint (ASGI, uvicorn) answering from a `Script`.

`GET /v1/models`, `POST /v1/chat/completions` (plain or SSE streaming, with native `tool_calls`).
Served like the hosted model port (`public_port.py`): its own thread and loop, the RPC ports'
connection cap and timeouts, loopback Host with our port and no foreign Origin (403), and the
model key (401) when one is set. Transport only: what to answer is `pyruntime.testing.scripted`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.public_port import GuardedPort, ModelPortAuth, read_body
from pyruntime.net.limits import TransportLimits
from pyruntime.testing.scripted import Answer, Script
from pyruntime.testing.scripted_wire import ReplyHeader, chunk_bodies, completion_body, error_body

log = logging.getLogger("pyruntime.model")

MODEL_ID = "scripted"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class ScriptedApp:
    """The ASGI application."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        path = path[3:] if path.startswith("/v1/") else path  # served with and without the /v1 prefix
        if path == "/models" and method == "GET":
            await _json(send, 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model",
                                                                  "owned_by": "coreai"}]})
            return
        if path != "/chat/completions" or method != "POST":
            await _json(send, 404, {"error": {"message": "not found", "code": 404}})
            return
        raw = await read_body(receive)
        if raw is None:
            await _json(send, 413, {"error": {"message": "request body too large", "code": 413}})
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise InvalidArgumentError("the body must be a JSON object")
            answer = self.script.answer(body)
        except (ValueError, InvalidArgumentError) as exc:
            await _json(send, 400, {"error": {"message": f"bad request: {exc}", "code": 400}})
            return
        self.requests += 1
        if answer.first_delay_ms:
            await asyncio.sleep(answer.first_delay_ms / 1000)
        if answer.error is not None:
            await _json(send, answer.error.status, error_body(answer.error))
            return
        reply = ReplyHeader(MODEL_ID, f"scripted-{self.requests}", int(time.time()))
        if body.get("stream"):
            await self._stream(send, body, answer, reply)
        else:
            await _json(send, 200, completion_body(answer, body.get("messages", []), reply))

    async def _stream(self, send: Send, body: dict[str, Any], answer: Answer, reply: ReplyHeader) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for wait, chunk in chunk_bodies(answer, body.get("messages", []), reply):
            if wait:
                await asyncio.sleep(wait)
            await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


class ScriptedModelServer:
    """The scripted model served on `host:port` (0 = any free port), guarded like the model port."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0, *, api_key: str | None = None,
                 limits: TransportLimits = TransportLimits()) -> None:
        """Prepare the endpoint; `api_key` None: requests need no key (tests of the script alone); `limits`: the
        port's connection cap and timeouts."""
        self.app = ScriptedApp(script)
        self.host = host
        self.api_key = api_key
        self._port = GuardedPort(ModelPortAuth(self.app, port=lambda: self._port.port, api_key=api_key), host, port,
                                 limits=limits, name="scripted model port")
        self._started = False

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        return self._port.port

    @property
    def base_url(self) -> str:
        """`http://host:port/v1`, the OpenAI base URL of the endpoint."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address cannot be bound (e.g. the port is taken)."""
        await asyncio.to_thread(self._port.start)
        self._started = True
        log.info("scripted model serving on port %d", self.port)

    async def stop(self) -> None:
        """Stop serving."""
        if self._started:
            self._started = False
            await asyncio.to_thread(self._port.stop)
