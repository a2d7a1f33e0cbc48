"""The third transport, in-process: `RuntimeClient` calls a `MemoryStoreService` of this process, no sockets.

The CLI's file mode (`coreai-runtime memory ... --data-dir`) opens the stores itself and goes through
this transport, so the files and a running runtime run the same service code and print the same
output: one implementation of each memory operation. Failed calls end as they do over gRPC and
Connect: the service's status becomes the client's exception of that status.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from google.protobuf.message import Message

from pyruntime.client._transports import MEMORY_STORE
from pyruntime.client.errors import error_for
from pyruntime.errors import InvalidArgumentError
from pyruntime.net.wire import python_method_name
from pyruntime.service.memory_store import MemoryStoreService
from pyruntime.service.status import ServiceError


class InProcessTransport:
    """A blocking `SyncTransport` over one MemoryStoreService (the MemoryStore RPCs; no streaming ones)."""

    def __init__(self, memory_store: MemoryStoreService) -> None:
        self._service = memory_store
        self._loop = asyncio.Runner()  # the service's calls are coroutines that run the core on its workers

    def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response; a failure raises the client error of its status (affinity: unused, one
        process)."""
        if service != MEMORY_STORE:
            raise InvalidArgumentError(f"the in-process transport serves {MEMORY_STORE} only, not {service}")
        call = getattr(self._service, python_method_name(rpc))
        try:
            return self._loop.run(call(request))
        except ServiceError as exc:
            raise error_for(exc.code, exc.message) from None

    def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> Iterator[Any]:
        """MemoryStore has no streaming RPC."""
        raise InvalidArgumentError(f"the in-process transport has no streaming RPCs ({service}.{rpc})")

    def close(self) -> None:
        """Stop the event loop, then wait for the service's running calls."""
        self._loop.close()
        self._service.close()
