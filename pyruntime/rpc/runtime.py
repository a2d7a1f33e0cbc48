"""Both transports of one runtime started and stopped together, bound to loopback unless told otherwise.

`start_rpc_servers(services, config)` runs them on a background event loop and returns a handle
(`stop(grace)`); `RpcServers` does the same inside a running loop (`coreai-runtime serve` uses it and
owns the stop signals, `pyruntime/cli/signals.py`). Shutdown order: stop accepting, let
in-flight calls finish (up to `grace`), then `services.close()` waits for store writes still on
their threads, so files are consistent when the process exits.

Both ports are bounded (`TransportLimits`): the file-handle limit is raised where allowed, each port
gets a connection cap below it, idle and half-sent requests time out, and failed accepts are
logged at most once per interval. Readiness is published to `grpc.health.v1` as it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import grpc
from grpc import aio
from grpc_health.v1 import health

from pyruntime.errors import InvalidArgumentError
from pyruntime.net.auth import is_loopback_host, resolve_token, write_token_file
from pyruntime.net.http_guard import ConnectionGuard
from pyruntime.net.limits import (
    AcceptErrorHandler,
    RateLimitedLogFilter,
    TransportLimits,
    raise_open_files_limit,
)
from pyruntime.net.listener import GuardedUvicorn, bind_listener, guarded_uvicorn
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT, END_CALLS_S, ConnectRuntimeApp
from pyruntime.rpc.grpc_server import (
    DEFAULT_GRPC_PORT,
    channelz_open_connections,
    channelz_server_ids,
    create_grpc_server,
    grpc_address,
    publish_health,
)
from pyruntime.rpc.tls import TlsFiles, check_listen
from pyruntime.service import RuntimeServices

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
READINESS_POLL_S = 0.2
CONNECT_BACKLOG = 512  # the Connect listener's backlog (the guard admits or refuses what it accepts)
_NOISY_LOGGERS = ("uvicorn.error", "uvicorn")  # one line per malformed request: a flood must not flood the log


@dataclass(frozen=True)
class RpcConfig:
    """Where and how the runtime listens; port 0 picks a free port."""

    host: str = DEFAULT_HOST
    grpc_port: int = DEFAULT_GRPC_PORT
    connect_port: int = DEFAULT_CONNECT_PORT
    token: str | None = field(default=None, repr=False)  # None: $COREAI_RUNTIME_TOKEN, else a fresh one
    token_file: Path | None = None  # where the token is written (0600) for local clients
    token_root: Path | None = None  # the data folder token_file is in (no link below it followed), if it is
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    grace_s: float = 5.0
    limits: TransportLimits = TransportLimits()
    tls: TlsFiles | None = None  # both ports serve TLS with it; required beyond loopback

    @property
    def is_loopback(self) -> bool:
        """True when only this machine can connect."""
        return is_loopback_host(self.host)


def _resolve(config: RpcConfig) -> str:
    token, given = resolve_token(config.token)
    if not config.is_loopback and not given:
        raise InvalidArgumentError(
            f"listening on {config.host} (not loopback) requires an explicit token: pass one from the launcher "
            "or set COREAI_RUNTIME_TOKEN; a generated token is only for loopback")
    check_listen(config.host, token_given=given, tls=config.tls)
    if config.tls is not None:
        config.tls.check()
    if config.max_request_bytes < 1024:
        raise InvalidArgumentError("max_request_bytes must be at least 1024")
    try:
        config.limits.check()
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None
    return token


class _SslOptions(TypedDict, total=False):
    """uvicorn.Config's TLS keywords (none: plain HTTP)."""

    ssl_certfile: str
    ssl_keyfile: str


class RpcServers:
    """The gRPC and Connect servers of one runtime, in the current event loop."""

    def __init__(self, services: RuntimeServices, config: RpcConfig = RpcConfig()) -> None:
        self.services = services
        self.config = config
        self.token = _resolve(config)
        self.grpc_port = 0
        self.connect_port = 0
        self.max_connections = 0  # per port, set by start()
        self._grpc: aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._uvicorn: GuardedUvicorn | None = None
        self._connect_app: ConnectRuntimeApp | None = None
        self._uvicorn_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._accept_errors = AcceptErrorHandler(services.metrics.accept_errors.inc)
        self._log_filter = RateLimitedLogFilter()

    @property
    def grpc_target(self) -> str:
        """What a gRPC channel connects to."""
        return grpc_address(self.config.host, self.grpc_port)

    @property
    def connect_url(self) -> str:
        """The base URL of the Connect transport."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        scheme = "https" if self.config.tls is not None else "http"
        return f"{scheme}://{host}:{self.connect_port}"

    async def start(self) -> None:
        """Bind both ports, write the token file, start serving; returns once both accept calls."""
        limits = self.config.limits
        open_files = raise_open_files_limit()
        self.max_connections = limits.connections_per_port(open_files)
        # Created here, inside the loop that will run it (grpc.aio binds to the current loop).
        known_servers = channelz_server_ids()
        self._grpc, self._health = create_grpc_server(self.services, self.token,
                                                      max_request_bytes=self.config.max_request_bytes,
                                                      limits=limits, max_connections=self.max_connections)
        grpc_ids = channelz_server_ids() - known_servers
        if len(grpc_ids) == 1:
            grpc_id = grpc_ids.pop()
            self.services.metrics.watch_connections("grpc", lambda: channelz_open_connections(grpc_id))
        address = grpc_address(self.config.host, self.config.grpc_port)
        try:
            if self.config.tls is not None:
                credentials = grpc.ssl_server_credentials([self.config.tls.read()])
                self.grpc_port = self._grpc.add_secure_port(address, credentials)
            else:
                self.grpc_port = self._grpc.add_insecure_port(address)
        except RuntimeError:  # grpc's way of saying the address is taken or invalid
            self.grpc_port = 0
        if self.grpc_port == 0:
            raise OSError(errno.EADDRINUSE, f"cannot listen for gRPC on port {self.config.grpc_port}")
        sock = bind_listener(self.config.host, self.config.connect_port, backlog=CONNECT_BACKLOG)
        self.connect_port = sock.getsockname()[1]
        app = self._connect_app = ConnectRuntimeApp(self.services, self.token, port=self.connect_port,
                                                    check_host=self.config.is_loopback,
                                                    max_request_bytes=self.config.max_request_bytes)
        guard = ConnectionGuard(self.max_connections, request_timeout_s=limits.request_timeout_s,
                                idle_timeout_s=limits.idle_timeout_s, metrics=self.services.metrics)
        # uvicorn's own deadline comes after ours (drain), which ends calls as UNAVAILABLE, not with a traceback.
        self._uvicorn = guarded_uvicorn(app, guard, idle_timeout_s=limits.idle_timeout_s,
                                        graceful_shutdown_s=int(self.config.grace_s + 2 * END_CALLS_S + 1),
                                        **self._ssl_options())
        self._uvicorn.handshake_timeout_s = limits.request_timeout_s
        if self.config.token_file is not None:
            write_token_file(self.config.token_file, self.token, root=self.config.token_root)
        loop = asyncio.get_running_loop()
        self._accept_errors.install(loop)
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).addFilter(self._log_filter)
        await self._publish_readiness(None)
        await self._grpc.start()
        self._uvicorn_task = asyncio.create_task(self._uvicorn.serve(sockets=[sock]))
        while not self._uvicorn.started:
            if self._uvicorn_task.done():
                await self._uvicorn_task  # raises the startup error
                raise OSError("the Connect server stopped during startup")
            await asyncio.sleep(0.01)
        self._watch_task = asyncio.create_task(self._watch_readiness())
        logger.info("runtime RPC ready: gRPC port %d, Connect port %d, %s%s; at most %d connections per port "
                    "(file-handle limit %s), request timeout %g s, idle timeout %g s",
                    self.grpc_port, self.connect_port,
                    "loopback only" if self.config.is_loopback else "listening beyond loopback",
                    ", TLS" if self.config.tls is not None else "",
                    self.max_connections, open_files if open_files is not None else "unknown",
                    limits.request_timeout_s, limits.idle_timeout_s)

    def _ssl_options(self) -> _SslOptions:
        """uvicorn's TLS settings for the Connect port (none without --tls-cert)."""
        tls = self.config.tls
        return _SslOptions() if tls is None else _SslOptions(ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key))

    async def _publish_readiness(self, last: bool | None) -> bool:
        """Publish readiness to grpc.health.v1 when it changed since last; returns it."""
        ready = self.services.orchestrator.readiness().ready
        if ready != last and self._health is not None:
            await publish_health(self._health, ready)
        return ready

    async def _watch_readiness(self) -> None:
        """Follow the model's readiness (a read of state in memory) for gRPC health watchers."""
        last: bool | None = None
        while True:
            try:
                last = await self._publish_readiness(last)
            except Exception:  # a failing read must not end the watch
                logger.warning("reading readiness failed", exc_info=True)
            await asyncio.sleep(READINESS_POLL_S)

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls, let in-flight ones finish for up to grace seconds, then cancel the rest."""
        grace = self.config.grace_s if grace is None else grace
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        if self._health is not None:
            await self._health.enter_graceful_shutdown()  # probes see NOT_SERVING while calls drain
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        # The loop keeps the accept-error handler after the stop: grpc.aio's shutdown notice for a stop
        # past its grace period reaches the loop after this returns (see net/limits.late_result).
        try:
            await asyncio.gather(self._stop_grpc(grace), self._drain_connect(grace), self._wait_uvicorn())
        finally:
            for name in _NOISY_LOGGERS:
                logging.getLogger(name).removeFilter(self._log_filter)

    async def _stop_grpc(self, grace: float) -> None:
        if self._grpc is not None:
            await self._grpc.stop(grace)

    async def _drain_connect(self, grace: float) -> None:
        if self._connect_app is not None:
            await self._connect_app.drain(grace)

    async def _wait_uvicorn(self) -> None:
        if self._uvicorn_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._uvicorn_task


class ServedEndpoints:
    """Where started RPC servers answer, read from `self.servers`: the token, the ports, the client addresses.

    One set for every holder of running servers: `RpcServersHandle` here, the tests' `RuntimeThread`.
    """

    servers: RpcServers

    @property
    def token(self) -> str:
        """The bearer token clients must send."""
        return self.servers.token

    @property
    def grpc_port(self) -> int:
        """The bound gRPC port."""
        return self.servers.grpc_port

    @property
    def connect_port(self) -> int:
        """The bound Connect (HTTP) port."""
        return self.servers.connect_port

    @property
    def grpc_target(self) -> str:
        """What a gRPC channel connects to."""
        return self.servers.grpc_target

    @property
    def connect_url(self) -> str:
        """The base URL of the Connect transport."""
        return self.servers.connect_url


class RpcServersHandle(ServedEndpoints):
    """Servers running on their own event loop thread (what `serve` holds); `stop()` ends them."""

    def __init__(self, servers: RpcServers, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.servers = servers
        self._loop = loop
        self._thread = thread
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the servers (and the services' coroutines) run on."""
        return self._loop

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: in-flight calls finish (up to grace seconds); idempotent."""
        if self._stopped:
            return
        self._stopped = True
        asyncio.run_coroutine_threadsafe(self.servers.stop(grace), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    def __enter__(self) -> RpcServersHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_rpc_servers(services: RuntimeServices, config: RpcConfig = RpcConfig()) -> RpcServersHandle:
    """Start both transports on a background thread; returns once they accept calls (or raises why not)."""
    servers = RpcServers(services, config)
    loop = asyncio.new_event_loop()
    started: dict[str, BaseException | None] = {}
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(servers.start())
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            started["error"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="coreai-rpc", daemon=True)
    thread.start()
    ready.wait()
    if started.get("error") is not None:
        thread.join()
        raise started["error"]  # type: ignore[misc]
    return RpcServersHandle(servers, loop, thread)
