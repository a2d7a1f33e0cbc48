"""Connect transport: an ASGI app (served by uvicorn) speaking Connect, gRPC-Web and gRPC over HTTP, JSON or binary.

Order of checks for every HTTP request: Host (DNS rebinding) and Origin (CSRF) are refused with
403 before anything else (400 when they cannot even be parsed); `GET /healthz` (readiness: 503
while the model loads or restarts, the body says why), `GET /livez` (liveness: 200 while the
process serves) and `GET /metrics` (Prometheus text) answer without a token and never touch the
model or a store lock; every RPC except Health needs
the bearer token (UNAUTHENTICATED before the body is read); bodies over the limit are
RESOURCE_EXHAUSTED; JSON bodies are strict (an unknown field is INVALID_ARGUMENT, so a
misspelt field never silently does nothing) and JSON answers write every field, defaults included.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import struct
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.compat._codec import ProtoJSONCodec
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.request import RequestContext
from google.protobuf import json_format
from google.protobuf.message import Message
from protobuf.wkt import Any as AnyDetail

import pyruntime
from coreai.v1.memory_store_connect import MemoryStoreASGIApplication
from coreai.v1.orchestrator_connect import OrchestratorASGIApplication
from pyruntime.aio import finish_or_cancel
from pyruntime.errors import InvalidArgumentError
from pyruntime.jsonlimits import check_json_depth, check_json_shape
from pyruntime.net.auth import HeaderCheck, bearer_matches, check_host_header, check_origin
from pyruntime.net.wire import RETRY_INFO_TYPE, UNAUTHENTICATED_MESSAGE, python_method_name, retry_info
from pyruntime.observability import CONTENT_TYPE as METRICS_CONTENT_TYPE
from pyruntime.service import RuntimeServices, ServiceError
from pyruntime.service.status import StatusCode, status_for

DEFAULT_CONNECT_PORT = 13335
HEALTH_PATH = "/healthz"
LIVENESS_PATH = "/livez"
METRICS_PATH = "/metrics"
PUBLIC_METHODS = frozenset({("coreai.v1.Orchestrator", "Health")})
SHUTDOWN_MESSAGE = "the runtime is shutting down; retry once it is back"
END_CALLS_S = 2.0

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


def connect_error(error: ServiceError) -> ConnectError:
    """The ConnectError of a service status (Connect spells CANCELLED with one L), with its retry hint."""
    name = "CANCELED" if error.code is StatusCode.CANCELLED else error.code.name
    details = []
    if error.retry_after_s is not None:
        # connectrpc's details are messages of its own protobuf runtime: the google.protobuf one goes in as an Any.
        packed = retry_info(error.retry_after_s).SerializeToString()
        details.append(ErrorDetail(AnyDetail(type_url=f"type.googleapis.com/{RETRY_INFO_TYPE}", value=packed)))
    return ConnectError(Code[name], error.message, details)


class ExplicitJsonCodec(ProtoJSONCodec[Any]):
    """Proto3 JSON, compact, with fields at their default written out (`"success": false`, `"version": 0`).

    Parsers must accept either form; writing defaults spares a Unity client the "missing means
    default" rule. Decoding is strict: an unknown field is INVALID_ARGUMENT.
    """

    def __init__(self) -> None:
        super().__init__(ignore_unknown_fields=False)

    def encode(self, message: Message) -> bytes:
        """Compact proto3 JSON with defaults."""
        return json_format.MessageToJson(message, always_print_fields_with_no_presence=True,
                                         indent=None).encode()

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        """Strict proto3 JSON: a JSON array (or other non-object) where a message belongs is INVALID_ARGUMENT.

        protobuf reads `[]` as an empty message, so `"state": []` once blanked a save.
        """
        try:
            check_json_depth(data, "request body")
            check_json_shape(json.loads(data), message_class.DESCRIPTOR)
        except InvalidArgumentError as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from None
        except ValueError:
            pass  # not JSON: the parser below says so
        return super().decode(data, message_class)


class _ConnectService:
    """A generated Connect service's methods (`load_state(request, ctx)`) answered by the service's.

    A call that shutdown cancels (after the grace period) answers UNAVAILABLE, so clients retry.
    """

    def __init__(self, implementation: object, stopping: Callable[[], bool] = lambda: False) -> None:
        self._implementation = implementation
        self._stopping = stopping

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._implementation, python_method_name(name))
        if inspect.isasyncgenfunction(method):
            return self._server_stream(method)
        return self._unary(method)

    def _shutdown_error(self) -> ConnectError:
        if not self._stopping():
            raise asyncio.CancelledError  # the caller went away: stay cancelled
        return ConnectError(Code.UNAVAILABLE, SHUTDOWN_MESSAGE)

    def _unary(self, method: Callable[[Any], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, ctx: RequestContext[Any, Any]) -> Any:
            try:
                return await method(request)
            except asyncio.CancelledError:
                raise self._shutdown_error() from None
            except Exception as exc:  # noqa: BLE001 - every failure leaves as a status
                raise connect_error(status_for(exc)) from None

        return call

    def _server_stream(self, method: Callable[[Any], AsyncGenerator[Any, None]]) -> Callable[..., AsyncIterator[Any]]:
        async def call(request: Any, ctx: RequestContext[Any, Any]) -> AsyncIterator[Any]:
            try:
                # aclosing: a client that goes away closes the service's stream now, which cancels the turn.
                async with contextlib.aclosing(method(request)) as events:
                    async for event in events:
                        yield event
            except asyncio.CancelledError:
                raise self._shutdown_error() from None
            except Exception as exc:  # noqa: BLE001
                raise connect_error(status_for(exc)) from None

        return call


class BearerTokenCheck:
    """A Connect metadata interceptor: refuses calls without the bearer token before their body is read."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def on_start(self, ctx: RequestContext[Any, Any]) -> None:
        """Raise UNAUTHENTICATED unless the call is public or carries the token."""
        method = ctx.method
        if (method.service_name, method.name) in PUBLIC_METHODS:
            return
        if not bearer_matches(ctx.request_headers.get("authorization"), self._token):
            raise ConnectError(Code.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)

    async def on_end(self, token: None, ctx: RequestContext[Any, Any], error: Exception | None) -> None:
        """Nothing to do after a call."""


async def _respond(send: Send, status: int, body: dict[str, Any]) -> None:
    await _respond_bytes(send, status, json.dumps(body).encode(), b"application/json")


async def _respond_bytes(send: Send, status: int, payload: bytes, content_type: bytes,
                         head_only: bool = False) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(payload)).encode()),
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b"" if head_only else payload})


class _TrackedSend:
    """An ASGI send that remembers how far the response got, so a cancelled call can still end properly."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.streaming = False
        self.complete = False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            content_type = dict(message.get("headers", ())).get(b"content-type", b"")
            self.streaming = content_type.startswith(b"application/connect+")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def end_unavailable(self, text: str) -> None:
        """Finish the response as an UNAVAILABLE error in the protocol's own form (best effort)."""
        error = {"code": "unavailable", "message": text}
        with contextlib.suppress(Exception):  # the client may be gone already
            if not self.started:
                await _respond(self, 503, error)
            elif self.streaming and not self.complete:
                end = json.dumps({"error": error}).encode()
                await self({"type": "http.response.body", "body": struct.pack(">BI", 0x02, len(end)) + end})
            elif not self.complete:
                await self({"type": "http.response.body", "body": b""})


class ConnectRuntimeApp:
    """The ASGI app of the runtime: checks, `/healthz`, `/livez`, `/metrics`, then the Connect apps."""

    def __init__(self, services: RuntimeServices, token: str, *, port: int, check_host: bool = True,
                 max_request_bytes: int) -> None:
        self._calls: set[asyncio.Task[Any]] = set()
        self._stopping = False
        codecs = [google_protobuf_binary_codec(), ExplicitJsonCodec()]
        options: dict[str, Any] = {"interceptors": [BearerTokenCheck(token)], "read_max_bytes": max_request_bytes,
                                   "codecs": codecs}
        # The adapters answer every generated method by name (see _ConnectService).
        stopping = self._is_stopping
        memory = MemoryStoreASGIApplication(_ConnectService(services.memory_store, stopping), **options)
        orchestrator = OrchestratorASGIApplication(_ConnectService(services.orchestrator, stopping), **options)
        self._routes: dict[str, ASGIApp] = {memory.path + "/": memory, orchestrator.path + "/": orchestrator}
        self._services = services
        self._port = port
        self._check_host = check_host

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not served; returning closes the connection
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        if self._check_host:
            host = check_host_header(headers.get("host"), self._port)
            if host is HeaderCheck.MALFORMED:
                await _respond(send, 400, {"code": "invalid_argument", "message": "malformed Host header"})
                return
            if host is not HeaderCheck.ALLOWED:
                await _respond(send, 403, {"code": "permission_denied", "message":
                                           "Host must be 127.0.0.1, localhost or [::1] with the runtime's port"})
                return
        origin = check_origin(headers.get("origin"))
        if origin is HeaderCheck.MALFORMED:
            await _respond(send, 400, {"code": "invalid_argument", "message": "malformed Origin header"})
            return
        if origin is not HeaderCheck.ALLOWED:
            await _respond(send, 403, {"code": "permission_denied",
                                       "message": "requests from web pages are refused (Origin is not loopback)"})
            return
        path = scope.get("path", "")
        if path in (HEALTH_PATH, LIVENESS_PATH, METRICS_PATH):
            await self._probe(path, scope, send)
            return
        for prefix, app in self._routes.items():
            if path.startswith(prefix):
                await self._call(app, scope, receive, send)
                return
        await _respond(send, 404, {"code": "unimplemented", "message": "no such procedure"})

    async def _call(self, app: ASGIApp, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """One RPC; when shutdown cancels it, it still ends as a proper UNAVAILABLE answer, not a traceback."""
        task = asyncio.current_task()
        assert task is not None
        tracked = _TrackedSend(send)
        self._calls.add(task)
        try:
            await app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            await tracked.end_unavailable(SHUTDOWN_MESSAGE)
        finally:
            self._calls.discard(task)

    def _is_stopping(self) -> bool:
        return self._stopping

    async def drain(self, grace: float) -> None:
        """Shutdown: let RPCs in flight finish for grace seconds, then end the rest with UNAVAILABLE."""
        self._stopping = True
        await finish_or_cancel(self._calls, grace, END_CALLS_S)

    async def _probe(self, path: str, scope: dict[str, Any], send: Send) -> None:
        """Health, liveness and metrics: read state in memory only (never the model, never a store lock)."""
        method = scope.get("method")
        if method not in ("GET", "HEAD"):
            await _respond(send, 405, {"code": "unimplemented", "message": f"use GET {path}"})
            return
        head = method == "HEAD"
        if path == METRICS_PATH:
            await _respond_bytes(send, 200, self._services.metrics.render(), METRICS_CONTENT_TYPE.encode(), head)
            return
        if path == LIVENESS_PATH:
            await _respond_bytes(send, 200, b'{"live":true}', b"application/json", head)
            return
        readiness = self._services.orchestrator.readiness()
        body = {"ready": readiness.ready, "live": True, "modelReady": readiness.model_ready,
                "modelState": readiness.state.value, "reason": readiness.reason,
                "model": self._services.orchestrator.model_alias, "version": pyruntime.__version__}
        await _respond_bytes(send, 200 if readiness.ready else 503, json.dumps(body).encode(), b"application/json",
                             head)

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
