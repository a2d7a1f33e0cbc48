"""Readiness: whether the runtime can answer turns now, and why not, read without blocking.

Health answers (`/healthz`, `Orchestrator/Health`, `grpc.health.v1`) and `/metrics` read a
`ReadinessSource`: a plain function that looks at state already in memory. It never calls the
model server (llama.cpp's own `/v1/models` waits behind a running generation) nor takes a store
lock, so health keeps answering while the model is busy, hung or restarting.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class ModelState(enum.StrEnum):
    """Where the model stands."""

    NONE = "none"  # no model configured: stores only, turns answer UNAVAILABLE
    LOADING = "loading"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"


@dataclass(frozen=True)
class Readiness:
    """The model's state, why (for a person), and how often it was restarted."""

    state: ModelState
    reason: str = ""
    restarts: int = 0

    @property
    def ready(self) -> bool:
        """True when calls can be served as configured: the model is ready, or there is none to wait for."""
        return self.state in (ModelState.READY, ModelState.NONE)

    @property
    def model_ready(self) -> bool:
        """True when turns can reach the model."""
        return self.state is ModelState.READY


ReadinessSource = Callable[[], Readiness]
"""Reads the current readiness; must not block (no I/O, no locks held by calls)."""

NO_MODEL = Readiness(ModelState.NONE, "no model configured: turns answer UNAVAILABLE")
MODEL_LOADING = Readiness(ModelState.LOADING, "the model is loading")
EXTERNAL_MODEL = Readiness(ModelState.READY, "external model server (checked at start, not supervised)")


def no_model() -> Readiness:
    """The readiness of a runtime without a model."""
    return NO_MODEL


def hosted_model_readiness(host: object) -> Readiness:
    """The readiness of a hosted model server, read from its attributes only.

    The one place that knows the host's shape: a supervisor's `state` ('loading' | 'ready' |
    'restarting' | 'failed', with `reason` and `restarts`) when it has one, else a plain
    `LlamaServerProcess` (child alive and answered once -> ready).
    """
    restarts = int(getattr(host, "restarts", 0) or 0)
    state = getattr(host, "state", None)
    if state is not None:
        value = getattr(state, "value", state)
        try:
            parsed = ModelState(str(value).lower())
        except ValueError:
            parsed = ModelState.FAILED
        return Readiness(parsed, str(getattr(host, "reason", "") or _DEFAULT_REASONS[parsed]), restarts)
    is_alive = getattr(host, "is_alive", None)
    if getattr(host, "pid", None) is None:
        return Readiness(ModelState.LOADING, "the model server has not started yet", restarts)
    if callable(is_alive) and not is_alive():
        return Readiness(ModelState.FAILED, "the model server exited", restarts)
    if getattr(host, "startup_seconds", None) is None:
        return Readiness(ModelState.LOADING, "the model is loading", restarts)
    return Readiness(ModelState.READY, "", restarts)


_DEFAULT_REASONS = {
    ModelState.NONE: NO_MODEL.reason,
    ModelState.LOADING: "the model is loading",
    ModelState.READY: "",
    ModelState.RESTARTING: "the model server is being restarted",
    ModelState.FAILED: "the model server failed",
}
