"""Resource bounds of the transports: file handles, connection caps, timeouts, and a log that cannot flood.

A desktop process gets 1024 file handles (256 for a macOS GUI app); ~1100 connections that send
half a request and stop used to exhaust them, after which health, saves and gRPC all failed and
every failed accept was logged with a traceback (326 MB in 85 s). Here: the soft limit is raised
to the hard one where the OS allows; each port (gRPC, Connect, and the model port: hosted or
scripted, model/public_port.py) gets a connection cap that together stay below the limit (with room
for save files and the model server); idle and half-sent requests time out; and repeated errors are
logged once per interval with a count.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

RESERVED_FILES = 128
"""File handles kept for everything but client connections: saves, locks, the model child, gRPC's own."""
ACCEPT_BATCH = 64
"""Listen backlog of the HTTP port: asyncio accepts up to this many sockets per wake-up before any is
admitted or refused, so a burst may overshoot the cap by this much; it must fit in RESERVED_FILES."""
MAX_CONNECTIONS_PER_PORT = 1024
MIN_CONNECTIONS_PER_PORT = 8
GUARDED_PORTS = 3
"""Ports that share the file-handle limit: gRPC, Connect and the model port (hosted or scripted)."""
DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_IDLE_TIMEOUT_S = 60.0  # long enough that a kept client connection rarely needs a new one
_MACOS_OPEN_MAX = 10240  # setrlimit refuses RLIM_INFINITY there; OPEN_MAX is the usable ceiling
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True)
class TransportLimits:
    """Per-port connection cap and timeouts, the same on the gRPC and the Connect port."""

    max_connections: int | None = None
    """Connections per port; None derives it from the file-handle limit (`connection_cap`)."""
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    """A request (HTTP headers and body; gRPC's connection handshake) must arrive whole within this."""
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    """A connection with no call in progress is closed after this (clients reconnect by themselves)."""

    def check(self) -> None:
        """Raise ValueError naming a limit that makes no sense."""
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if self.request_timeout_s <= 0 or self.idle_timeout_s <= 0:
            raise ValueError("request and idle timeouts must be positive")

    def connections_per_port(self, open_files: int | None) -> int:
        """The cap in force: the explicit one, else the one the file-handle limit allows."""
        return self.max_connections if self.max_connections is not None else connection_cap(open_files)


def raise_open_files_limit() -> int | None:
    """Raise this process's soft file-handle limit to the hard one where allowed; the soft limit now (None: unknown)."""
    try:
        import resource
    except ImportError:  # Windows: no per-process descriptor limit for sockets to raise
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if sys.platform == "darwin" and (hard == resource.RLIM_INFINITY or hard > _MACOS_OPEN_MAX):
        target = _MACOS_OPEN_MAX
    if soft != resource.RLIM_INFINITY and (target == resource.RLIM_INFINITY or target > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            log.info("file-handle limit stays at %d (the OS refused to raise it)", soft)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_cap(open_files: int | None) -> int:
    """Connections per port for a file-handle limit: the guarded ports together stay RESERVED_FILES below it."""
    if open_files is None:
        return MAX_CONNECTIONS_PER_PORT
    share = (open_files - RESERVED_FILES) // GUARDED_PORTS
    return max(MIN_CONNECTIONS_PER_PORT, min(MAX_CONNECTIONS_PER_PORT, share))


class RateLimitedLog:
    """Logs one warning per interval for a repeated event, with how many were not logged meanwhile."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        """Events logged through logger at most once per interval_s."""
        self._logger = logger
        self._interval = interval_s
        self._next = 0.0
        self._suppressed = 0

    def hit(self, message: str, *args: Any) -> None:
        """Count one event; log it (no traceback) if the interval has passed."""
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        suffix = f" ({self._suppressed} more since the last report)" if self._suppressed else ""
        self._logger.warning(message + suffix, *args)
        self._suppressed = 0
        self._next = now + self._interval


class AcceptErrorHandler:
    """An event-loop exception handler: failed accepts (out of file handles) are counted and rate-limited.

    asyncio reports each failed accept with a traceback and retries a second later; with many
    listeners or loops that adds up. A result set on a future already cancelled is dropped too
    (`late_result`). Every other error goes to the handler that was there before.
    """

    def __init__(self, on_error: Any = None, interval_s: float = 10.0) -> None:
        """on_error() is called for each failed accept (a metrics counter)."""
        self._log = RateLimitedLog(log, interval_s)
        self._on_error = on_error
        self._previous: Any = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Become loop's exception handler (keeping the previous one for other errors)."""
        self._previous = loop.get_exception_handler()
        loop.set_exception_handler(self)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _OUT_OF_FILES and "accept" in str(context.get("message", "")):
            if self._on_error is not None:
                self._on_error()
            self._log.hit("cannot accept connections: %s (file-handle limit reached?)", exc.strerror or "error")
            return
        if late_result(context):
            log.debug("a result came for a future already cancelled (a gRPC stop past its grace period)")
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)


def late_result(context: dict[str, Any]) -> bool:
    """Whether a loop error is `Future.set_result` called back on a future that was cancelled first.

    grpc.aio's completion queue hands its shutdown notice to the loop as `set_result` on a future that a
    stop whose grace period ran out has cancelled already; asyncio then logs a traceback at every such stop
    ("Exception in callback Future.set_result(None)", seen in the fresh-clone suite). Nothing is lost.
    """
    if not isinstance(context.get("exception"), asyncio.InvalidStateError):
        return False
    callback = getattr(context.get("handle"), "_callback", None)
    future = getattr(callback, "__self__", None)
    return (getattr(callback, "__name__", "") == "set_result" and isinstance(future, asyncio.Future)
            and future.cancelled())


class RateLimitedLogFilter(logging.Filter):
    """A logger filter: each message template passes at most once per interval (a flood of bad requests
    makes the HTTP server log one line per request)."""

    def __init__(self, interval_s: float = 10.0) -> None:
        """Templates pass at most once per interval_s."""
        super().__init__()
        self._interval = interval_s
        self._next: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """True when this template has not passed within the interval."""
        key = str(record.msg)
        now = time.monotonic()
        if now < self._next.get(key, 0.0):
            return False
        if len(self._next) > 256:  # templates are few; never let the table grow with odd messages
            self._next.clear()
        self._next[key] = now + self._interval
        return True
