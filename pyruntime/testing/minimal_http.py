"""`serve_minimal`: an ASGI app served over HTTP/1.1 with as little CPU as possible, for load benchmarks.

A benchmark that plays hundreds of players against `LatencyEngine` on the same cores as `serve` would measure the
engine's HTTP server (uvicorn's pure-Python h11 under the model port's guard: several milliseconds per streamed
reply) as much as the runtime. This protocol reads a request's head and its `Content-Length` body, calls the app,
and writes what it sends: with `content-length` as given, otherwise chunked. It serves a well-behaved client on
loopback and nothing else: no pipelining, no `Expect`, no timeouts, no limits. Never a product port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class _Connection(asyncio.Protocol):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.running: asyncio.Task[None] | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next()

    def _next(self) -> None:
        """Start the request whose head and body are in, unless one runs."""
        if self.running is not None:
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        headers = [(name.strip().lower(), value.strip()) for name, _, value in (line.partition(b":")
                                                                              for line in lines[1:])]
        length = int(next((v for k, v in headers if k == b"content-length"), b"0"))
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        method, target, _ = lines[0].decode("latin-1").split(" ", 2)
        path, _, query = target.partition("?")
        assert self.transport is not None
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "path": path,
                 "query_string": query.encode("latin-1"), "headers": headers, "scheme": "http",
                 "client": self.transport.get_extra_info("peername"),
                 "server": self.transport.get_extra_info("sockname")}
        self.running = asyncio.ensure_future(self._serve(scope, body))

    async def _serve(self, scope: dict[str, Any], body: bytes) -> None:
        assert self.transport is not None
        transport = self.transport
        delivered = False
        chunked = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self.closed
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal chunked
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or ())
                chunked = not any(name.lower() == b"content-length" for name, _ in headers)
                if chunked:
                    headers.append((b"transfer-encoding", b"chunked"))
                head = [b"HTTP/1.1 %d OK" % message["status"], *(name + b": " + value for name, value in headers)]
                transport.write(b"\r\n".join(head) + b"\r\n\r\n")
                return
            data = message.get("body", b"")
            more = message.get("more_body", False)
            if chunked:
                out = (b"%x\r\n" % len(data) + data + b"\r\n") if data else b""
                transport.write(out + (b"" if more else b"0\r\n\r\n"))
            elif data:
                transport.write(data)

        try:
            await self.app(scope, receive, send)
        finally:
            self.running = None
        if not transport.is_closing():
            self._next()


async def serve_minimal(app: ASGIApp, host: str, port: int) -> asyncio.Server:
    """Serve `app` on `host`:`port` (0: a free one) in the running loop."""
    return await asyncio.get_running_loop().create_server(lambda: _Connection(app), host, port)
