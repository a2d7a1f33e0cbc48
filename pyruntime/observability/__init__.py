"""What an operator sees: log setup (text or JSON, trace ids) and the Prometheus metrics of a runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyruntime._lazy import lazy_exports

if TYPE_CHECKING:
    from pyruntime.observability.logs import (
        LOG_FORMATS,
        LOG_LEVELS,
        configure_logging,
        current_trace_id,
        loggable_trace_id,
        new_trace_id,
        trace_context,
    )
    from pyruntime.observability.metrics import CONTENT_TYPE, RuntimeMetrics

_EXPORTS = {
    **dict.fromkeys(("LOG_FORMATS", "LOG_LEVELS", "configure_logging", "current_trace_id", "loggable_trace_id",
                     "new_trace_id", "trace_context"), "pyruntime.observability.logs"),
    **dict.fromkeys(("CONTENT_TYPE", "RuntimeMetrics"), "pyruntime.observability.metrics"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CONTENT_TYPE",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "RuntimeMetrics",
    "configure_logging",
    "current_trace_id",
    "loggable_trace_id",
    "new_trace_id",
    "trace_context",
]
