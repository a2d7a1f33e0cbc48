"""The runtime's transports: gRPC (grpc.aio) and Connect (ASGI on uvicorn) over `pyruntime.service`."""

from __future__ import annotations

from pyruntime.rpc.runtime import (
    DEFAULT_HOST,
    DEFAULT_MAX_REQUEST_BYTES,
    RpcConfig,
    RpcServers,
    RpcServersHandle,
    serve_until_signalled,
    start_rpc_servers,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_REQUEST_BYTES",
    "RpcConfig",
    "RpcServers",
    "RpcServersHandle",
    "serve_until_signalled",
    "start_rpc_servers",
]
