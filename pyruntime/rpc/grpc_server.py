"""gRPC transport (grpc.aio): every RPC of the contract bound to the service, a bearer-token check, status codes.

Browsers cannot speak gRPC (HTTP/2 with trailers), so the Host/Origin checks of the Connect transport
are not needed here; the bearer token is. Also served, without a token: the standard
`grpc.health.v1.Health` service (`""` and `coreai.v1.Orchestrator`: SERVING when ready,
`coreai.v1.MemoryStore`: SERVING while the process serves) and server reflection. Connections are
capped and time out (`TransportLimits`) through grpc core's own options.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from coreai.v1 import memory_store_pb2, orchestrator_pb2
from pyruntime.net.auth import bearer_matches
from pyruntime.net.limits import TransportLimits
from pyruntime.net.wire import (
    GRPC_STATUS_DETAILS_KEY,
    UNAUTHENTICATED_MESSAGE,
    grpc_status_details,
    python_method_name,
)
from pyruntime.service import RuntimeServices, ServiceError
from pyruntime.service.status import StatusCode, status_for

Request = TypeVar("Request")
Response = TypeVar("Response")

DEFAULT_GRPC_PORT = 13334
MEMORY_STORE_SERVICE = memory_store_pb2.DESCRIPTOR.services_by_name["MemoryStore"]
ORCHESTRATOR_SERVICE = orchestrator_pb2.DESCRIPTOR.services_by_name["Orchestrator"]
PUBLIC_METHODS = frozenset({"/coreai.v1.Orchestrator/Health"})
"""Methods callable without a token (health and readiness probes)."""
PUBLIC_SERVICES = frozenset({health.SERVICE_NAME, reflection.SERVICE_NAME, "grpc.reflection.v1.ServerReflection"})
"""Services callable without a token: standard health checks and reflection (the contract is public)."""


async def _abort(context: aio.ServicerContext[Any, Any], error: ServiceError) -> NoReturn:
    code = grpc.StatusCode[error.code.name]
    if error.retry_after_s is None:
        await context.abort(code, error.message)
    details = grpc_status_details(code.value[0], error.message, error.retry_after_s)
    await context.abort(code, error.message, trailing_metadata=((GRPC_STATUS_DETAILS_KEY, details),))


class _Malformed:
    """A request body that is not a valid message (grpc would answer UNKNOWN; we answer INVALID_ARGUMENT)."""

    def __init__(self, type_name: str) -> None:
        self.error = ServiceError(StatusCode.INVALID_ARGUMENT, f"the request is not a valid {type_name} message")


def _lenient_parser(message_class: type[Message]) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except Exception:  # noqa: BLE001 - any decode failure is the caller's bad input
            return _Malformed(message_class.DESCRIPTOR.full_name)

    return parse


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _unary(method: Callable[[Any], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        try:
            if isinstance(request, _Malformed):
                raise request.error
            return await method(request)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a status
            await _abort(context, status_for(exc))

    return call


def _server_stream(method: Callable[[Any], AsyncGenerator[Any, None]]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        try:
            if isinstance(request, _Malformed):
                raise request.error
            # aclosing: a client that goes away closes the service's stream now, which cancels the turn.
            async with contextlib.aclosing(method(request)) as events:
                async for event in events:
                    yield event
        except Exception as exc:  # noqa: BLE001
            await _abort(context, status_for(exc))

    return call


def service_handler(service: ServiceDescriptor, implementation: object) -> grpc.GenericRpcHandler:
    """The handlers of every RPC of service, answered by implementation's methods (`LoadState` -> `load_state`)."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in service.methods:
        function = getattr(implementation, python_method_name(method.name))
        parse = _lenient_parser(GetMessageClass(method.input_type))
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _server_stream(function), request_deserializer=parse, response_serializer=_serialize)
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(function), request_deserializer=parse, response_serializer=_serialize)
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _refusal(handler: grpc.RpcMethodHandler[Request, Response]) -> grpc.RpcMethodHandler[Request, Response]:
    """A handler of the same shape as handler that answers UNAUTHENTICATED."""

    async def unary(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        await _abort(context, ServiceError(StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE))

    async def stream(request: Any, context: aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        await _abort(context, ServiceError(StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE))
        yield  # pragma: no cover - makes this an async generator

    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(stream, handler.request_deserializer,
                                                    handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer, handler.response_serializer)


def is_public(method: str) -> bool:
    """True for a method callable without a token (`/package.Service/Method`)."""
    return method in PUBLIC_METHODS or method.lstrip("/").partition("/")[0] in PUBLIC_SERVICES


class BearerTokenInterceptor(aio.ServerInterceptor):
    """Refuses every call without `authorization: Bearer <token>`, except the public ones."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Request, Response]
                                                                              | None]],
            handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Request, Response] | None:
        handler = await continuation(handler_call_details)
        if handler is None or is_public(handler_call_details.method):
            return handler
        metadata = dict(handler_call_details.invocation_metadata or ())
        authorization = metadata.get("authorization")  # bytes only under a `-bin` key
        if bearer_matches(authorization if isinstance(authorization, str) else None, self._token):
            return handler
        return _refusal(handler)


def create_grpc_server(services: RuntimeServices, token: str, *, max_request_bytes: int,
                       limits: TransportLimits = TransportLimits(), max_connections: int = 1024,
                       ) -> tuple[aio.Server, health.aio.HealthServicer]:
    """A grpc.aio server with both services, health, reflection and the token check; bind with `add_insecure_port`."""
    server = aio.server(
        interceptors=[BearerTokenInterceptor(token)],
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.so_reuseport", 0),  # a second runtime on the same port must fail, not share it
            # Enforced before the HTTP/2 handshake, so raw half-open sockets count too.
            ("grpc.max_allowed_incoming_connections", max_connections),
            # A connection that has not sent its HTTP/2 preface and settings by then is closed.
            ("grpc.server_handshake_timeout_ms", int(limits.request_timeout_s * 1000)),
            # A connection with no call in progress is closed (GOAWAY); channels reconnect by themselves.
            ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
        ],
    )
    server.add_generic_rpc_handlers((
        service_handler(MEMORY_STORE_SERVICE, services.memory_store),
        service_handler(ORCHESTRATOR_SERVICE, services.orchestrator),
    ))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((MEMORY_STORE_SERVICE.full_name, ORCHESTRATOR_SERVICE.full_name,
                                         health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    return server, health_servicer


async def publish_health(health_servicer: health.aio.HealthServicer, ready: bool) -> None:
    """Set the grpc.health.v1 statuses: overall and Orchestrator follow readiness, MemoryStore is always served."""
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    status = serving if ready else not_serving
    await health_servicer.set(health.OVERALL_HEALTH, status)
    await health_servicer.set(ORCHESTRATOR_SERVICE.full_name, status)
    await health_servicer.set(MEMORY_STORE_SERVICE.full_name, serving)


def grpc_address(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 literal."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


# Open connections of a grpc.aio server, read from grpc core's channelz (the calls grpcio-channelz wraps):
# grpc has no public API for it. Any failure reads as "unknown" (-1), never as an error of the scrape.
def channelz_server_ids() -> set[int]:
    """Ids of every gRPC server in this process, as channelz numbers them."""
    try:
        from grpc._cython import cygrpc  # type: ignore[attr-defined]  # private, so typeshed has no stub

        ids: set[int] = set()
        start = 0
        while True:
            page = json.loads(cygrpc.channelz_get_servers(start))
            for entry in page.get("server", ()):
                ids.add(int(entry["ref"]["serverId"]))
            if page.get("end", True) or not ids:
                return ids
            start = max(ids) + 1
    except Exception:  # noqa: BLE001 - see above
        return set()


def channelz_open_connections(server_id: int) -> int:
    """Open connections of one server (-1 when channelz cannot tell)."""
    try:
        from grpc._cython import cygrpc  # type: ignore[attr-defined]  # private, so typeshed has no stub

        count, start = 0, 0
        while True:
            page = json.loads(cygrpc.channelz_get_server_sockets(server_id, start, 0))
            refs = page.get("socketRef", ())
            count += len(refs)
            if page.get("end", True) or not refs:
                return count
            start = max(int(r["socketId"]) for r in refs) + 1
    except Exception:  # noqa: BLE001
        return -1
