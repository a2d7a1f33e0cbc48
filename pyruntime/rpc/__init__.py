"""The runtime's transports: gRPC (grpc.aio) and Connect (ASGI on uvicorn) over `pyruntime.service`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyruntime._lazy import lazy_exports

if TYPE_CHECKING:
    from pyruntime.rpc.runtime import (
        DEFAULT_HOST,
        DEFAULT_MAX_REQUEST_BYTES,
        RpcConfig,
        RpcServers,
        RpcServersHandle,
        start_rpc_servers,
    )

# Lazy: a module that needs one name of the transports does not load the servers with it.
_EXPORTS = dict.fromkeys(
    ("DEFAULT_HOST", "DEFAULT_MAX_REQUEST_BYTES", "RpcConfig", "RpcServers", "RpcServersHandle", "start_rpc_servers"),
    "pyruntime.rpc.runtime")
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_REQUEST_BYTES",
    "RpcConfig",
    "RpcServers",
    "RpcServersHandle",
    "start_rpc_servers",
]
