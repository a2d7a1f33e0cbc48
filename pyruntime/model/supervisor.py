"""The watchdog of a hosted model server: notices a child that died, hangs or makes no progress, restarts it.

A thread (not a task of the runtime's event loop, so a busy loop cannot delay it) probes the
child's `GET /coreai/status`, which the child answers without waiting for the model lock. It
restarts the child when:

- the process exited;
- `failed_probes` probes in a row got no answer within `probe_timeout_s` (hung, SIGSTOPped);
- a generation whose client disconnected has not stopped after `cancel_grace_s` (the child stops
  a cancelled generation at its next token; only a stuck decode, or a long prompt evaluation,
  outlives the grace);
- a generation made no progress (no new token) for `stall_s`.

While it restarts (and after it gave up) `state` says so and `check_available()` raises
`ModelUnavailableError` with a retry hint, so turns fail at once instead of hanging. It gives up
(`FAILED`) after `max_restarts` restarts within `restart_window_s`.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from pyruntime.model.errors import ModelUnavailableError
from pyruntime.model.hosting import LlamaServerProcess

log = logging.getLogger(__name__)


class ModelState(str, enum.Enum):
    """Where the hosted model stands; `ModelSupervisor.state` (the health endpoints read it)."""

    LOADING = "loading"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"


@dataclass(frozen=True)
class WatchdogSettings:
    """When the watchdog restarts the child (seconds unless named otherwise)."""

    interval_s: float = 1.0
    probe_timeout_s: float = 2.0
    failed_probes: int = 3
    cancel_grace_s: float = 30.0
    stall_s: float = 300.0
    max_restarts: int = 5
    restart_window_s: float = 600.0
    start_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("interval_s", "probe_timeout_s", "cancel_grace_s", "stall_s", "restart_window_s",
                     "start_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.failed_probes < 1 or self.max_restarts < 0:
            raise ValueError("failed_probes must be >= 1 and max_restarts >= 0")


class ModelSupervisor:
    """Starts a `LlamaServerProcess`, watches it and restarts it in place (same port, same key)."""

    def __init__(self, server: LlamaServerProcess, settings: WatchdogSettings | None = None) -> None:
        """Supervise `server` (not started yet, or already started)."""
        self.server = server
        self.settings = settings or WatchdogSettings()
        self._lock = threading.Lock()
        self._state = ModelState.READY if server.is_alive() else ModelState.LOADING
        self._reason = "" if server.is_alive() else "the model is loading"
        self._restart_times: deque[float] = deque()
        self.restarts = 0  # completed restarts, for metrics
        self.last_restart_reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._misses = 0

    # -- what others read -------------------------------------------------------------------

    @property
    def state(self) -> ModelState:
        """loading | ready | restarting | failed."""
        return self._state

    @property
    def reason(self) -> str:
        """Why the model is not ready ("" when it is); never carries request text."""
        return self._reason

    def ready(self) -> bool:
        """True when turns can use the model now."""
        return self._state is ModelState.READY

    def retry_after_s(self) -> float | None:
        """A hint for callers: about how long until the model is back (None when it will not be)."""
        if self._state is ModelState.FAILED:
            return None
        startup = self.server.startup_seconds or 5.0
        return max(1.0, round(startup + self.settings.interval_s, 1))

    def check_available(self) -> None:
        """Raise `ModelUnavailableError` (with a retry hint) unless the model is ready."""
        state, reason = self._state, self._reason
        if state is ModelState.READY:
            return
        if state is ModelState.FAILED:
            raise ModelUnavailableError(f"the model server failed and is no longer restarted ({reason}); "
                                        "restart the runtime")
        retry = self.retry_after_s()
        raise ModelUnavailableError(f"the model server is {state.value} ({reason}); retry in about {retry:g} s",
                                    retry_after_s=retry)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model (blocking), then watch it."""
        self._set(ModelState.LOADING, "the model is loading")
        try:
            self.server.start(timeout=self.settings.start_timeout_s)
        except BaseException as exc:
            self._set(ModelState.FAILED, f"the model did not start ({type(exc).__name__})")
            raise
        self._set(ModelState.READY, "")
        self.watch()

    def watch(self) -> None:
        """Start the watchdog thread (the server must be running)."""
        if self._thread is not None:
            return
        self._set(ModelState.READY, "")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="model-watchdog", daemon=True)
        self._thread.start()

    def stop_watching(self, timeout: float = 5.0) -> None:
        """Stop the watchdog (the server keeps running)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def close(self) -> None:
        """Stop watching and stop the server."""
        self.stop_watching()
        self.server.stop()

    # -- the watchdog -----------------------------------------------------------------------

    def _set(self, state: ModelState, reason: str) -> None:
        with self._lock:
            self._state, self._reason = state, reason

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.interval_s):
            problem = self.check_once()
            if problem is None:
                continue
            if not self._restart(problem):
                return

    def check_once(self) -> str | None:
        """One probe: why the child must be restarted, or None when it is fine."""
        if not self.server.is_alive():
            return "the model server exited"
        try:
            status = self.server.status(timeout=self.settings.probe_timeout_s)
        except Exception:  # noqa: BLE001 - any failure to answer counts as a miss
            self._misses += 1
            if self._misses >= self.settings.failed_probes:
                return f"the model server did not answer {self._misses} probes"
            return None
        self._misses = 0
        return stuck_generation(status, self.settings)

    def _restart(self, problem: str) -> bool:
        """Kill and start the child again; False when it gave up (FAILED)."""
        now = time.monotonic()
        window = self.settings.restart_window_s
        while self._restart_times and now - self._restart_times[0] > window:
            self._restart_times.popleft()
        if len(self._restart_times) >= self.settings.max_restarts:
            log.error("model server: %s; %d restarts within %.0f s already, giving up",
                      problem, len(self._restart_times), window)
            self._set(ModelState.FAILED, problem)
            self.server.kill()
            return False
        self._restart_times.append(now)
        self.last_restart_reason = problem
        log.warning("model server: %s; restarting it", problem)
        self._set(ModelState.RESTARTING, problem)
        self.server.kill()
        self._misses = 0
        if self._stop.is_set():
            return False  # shutting down: the owner stops the server; start nothing new
        try:
            self.server.start(timeout=self.settings.start_timeout_s)
        except Exception as exc:  # noqa: BLE001 - the next probe sees the dead child and tries again
            log.error("model server restart failed (%s)", type(exc).__name__)
            return not self._stop.is_set()
        if self._stop.is_set():
            self.server.stop()  # the owner may have stopped the old child while this one loaded
            return False
        self.restarts += 1
        self._set(ModelState.READY, "")
        log.info("model server restarted in %.2f s (%d restart(s) so far)",
                 self.server.startup_seconds or 0.0, self.restarts)
        return True


def stuck_generation(status: dict[str, Any], settings: WatchdogSettings) -> str | None:
    """Why the generation the child reports is stuck (pure), or None."""
    if not status.get("generating"):
        return None
    cancelled = status.get("cancelled_s")
    if isinstance(cancelled, int | float) and cancelled > settings.cancel_grace_s:
        return f"a cancelled generation did not stop within {settings.cancel_grace_s:g} s"
    idle = status.get("since_progress_s")
    if isinstance(idle, int | float) and idle > settings.stall_s:
        return f"the generation made no progress for {settings.stall_s:g} s"
    return None
