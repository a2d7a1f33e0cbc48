"""Connect transport: an ASGI app (served by uvicorn) speaking Connect, gRPC-Web and gRPC over HTTP, JSON or binary.

Order of checks for every HTTP request: Host (DNS rebinding) and Origin (CSRF) are refused with
403 before anything else; `GET /healthz` answers without a token; every RPC except Health needs
the bearer token (UNAUTHENTICATED before the body is read); bodies over the limit are
RESOURCE_EXHAUSTED; JSON bodies are strict (an unknown field is INVALID_ARGUMENT, so a
misspelt field never silently does nothing) and JSON answers write every field, defaults included.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.compat._codec import ProtoJSONCodec
from google.protobuf import json_format
from google.protobuf.message import Message
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from coreai.v1.memory_store_connect import MemoryStoreASGIApplication
from coreai.v1.orchestrator_connect import OrchestratorASGIApplication
from coreai.v1.orchestrator_pb2 import HealthRequest
from pyruntime.rpc.auth import bearer_matches, host_header_allowed, origin_allowed
from pyruntime.rpc._shared import UNAUTHENTICATED_MESSAGE, python_method_name
from pyruntime.service import RuntimeServices, ServiceError
from pyruntime.service.status import StatusCode, status_for

DEFAULT_CONNECT_PORT = 13335
HEALTH_PATH = "/healthz"
PUBLIC_METHODS = frozenset({("coreai.v1.Orchestrator", "Health")})

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


def connect_error(error: ServiceError) -> ConnectError:
    """The ConnectError of a service status (Connect spells CANCELLED with one L)."""
    name = "CANCELED" if error.code is StatusCode.CANCELLED else error.code.name
    return ConnectError(Code[name], error.message)


class ExplicitJsonCodec(ProtoJSONCodec):
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


class _ConnectService:
    """A generated Connect service's methods (`load_state(request, ctx)`) answered by the service's."""

    def __init__(self, implementation: object) -> None:
        self._implementation = implementation

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._implementation, python_method_name(name))
        if inspect.isasyncgenfunction(method):
            return self._server_stream(method)
        return self._unary(method)

    @staticmethod
    def _unary(method: Callable[[Any], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, ctx: RequestContext) -> Any:
            try:
                return await method(request)
            except Exception as exc:  # noqa: BLE001 - every failure leaves as a status
                raise connect_error(status_for(exc)) from None

        return call

    @staticmethod
    def _server_stream(method: Callable[[Any], AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        async def call(request: Any, ctx: RequestContext) -> AsyncIterator[Any]:
            try:
                # aclosing: a client that goes away closes the service's stream now, which cancels the turn.
                async with contextlib.aclosing(method(request)) as events:
                    async for event in events:
                        yield event
            except Exception as exc:  # noqa: BLE001
                raise connect_error(status_for(exc)) from None

        return call


class BearerTokenCheck:
    """A Connect metadata interceptor: refuses calls without the bearer token before their body is read."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def on_start(self, ctx: RequestContext) -> None:
        """Raise UNAUTHENTICATED unless the call is public or carries the token."""
        method = ctx.method
        if (method.service_name, method.name) in PUBLIC_METHODS:
            return
        if not bearer_matches(ctx.request_headers.get("authorization"), self._token):
            raise ConnectError(Code.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)

    async def on_end(self, token: None, ctx: RequestContext, error: Exception | None) -> None:
        """Nothing to do after a call."""


async def _respond(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


class ConnectRuntimeApp:
    """The ASGI app of the runtime: checks, `/healthz`, then the MemoryStore and Orchestrator Connect apps."""

    def __init__(self, services: RuntimeServices, token: str, *, port: int, check_host: bool = True,
                 max_request_bytes: int) -> None:
        codecs = [google_protobuf_binary_codec(), ExplicitJsonCodec()]
        options: dict[str, Any] = {"interceptors": [BearerTokenCheck(token)], "read_max_bytes": max_request_bytes,
                                   "codecs": codecs}
        # The adapters answer every generated method by name (see _ConnectService), hence the ignores.
        memory = MemoryStoreASGIApplication(_ConnectService(services.memory_store), **options)  # type: ignore
        orchestrator = OrchestratorASGIApplication(_ConnectService(services.orchestrator), **options)  # type: ignore
        self._routes: dict[str, ASGIApp] = {memory.path + "/": memory, orchestrator.path + "/": orchestrator}
        self._orchestrator = services.orchestrator
        self._port = port
        self._check_host = check_host

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are not served; returning closes the connection
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        if self._check_host and not host_header_allowed(headers.get("host"), self._port):
            await _respond(send, 403, {"code": "permission_denied",
                                       "message": "Host must be 127.0.0.1, localhost or [::1] with the runtime's port"})
            return
        if not origin_allowed(headers.get("origin")):
            await _respond(send, 403, {"code": "permission_denied",
                                       "message": "requests from web pages are refused (Origin is not loopback)"})
            return
        path = scope.get("path", "")
        if path == HEALTH_PATH:
            await self._health(scope, send)
            return
        for prefix, app in self._routes.items():
            if path.startswith(prefix):
                await app(scope, receive, send)
                return
        await _respond(send, 404, {"code": "unimplemented", "message": "no such procedure"})

    async def _health(self, scope: dict[str, Any], send: Send) -> None:
        if scope.get("method") not in ("GET", "HEAD"):
            await _respond(send, 405, {"code": "unimplemented", "message": "use GET /healthz"})
            return
        health = await self._orchestrator.health(HealthRequest())
        await _respond(send, 200, {"ready": health.ready, "modelReady": health.model_ready,
                                   "model": health.model, "version": health.version})

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
