"""gRPC transport (grpc.aio): the generated servicers bound to the service, a bearer-token check, status codes.

Browsers cannot speak gRPC (HTTP/2 with trailers), so the Host/Origin checks of the Connect transport
are not needed here; the bearer token is.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc import aio

from coreai.v1 import memory_store_pb2_grpc, orchestrator_pb2_grpc
from pyruntime.rpc._shared import UNAUTHENTICATED_MESSAGE, python_method_name
from pyruntime.rpc.auth import bearer_matches
from pyruntime.service import RuntimeServices, ServiceError
from pyruntime.service.status import StatusCode, status_for

DEFAULT_GRPC_PORT = 13334
PUBLIC_METHODS = frozenset({"/coreai.v1.Orchestrator/Health"})
"""Methods callable without a token (health and readiness probes)."""


async def _abort(context: aio.ServicerContext, error: ServiceError) -> None:
    await context.abort(grpc.StatusCode[error.code.name], error.message)


class _GrpcServicer:
    """A generated servicer's methods (`LoadState`, ...) answered by the service's (`load_state`, ...)."""

    def __init__(self, implementation: object) -> None:
        self._implementation = implementation

    def __getattr__(self, rpc_name: str) -> Callable[..., Any]:
        method = getattr(self._implementation, python_method_name(rpc_name))
        if inspect.isasyncgenfunction(method):
            return self._server_stream(method)
        return self._unary(method)

    @staticmethod
    def _unary(method: Callable[[Any], Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, context: aio.ServicerContext) -> Any:
            try:
                return await method(request)
            except Exception as exc:  # noqa: BLE001 - every failure leaves as a status
                await _abort(context, status_for(exc))

        return call

    @staticmethod
    def _server_stream(method: Callable[[Any], AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        async def call(request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                # aclosing: a client that goes away closes the service's stream now, which cancels the turn.
                async with contextlib.aclosing(method(request)) as events:
                    async for event in events:
                        yield event
            except Exception as exc:  # noqa: BLE001
                await _abort(context, status_for(exc))

        return call


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
    memory_store_pb2_grpc.add_MemoryStoreServicer_to_server(_GrpcServicer(services.memory_store), server)
    orchestrator_pb2_grpc.add_OrchestratorServicer_to_server(_GrpcServicer(services.orchestrator), server)
    return server


def grpc_address(host: str, port: int) -> str:
    """`host:port`, with brackets around an IPv6 literal."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
