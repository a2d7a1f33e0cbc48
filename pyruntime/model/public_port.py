"""The model port (127.0.0.1:13333) that external OpenAI clients use, guarded like the RPC ports.

The hosted engine itself listens where only the runtime reaches it (`hosting.LlamaServerProcess`);
this port is our own small HTTP server in front of it, on its own thread and event loop, so a flood
here neither reaches llama-server nor slows the RPC ports:

- the connection cap, the idle and partial-request timeouts and the rate-limited accept errors of the
  RPC ports (`net/http_guard.py`, `net/limits.py`): half-open connections are evicted, never held;
- the same Host/Origin rules (DNS rebinding, web pages) and the bearer key (`net/auth.py`);
- only the OpenAI endpoints and health are forwarded (never slot saves, props or the web UI), with at
  most `MAX_FORWARDED` requests in flight; a client that disconnects cancels its upstream request,
  which stops the generation.

`ModelPortAuth` is also the scripted model's guard (`scripted_server.py`): one set of rules per port kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import httpx

from pyruntime.net.auth import bearer_matches, host_header_allowed, origin_allowed
from pyruntime.net.http_guard import ConnectionGuard
from pyruntime.net.limits import (
    AcceptErrorHandler,
    RateLimitedLogFilter,
    TransportLimits,
    raise_open_files_limit,
)
from pyruntime.net.listener import GuardedUvicorn, bind_listener, guarded_uvicorn

log = logging.getLogger("pyruntime.model")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_FORWARDED = 32  # requests forwarded at once; more answer 503 (their upstream handles come out of RESERVED_FILES)
FORWARDED = frozenset({
    ("GET", "/v1/models"), ("GET", "/models"), ("GET", "/health"), ("GET", "/v1/health"),
    ("POST", "/v1/chat/completions"), ("POST", "/chat/completions"),
    ("POST", "/v1/completions"), ("POST", "/completions"),
    ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/apply-template"),
    ("POST", "/v1/embeddings"), ("POST", "/embeddings"),
})
_RESPONSE_HEADERS = (b"content-type", b"cache-control")
# A kept-alive upstream connection the engine closed between two requests fails the next one before any answer:
# "disconnected without a response" if the close was seen, else a reset on the read or a broken pipe on the write.
# Nothing was generated then; one retry on a new connection is safe.
RETRIED_ONCE = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request headers (latin-1, lower-case names); a repeated header keeps its first value."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


async def send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    """An OpenAI-style JSON answer."""
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def error_body(message: str, kind: str, code: str | int) -> dict[str, Any]:
    """`{"error": {...}}` as OpenAI clients parse it."""
    return {"error": {"message": message, "type": kind, "code": code}}


async def read_body(receive: Receive, limit: int = MAX_BODY_BYTES) -> bytes | None:
    """The whole request body, or None when it is larger than `limit` or the client left."""
    raw = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        raw += message.get("body", b"")
        if len(raw) > limit:
            return None
        if not message.get("more_body"):
            return bytes(raw)


class ModelPortAuth:
    """ASGI middleware: loopback Host with our port, no foreign Origin (403), the bearer key (401), no websockets."""

    def __init__(self, app: ASGIApp, *, port: Callable[[], int], api_key: str | None) -> None:
        """Guard `app`; `port()` is the bound port (Host must name it); `api_key` None: no key (tests only)."""
        self.app = app
        self.port = port
        self.api_key = api_key

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = _headers(scope)
        if not host_header_allowed(headers.get("host"), self.port()) or not origin_allowed(headers.get("origin")):
            await send_json(send, 403, error_body("foreign Host or Origin refused", "forbidden", "forbidden"))
            return
        if self.api_key is not None and not bearer_matches(headers.get("authorization"), self.api_key):
            await send_json(send, 401, error_body("missing or wrong API key", "unauthorized", "invalid_api_key"))
            return
        await self.app(scope, receive, send)


class EngineProxy:
    """ASGI app: the allowed OpenAI requests forwarded to the engine, streamed back as they come."""

    def __init__(self, connect: Callable[[], httpx.AsyncClient],
                 upstream_headers: Callable[[], dict[str, str]]) -> None:
        """Forward over the client `connect()` makes (its base URL is the engine's root; made on the port's own
        loop at the first request), with `upstream_headers()` (the engine's key)."""
        self._connect = connect
        self._http: httpx.AsyncClient | None = None
        self.upstream_headers = upstream_headers
        self._slots = asyncio.Semaphore(MAX_FORWARDED)

    @property
    def http(self) -> httpx.AsyncClient:
        """The client to the engine (made on first use, inside the port's loop)."""
        if self._http is None:
            self._http = self._connect()
        return self._http

    async def aclose(self) -> None:
        """Close the client to the engine (on the port's loop, as it stops)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if (method, path) not in FORWARDED:
            await send_json(send, 404, error_body("not found", "not_found_error", 404))
            return
        body = await read_body(receive) if method == "POST" else b""
        if body is None:
            await send_json(send, 413, error_body("request body too large", "invalid_request_error", 413))
            return
        if self._slots.locked():
            await send_json(send, 503, error_body("too many requests in flight", "unavailable_error", 503))
            return
        async with self._slots:
            forwarding = asyncio.ensure_future(self._forward(scope, body, send))
            watching = asyncio.ensure_future(_until_disconnect(receive))
            try:
                await asyncio.wait({forwarding, watching}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (forwarding, watching):
                    task.cancel()  # a client that left: closing the upstream stream stops the generation
                for task in (forwarding, watching):
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            if forwarding.done() and not forwarding.cancelled() and forwarding.exception() is not None:
                log.debug("forwarding to the engine failed (%s)", type(forwarding.exception()).__name__)

    def _request(self, scope: dict[str, Any], target: str, body: bytes, headers: dict[str, str]) -> httpx.Request:
        return self.http.build_request(scope["method"], target, content=body, headers=headers)

    async def _forward(self, scope: dict[str, Any], body: bytes, send: Send) -> None:
        headers = self.upstream_headers()
        if body:
            headers["content-type"] = "application/json"
        target = scope["path"] + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else "")
        started = False
        try:
            try:
                response = await self.http.send(self._request(scope, target, body, headers), stream=True)
            except RETRIED_ONCE:  # a kept-alive upstream connection closed before answering: nothing was generated
                response = await self.http.send(self._request(scope, target, body, headers), stream=True)
        except httpx.HTTPError:
            await send_json(send, 503, error_body("the model server is not answering", "unavailable_error", 503))
            return
        try:
            kept = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()
                    if name.lower().encode("latin-1") in _RESPONSE_HEADERS]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            started = True
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError:
            if not started:
                await send_json(send, 503, error_body("the model server broke off", "unavailable_error", 503))
            # Started: ending the response without its last chunk tells the client the stream was cut.
        finally:
            await response.aclose()


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


@dataclass
class PortStats:
    """What the port saw (for tests and Health): connections open now, accept errors."""

    accept_errors: int = 0


class GuardedPort:
    """An ASGI app served on host:port under the RPC ports' connection bounds, on its own thread and loop."""

    def __init__(self, app: ASGIApp, host: str, port: int, *, limits: TransportLimits = TransportLimits(),
                 name: str = "model port", on_stop: Callable[[], Awaitable[None]] | None = None) -> None:
        """Prepare (not start) the port; `port` 0 picks a free one; `on_stop` runs on the port's loop last."""
        self.app: Final = app
        """The ASGI app served."""
        self.host: Final = host
        """The address the port binds."""
        self.limits: Final = limits
        """The connection bounds (the RPC ports' `TransportLimits`)."""
        self.name: Final = name
        """What logs and errors call the port."""
        self._port = port
        self._on_stop = on_stop
        self.stats = PortStats()
        self.guard: ConnectionGuard | None = None
        self._socket: socket.socket | None = None
        self._server: GuardedUvicorn | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failed: BaseException | None = None

    @property
    def port(self) -> int:
        """The bound port (the requested one before `start`)."""
        return self._port

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return self.guard.open_connections if self.guard is not None else 0

    def start(self, timeout: float = 10.0) -> None:
        """Bind (OSError when the port is taken) and serve until `stop`."""
        self._socket = bind_listener(self.host, self._port)
        self._port = self._socket.getsockname()[1]
        cap = self.limits.connections_per_port(raise_open_files_limit())
        self.guard = ConnectionGuard(cap, request_timeout_s=self.limits.request_timeout_s,
                                     idle_timeout_s=self.limits.idle_timeout_s)
        self._server = guarded_uvicorn(self.app, self.guard, idle_timeout_s=self.limits.idle_timeout_s,
                                       graceful_shutdown_s=2)
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name=self.name, daemon=True)
        self._thread.start()
        if not started.wait(timeout) or self._failed is not None or not self._server.started:
            self.stop()
            raise OSError(f"the {self.name} did not start")
        log.debug("%s serving on port %d (at most %d connections)", self.name, self.port, cap)

    def _run(self, started: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        errors = AcceptErrorHandler(self._accept_error)
        errors.install(loop)
        noise = RateLimitedLogFilter()
        logging.getLogger("uvicorn.error").addFilter(noise)
        assert self._server is not None and self._socket is not None

        server, sock = self._server, self._socket

        async def serve() -> None:
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            started.set()
            try:
                await task
            finally:
                if self._on_stop is not None:
                    await self._on_stop()

        try:
            loop.run_until_complete(serve())
        except BaseException as exc:  # noqa: BLE001 - reported to start() / stop()
            self._failed = exc
        finally:
            started.set()
            logging.getLogger("uvicorn.error").removeFilter(noise)
            loop.close()

    def _accept_error(self) -> None:
        self.stats.accept_errors += 1

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._server = None
