"""gRPC transport (grpc.aio): every RPC of the contract bound to the service, a bearer-token check, status codes.

Browsers cannot speak gRPC (HTTP/2 with trailers), so the Host/Origin checks of the Connect transport
are not needed here; the bearer token is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc import aio

from coreai.v1 import memory_store_pb2, orchestrator_pb2
from pyruntime.rpc._shared import UNAUTHENTICATED_MESSAGE, python_method_name
from pyruntime.rpc.auth import bearer_matches
from pyruntime.service import RuntimeServices, ServiceError
from pyruntime.service.status import StatusCode, status_for

DEFAULT_GRPC_PORT = 13334
PUBLIC_METHODS = frozenset({"/coreai.v1.Orchestrator/Health"})
"""Methods callable without a token (health and readiness probes)."""


async def _abort(context: aio.ServicerContext, error: ServiceError) -> None:
    await context.abort(grpc.StatusCode[error.code.name], error.message)


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
    async def call(request: Any, context: aio.ServicerContext) -> Any:
        try:
            if isinstance(request, _Malformed):
                raise request.error
            return await method(request)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a status
            await _abort(context, status_for(exc))

    return call


def _server_stream(method: Callable[[Any], AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
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
    handlers: dict[str, grpc.RpcMethodHandler] = {}
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


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same shape as handler that answers UNAUTHENTICATED."""

    async def unary(request: Any, context: aio.ServicerContext) -> Any:
        await _abort(context, ServiceError(StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE))

    async def stream(request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
        await _abort(context, ServiceError(StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE))
        yield  # pragma: no cover - makes this an async generator

    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(stream, handler.request_deserializer,
                                                    handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer, handler.response_serializer)


class BearerTokenInterceptor(aio.ServerInterceptor):
    """Refuses every call without `authorization: Bearer <token>`, except the public ones."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_service(self, continuation: Callable[..., Awaitable[grpc.RpcMethodHandler]],
                                handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method in PUBLIC_METHODS:
            return handler
        metadata = dict(handler_call_details.invocation_metadata or ())
        if bearer_matches(metadata.get("authorization"), self._token):
            return handler
        return _refusal(handler)


def create_grpc_server(services: RuntimeServices, token: str, *, max_request_bytes: int) -> aio.Server:
    """A grpc.aio server with both services and the token check; bind it with `add_insecure_port`."""
    server = aio.server(
        interceptors=[BearerTokenInterceptor(token)],
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.so_reuseport", 0),  # a second runtime on the same port must fail, not share it
        ],
    )
    server.add_generic_rpc_handlers((
        service_handler(memory_store_pb2.DESCRIPTOR.services_by_name["MemoryStore"], services.memory_store),
        service_handler(orchestrator_pb2.DESCRIPTOR.services_by_name["Orchestrator"], services.orchestrator),
    ))
    return server


def grpc_address(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 literal."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
