"""The connection pool of a model client: one aiohttp session per event loop, and the one safe retry.

Kept-alive connections belong to the loop that opened them, so a client used from a new loop (a script calling
`asyncio.run` per turn) starts a new session and lets the old one go. Connections expire before llama-server
closes them, a proxy from the environment applies to a TCP engine only, and a request that went out on a
connection the server was closing is sent once more. The client (`http.py`) says what to send; this says how it
travels.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

CONNECT_TIMEOUT_S = 5.0
# llama-server (cpp-httplib) closes a connection idle for 5 s (CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND); a client
# that keeps one for 5 s too races the close on reuse at that boundary. Ours expire first.
KEEPALIVE_EXPIRY_S = 2.0
DEFAULT_CONNECTIONS = 100  # the pool's size when the caller does not say how many calls run at once


class LoopPool:
    """The aiohttp session of the running event loop, made on first use there (or the one given, never closed)."""

    def __init__(self, base_url: str, *, timeout: float, unix_socket: str | Callable[[], str | None] | None = None,
                 connections: int | None = None, middlewares: Sequence[aiohttp.ClientMiddlewareType] = (),
                 given: aiohttp.ClientSession | None = None) -> None:
        """`timeout` bounds a connect and each read; `unix_socket` (or a function naming it, asked per loop) replaces
        `base_url`'s host and port; `connections`: how many are kept alive; `given` is used as it is."""
        self.base_url = base_url
        self.timeout = timeout
        self._unix_socket = unix_socket
        self._connections = connections or DEFAULT_CONNECTIONS
        self._middlewares = tuple(middlewares)
        self._given = given
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The session of the running event loop (a new one when the loop changed)."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            if self._session is not None:
                _abandon(self._session)
            self._session, self._loop = self._new_session(), loop
        return self._session

    def _new_session(self) -> aiohttp.ClientSession:
        """A session whose pool keeps alive as many connections as calls run at once (a pool that keeps fewer opens
        a new connection for most calls). Waiting for a pooled connection counts against `timeout`, as reading does."""
        path = self._unix_socket() if callable(self._unix_socket) else self._unix_socket
        connector = (aiohttp.UnixConnector(path, limit=self._connections, keepalive_timeout=KEEPALIVE_EXPIRY_S)
                     if path else aiohttp.TCPConnector(limit=self._connections, keepalive_timeout=KEEPALIVE_EXPIRY_S))
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_connect=CONNECT_TIMEOUT_S,
                                        sock_read=self.timeout)
        # A proxy from the environment (HTTP(S)_PROXY, NO_PROXY) applies to a TCP engine, never to the hosted engine's
        # socket; it is looked up once here (aiohttp's trust_env looks it up, and reads ~/.netrc, for every request).
        proxy, proxy_auth = (None, None) if path else env_proxy(self.base_url)
        return aiohttp.ClientSession(connector=connector, timeout=timeout, proxy=proxy, proxy_auth=proxy_auth,
                                     middlewares=self._middlewares)

    async def request(self, method: str, url: str, **options: Any) -> aiohttp.ClientResponse:
        """Send a request, up to its response's head; a kept-alive connection the server closed before answering is
        retried once.

        llama-server closes its connection after every streamed reply, a moment after the reply's end: a request
        sent at once may go out on the connection it is closing (toolchain notes); nothing was received or
        generated then, so sending it again on a new connection is safe. Which error that shows as depends on when
        the close lands (`_closed_before_answering`).
        """
        try:
            return await self.session.request(method, url, **options)
        except aiohttp.ClientConnectionError as exc:
            if not _closed_before_answering(exc):
                raise
            return await self.session.request(method, url, **options)

    async def aclose(self) -> None:
        """Close the session made here (a given one is left open)."""
        if self._given is None and self._session is not None:
            if self._loop is asyncio.get_running_loop():
                await self._session.close()
            else:
                _abandon(self._session)
        self._session = None


def env_proxy(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for `url`, with its credentials (None: none, or NO_PROXY covers it)."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None
    return str(proxy), auth


def _closed_before_answering(exc: aiohttp.ClientConnectionError) -> bool:
    """A kept-alive connection the engine closed between two requests fails the next one before any answer: with
    "disconnected" if the close was seen, else a reset on the read or a broken pipe on the write (on the Unix socket,
    under load). Nothing was generated then; one retry on a new connection is safe. A refused connect is no such
    case (nothing kept alive failed), nor is a timeout."""
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ServerTimeoutError):
        return False
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | aiohttp.ClientConnectionResetError)


def _abandon(session: aiohttp.ClientSession) -> None:
    """Let go of a session whose event loop has ended: its connections cannot be closed from another loop, and
    leaving them to the old loop must not log an "unclosed" error when they are collected."""
    connector = session.connector
    session.detach()
    if connector is not None:
        connector._close()  # the synchronous part of `close()`: marks it closed; nothing to await on a dead loop
