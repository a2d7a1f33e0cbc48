"""Closing a Connect client closes its connections: the runtime sees none left open by it."""

from __future__ import annotations

import asyncio

from pyruntime.client import AsyncRuntimeClient, RuntimeClient
from tests.rpc.conftest import Runtime
from tests.unity_layer.processes import wait_for


def _open_connect_connections(runtime: Runtime) -> float:
    """The runtime's open Connect connections, read in process (a scrape would open one of its own)."""
    value = runtime.services.metrics.registry.get_sample_value("coreai_open_connections", {"transport": "connect"})
    assert value is not None
    return value


def test_a_closed_blocking_connect_client_leaves_no_connection_open(runtime: Runtime) -> None:
    client = RuntimeClient(runtime.url("connect"), token=runtime.token, timeout=30)
    client.health()
    assert _open_connect_connections(runtime) == 1  # kept alive for the next call
    client.close()
    wait_for(lambda: _open_connect_connections(runtime) == 0, 10, "the closed client's connection to go")


def test_a_closed_async_connect_client_leaves_no_connection_open(runtime: Runtime) -> None:
    async def call_then_close() -> float:
        async with AsyncRuntimeClient(runtime.url("connect"), token=runtime.token, timeout=30) as client:
            await client.health()
            return _open_connect_connections(runtime)

    assert asyncio.run(call_then_close()) == 1
    wait_for(lambda: _open_connect_connections(runtime) == 0, 10, "the closed client's connection to go")
