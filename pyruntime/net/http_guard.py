"""Connection bounds for the Connect (HTTP/1.1) port: a cap, idle and partial-request timeouts.

uvicorn has a keep-alive timeout after a response but none for a connection that sends nothing
or half a request, and its `limit_concurrency` answers 503 only once a request is complete, so
half-open connections hold file handles forever. `ConnectionGuard` tracks every connection in
age order, in one of three phases:

- idle: no byte of a request yet -> closed after `idle_timeout_s`;
- receiving: a request has started but is not complete -> closed `request_timeout_s` after its
  first byte (a slow drip does not extend it);
- busy: a whole request is in and the app is answering -> never timed out here (the turn has
  its own deadline).

At the cap, a new connection evicts the oldest idle or receiving one (a flood of half-open
connections cannot lock out health probes or the game); only when every connection is busy is
the new one closed at once.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from pyruntime.net.limits import RateLimitedLog
from pyruntime.observability import RuntimeMetrics

log = logging.getLogger(__name__)

TRANSPORT = "connect"


class Phase(enum.Enum):
    """Where a connection is in its current request."""

    IDLE = "idle"
    RECEIVING = "receiving"
    BUSY = "busy"


class ConnectionGuard:
    """The open connections of one HTTP port, oldest first, with the cap and timeouts that apply to them."""

    def __init__(self, max_connections: int, *, request_timeout_s: float, idle_timeout_s: float,
                 metrics: RuntimeMetrics | None = None) -> None:
        """Bounds for one port; closed connections are counted in metrics by reason."""
        self.max_connections = max_connections
        self.request_timeout_s = request_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._metrics = metrics
        self._open: dict[GuardedH11Protocol, None] = {}  # insertion order = age
        self._cap_log = RateLimitedLog(log)
        if metrics is not None:
            metrics.watch_connections(TRANSPORT, lambda: len(self._open))

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._open)

    def protocol_class(self) -> type[GuardedH11Protocol]:
        """The uvicorn protocol class bound to this guard (pass as `http=` to uvicorn.Config)."""
        return type("BoundGuardedH11Protocol", (GuardedH11Protocol,), {"guard": self})

    def admit(self, connection: GuardedH11Protocol) -> bool:
        """Register a new connection; at the cap evict the oldest non-busy one, or refuse (False)."""
        if len(self._open) >= self.max_connections:
            victim = next((c for c in self._open if c.phase is not Phase.BUSY), None)
            if victim is None:
                self._closed("refused")
                self._cap_log.hit("connection cap (%d) reached with every connection busy: refusing new ones",
                                  self.max_connections)
                return False
            self.forget(victim)
            victim.transport.close()
            self._closed("evicted")
            self._cap_log.hit("connection cap (%d) reached: closing the oldest idle or half-sent connections",
                              self.max_connections)
        self._open[connection] = None
        return True

    def forget(self, connection: GuardedH11Protocol) -> None:
        """A connection is gone (idempotent)."""
        self._open.pop(connection, None)

    def _closed(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.connections_closed.labels(TRANSPORT, reason).inc()

    def timed_out(self, phase: Phase) -> None:
        """Count a connection closed by its deadline."""
        self._closed("idle" if phase is Phase.IDLE else "partial_request")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard` (a subclass with `guard` set is made per port)."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = Phase.IDLE
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit (or refuse) the connection and start its idle clock."""
        super().connection_made(transport)
        if not self.guard.admit(self):
            transport.close()
            return
        self._arm(self.guard.idle_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its clock."""
        self.guard.forget(self)
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """The first byte of a request starts its clock; a complete request stops it."""
        if self.phase is Phase.IDLE:
            self.phase = Phase.RECEIVING
            self._arm(self.guard.request_timeout_s)
        super().data_received(data)
        self._update_phase()

    def on_response_complete(self) -> None:
        """Back to idle (or straight to the next pipelined request)."""
        super().on_response_complete()
        if self.transport.is_closing():
            return
        self.phase = Phase.IDLE
        self._update_phase()
        if self.phase is Phase.IDLE:
            self._arm(self.guard.idle_timeout_s)

    def _update_phase(self) -> None:
        if self.conn.their_state is h11.DONE and self.phase is not Phase.BUSY:
            self.phase = Phase.BUSY
            self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.phase is Phase.BUSY or self.transport.is_closing():
            return
        self.guard.timed_out(self.phase)
        self.guard.forget(self)
        self.transport.close()
