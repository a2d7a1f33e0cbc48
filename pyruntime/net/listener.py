"""The listening socket of an HTTP port and the uvicorn server that serves it under a `ConnectionGuard`.

Shared by the Connect port (`pyruntime.rpc.runtime`) and the public model port (`pyruntime.model.public_port`):
both bind their own socket (so a taken port fails at once, and port 0 reports the port it got) and run uvicorn
without its signal handlers, behind the guard's connection cap and timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from pyruntime.net.http_guard import ConnectionGuard
from pyruntime.net.limits import ACCEPT_BATCH


def bind_listener(host: str, port: int, *, backlog: int = ACCEPT_BATCH) -> socket.socket:
    """A listening, non-blocking TCP socket on host:port (`port` 0 picks a free one); OSError when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on accepted sockets of a TCP-protocol listener, and without
    # it every response on a kept-alive connection waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


class GuardedUvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers (the runtime decides when to stop), TLS handshakes bounded."""

    handshake_timeout_s: float | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """No signal handlers: the runtime stops the server."""
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup; with TLS, its listener also gets handshake_timeout_s as asyncio's handshake timeout."""
        if self.handshake_timeout_s is None or not self.config.is_ssl:
            await super().startup(sockets)
            return
        # uvicorn passes no ssl_handshake_timeout (asyncio's default is 60 s), and until the handshake ends a
        # connection is invisible to the ConnectionGuard: one that never says hello would hold a handle a minute.
        loop = asyncio.get_running_loop()
        loop.create_server = functools.partial(loop.create_server,  # type: ignore[method-assign]
                                               ssl_handshake_timeout=self.handshake_timeout_s)
        try:
            await super().startup(sockets)
        finally:
            del loop.create_server  # back to the loop's own method


def guarded_uvicorn(app: Any, guard: ConnectionGuard, *, idle_timeout_s: float, graceful_shutdown_s: int,
                    **ssl_options: Any) -> GuardedUvicorn:
    """A quiet uvicorn server for `app` whose connections `guard` admits (no access log, no lifespan, no server
    header, HTTP/1.1 only); kept-alive connections close after `idle_timeout_s`."""
    return GuardedUvicorn(uvicorn.Config(
        app, lifespan="off", access_log=False, log_level="warning", server_header=False, log_config=None,
        http=guard.protocol_class(), ws="none", backlog=ACCEPT_BATCH,
        timeout_keep_alive=max(1, round(idle_timeout_s)), timeout_graceful_shutdown=graceful_shutdown_s,
        **ssl_options))
