"""The watchdog of the hosted engine: notices a llama-server that died, hangs or makes no progress, restarts it.

A thread (not a task of the runtime's event loop, so a busy loop cannot delay it) probes the engine:
`GET /health` (answered by its HTTP threads, even while it decodes) and `GET /slots` (answered by its
main loop between decode steps). It restarts the engine when:

- the process exited;
- `failed_probes` health probes in a row got no answer within `probe_timeout_s` (hung, SIGSTOPped);
- a slot made no progress (no new prompt token evaluated, no new token decoded) for `stall_s`, or the
  main loop has not answered `/slots` for that long while health still answers (a stuck decode).

Cancelled generations stop in llama-server itself: a closed stream cancels its task. (A stream that
sends nothing - a long prompt, held-back UTF-8 - is checked for a closed connection only after a
second without any result for any request: every `/slots` answer counts, so the slots are probed
every `slots_interval_s`, longer than that second. Whatever happens, `max_tokens` ends it.) While it
restarts, `state` says so and `check_available()` raises `ModelUnavailableError` with a retry hint,
so turns fail at once instead of hanging.

Degrade, never die: a restart that fails is tried again after a back-off that doubles up to
`max_backoff_s`. After `max_restarts` restarts within `restart_window_s` the state is FAILED (with
why), and the watchdog keeps trying at the longest back-off: the runtime goes on serving memory,
history, exports and health, and a model that can be started again (a flood that ended, a model
file put back) is READY again without a restart of the runtime.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.hosting.process import LlamaServerProcess

log = logging.getLogger(__name__)


class ModelState(enum.StrEnum):
    """Where the hosted model stands; `ModelSupervisor.state` (the health endpoints read it)."""

    LOADING = "loading"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"


@dataclass(frozen=True)
class WatchdogSettings:
    """When the watchdog restarts the engine (seconds unless named otherwise)."""

    interval_s: float = 1.0
    slots_interval_s: float = 2.5  # /slots wakes every waiting stream of llama-server: keep it > 1 s apart
    probe_timeout_s: float = 2.0
    failed_probes: int = 3
    stall_s: float = 300.0
    max_restarts: int = 5
    restart_window_s: float = 600.0
    start_timeout_s: float = 120.0
    first_backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("interval_s", "slots_interval_s", "probe_timeout_s", "stall_s", "restart_window_s",
                     "start_timeout_s", "first_backoff_s", "max_backoff_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.failed_probes < 1 or self.max_restarts < 0:
            raise ValueError("failed_probes must be >= 1 and max_restarts >= 0")
        if self.max_backoff_s < self.first_backoff_s:
            raise ValueError("max_backoff_s must be at least first_backoff_s")


@dataclass
class SlotProgress:
    """What the watchdog remembers of the slots: each busy slot's last counters and when they last changed."""

    seen: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    since: dict[int, float] = field(default_factory=dict)

    def update(self, slots: Sequence[Any], now: float) -> float:
        """Take `/slots`; the longest time a busy slot has gone without progress (0 when none is stuck)."""
        worst = 0.0
        busy = set()
        for slot in slots:
            if not isinstance(slot, dict) or not slot.get("is_processing"):
                continue
            number = int(slot.get("id", -1))
            busy.add(number)
            counters = _counters(slot)
            if self.seen.get(number) != counters:
                self.seen[number], self.since[number] = counters, now
            worst = max(worst, now - self.since[number])
        for gone in set(self.seen) - busy:
            del self.seen[gone]
            del self.since[gone]
        return worst


def _counters(slot: dict[str, Any]) -> tuple[Any, ...]:
    token = (slot.get("next_token") or [{}])[0] if isinstance(slot.get("next_token"), list) else {}
    return (slot.get("id_task"), slot.get("n_prompt_tokens_processed"), token.get("n_decoded"))


def next_backoff(previous: float | None, settings: WatchdogSettings) -> float:
    """The wait before the next start attempt: the first back-off, then doubled, at most the maximum (pure)."""
    if previous is None:
        return settings.first_backoff_s
    return min(settings.max_backoff_s, previous * 2)


class ModelSupervisor:
    """Starts a `LlamaServerProcess`, watches it and restarts it in place (same port, same keys)."""

    def __init__(self, server: LlamaServerProcess, settings: WatchdogSettings | None = None) -> None:
        """Supervise `server` (not started yet, or already started)."""
        self.server = server
        self.settings = settings or WatchdogSettings()
        self._lock = threading.Lock()
        self._state = ModelState.READY if server.is_alive() else ModelState.LOADING
        self._reason = "" if server.is_alive() else "the model is loading"
        self._restart_times: deque[float] = deque()
        self.restarts = 0  # completed restarts, for metrics
        self.failed_starts = 0  # start attempts that failed, for metrics
        self.last_restart_reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._misses = 0
        self._progress = SlotProgress()
        self._slots_answered = time.monotonic()
        self._slots_probed = 0.0
        self._backoff: float | None = None
        self._next_attempt = 0.0

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

    def retry_after_s(self) -> float:
        """A hint for callers: about how long until the next attempt brings the model back."""
        if self._state in (ModelState.FAILED, ModelState.RESTARTING) and self._backoff is not None:
            return max(1.0, round(max(0.0, self._next_attempt - time.monotonic()) + (self.server.startup_seconds
                                                                                    or 5.0), 1))
        startup = self.server.startup_seconds or 5.0
        return max(1.0, round(startup + self.settings.interval_s, 1))

    def check_available(self) -> None:
        """Raise `ModelUnavailableError` (with a retry hint) unless the model is ready."""
        state, reason = self._state, self._reason
        if state is ModelState.READY:
            return
        retry = self.retry_after_s()
        if state is ModelState.FAILED:
            raise ModelUnavailableError(f"the model server failed ({reason}); the runtime keeps trying to start it, "
                                        f"next in about {retry:g} s", retry_after_s=retry)
        raise ModelUnavailableError(f"the model server is {state.value} ({reason}); retry in about {retry:g} s",
                                    retry_after_s=retry)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model (blocking), then watch it; a failed first load raises (nothing to degrade to yet)."""
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
        self._slots_answered = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="model-watchdog", daemon=True)
        self._thread.start()

    def stop_restarting(self) -> None:
        """A stop has begun: from now on the watchdog starts nothing (non-blocking; `stop_watching` joins it)."""
        self._stop.set()

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
            if self._state in (ModelState.RESTARTING, ModelState.FAILED) and not self.server.is_alive():
                if time.monotonic() >= self._next_attempt:
                    self._attempt_start(self._reason or "the model server is down")
                continue
            problem = self.check_once()
            if problem is not None:
                self._restart(problem)

    def check_once(self) -> str | None:
        """One probe: why the engine must be restarted, or None when it is fine."""
        if not self.server.is_alive():
            return "the model server exited"
        try:
            healthy = self.server.health(timeout=self.settings.probe_timeout_s)
        except Exception:  # noqa: BLE001 - any failure to answer counts as a miss
            healthy = False
        if not healthy:
            self._misses += 1
            if self._misses >= self.settings.failed_probes:
                return f"the model server did not answer {self._misses} probes"
            return None
        self._misses = 0
        now = time.monotonic()
        if now - self._slots_probed < self.settings.slots_interval_s:
            return None
        self._slots_probed = now
        try:
            status = self.server.status(timeout=self.settings.probe_timeout_s)
        except Exception:  # noqa: BLE001 - health answers, the main loop does not: a long decode, or stuck
            if now - self._slots_answered > self.settings.stall_s:
                return f"the model server made no progress for {self.settings.stall_s:g} s"
            return None
        self._slots_answered = now
        slots = status.get("slots")
        stuck = self._progress.update(slots if isinstance(slots, list) else [], now)
        if stuck > self.settings.stall_s:
            return f"the generation made no progress for {self.settings.stall_s:g} s"
        return None

    def _restart(self, problem: str) -> None:
        """Kill the engine and start it again at once (the first time) or after the back-off."""
        if self._stop.is_set():
            return  # a stop has begun: the owner stops the engine (a probe that ended after it changes nothing)
        self.last_restart_reason = problem
        log.warning("model server: %s; restarting it", problem)
        self._set(ModelState.RESTARTING, problem)
        self.server.kill()
        self._misses = 0
        self._progress = SlotProgress()
        self._backoff = None
        self._attempt_start(problem)

    def _attempt_start(self, problem: str) -> None:
        """One start attempt; on failure schedule the next (backing off) and say FAILED past the restart budget."""
        if self._stop.is_set():
            return  # shutting down: the owner stops the server; start nothing new
        now = time.monotonic()
        window = self.settings.restart_window_s
        while self._restart_times and now - self._restart_times[0] > window:
            self._restart_times.popleft()
        over_budget = len(self._restart_times) >= self.settings.max_restarts
        if over_budget and self._backoff is None:
            self._backoff = self.settings.max_backoff_s / 2  # go straight to the longest wait
        self._restart_times.append(now)
        try:
            self.server.restart(timeout=self.settings.start_timeout_s)
        except Exception as exc:  # noqa: BLE001 - tried again after the back-off
            self.failed_starts += 1
            self._backoff = next_backoff(self._backoff, self.settings)
            self._next_attempt = time.monotonic() + self._backoff
            failed = over_budget or len(self._restart_times) > self.settings.max_restarts
            why = f"{problem}; the restart failed ({type(exc).__name__})"
            log.error("model server restart failed (%s); next attempt in %.0f s", type(exc).__name__, self._backoff)
            self._set(ModelState.FAILED if failed else ModelState.RESTARTING, why)
            return
        if self._stop.is_set():
            self.server.stop()  # the owner may have stopped the old engine while this one loaded
            return
        self.restarts += 1
        self._backoff = None
        self._slots_answered = time.monotonic()
        self._set(ModelState.READY, "")
        log.info("model server restarted in %.2f s (%d restart(s) so far)",
                 self.server.startup_seconds or 0.0, self.restarts)

