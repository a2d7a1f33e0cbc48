"""The scripted model over HTTP: an OpenAI-compatible endpoint (ASGI, uvicorn) answering from a `Script`.

`GET /v1/models`, `POST /v1/chat/completions` (plain or SSE streaming, with native `tool_calls`).
Loopback only: a request whose Host is not loopback is refused (403). Transport only: what to
answer is `pyruntime.model.scripted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.scripted import Answer, Script

log = logging.getLogger("pyruntime.model")

MODEL_ID = "scripted"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_MAX_BODY = 16 * 1024 * 1024

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _host_name(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name.lower() == b"host":
            host = value.decode("latin-1")
            if host.startswith("["):
                return host[: host.find("]") + 1]
            return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return ""


async def _json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _calls(answer: Answer) -> list[dict[str, Any]]:
    return [{"id": f"call_{i + 1}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for i, c in enumerate(answer.tool_calls)]


def _usage(body: dict[str, Any], answer: Answer) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 1
    completion = len(answer.text) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


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
        if _host_name(scope.get("headers", [])) not in _LOOPBACK:
            await _json(send, 403, {"error": {"message": "only loopback hosts are served", "code": 403}})
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
        raw = bytearray()
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if len(raw) > _MAX_BODY:
                await _json(send, 413, {"error": {"message": "request body too large", "code": 413}})
                return
            if not message.get("more_body"):
                break
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
            await _json(send, answer.error.status, {"error": {"message": answer.error.message,
                                                              "code": answer.error.status}})
            return
        if body.get("stream"):
            await self._stream(send, body, answer)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": answer.text}
            if answer.tool_calls:
                message["tool_calls"] = _calls(answer)
            await _json(send, 200, {
                "id": f"scripted-{self.requests}", "object": "chat.completion", "created": int(time.time()),
                "model": MODEL_ID, "usage": _usage(body, answer),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if answer.tool_calls else "stop"}],
            })

    async def _stream(self, send: Send, body: dict[str, Any], answer: Answer) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        base = {"id": f"scripted-{self.requests}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": MODEL_ID}

        async def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                        "more_body": True})

        await event({"role": "assistant"})
        for index, piece in enumerate(answer.pieces):
            if index and answer.delay_ms:
                await asyncio.sleep(answer.delay_ms / 1000)
            if piece:
                await event({"content": piece})
        if answer.tool_calls:
            await event({"tool_calls": [{"index": i, **c} for i, c in enumerate(_calls(answer))]})
        await event({}, "tool_calls" if answer.tool_calls else "stop", usage=_usage(body, answer))
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: the host process decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ScriptedModelServer:
    """The scripted model served on `host:port` (0 = any free port) inside the running event loop."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = ScriptedApp(script)
        self.host = host
        self._port = port
        self._server = _Uvicorn(uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off"))
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        return self._socket.getsockname()[1] if self._socket is not None else self._port

    @property
    def base_url(self) -> str:
        """`http://host:port/v1`, the OpenAI base URL of the endpoint."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address cannot be bound (e.g. the port is taken)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host.strip("[]"), self._port))
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                raise OSError("the scripted model server did not start")
            await asyncio.sleep(0.01)
        log.info("scripted model serving on port %d", self.port)

    async def stop(self) -> None:
        """Stop serving."""
        if self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._socket is not None:
            self._socket.close()
