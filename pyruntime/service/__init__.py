"""The runtime's one service implementation, transport-free: proto messages in and out, statuses for failures.

`pyruntime.rpc` serves it over gRPC and Connect; nothing here knows about either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyruntime._lazy import lazy_exports

if TYPE_CHECKING:
    from pyruntime.service.admission import TurnAdmission
    from pyruntime.service.memory_store import MemoryStoreService
    from pyruntime.service.model_memory import ModelMemory, ModelMemorySource
    from pyruntime.service.orchestrator import OrchestratorService, TurnRunner
    from pyruntime.service.readiness import Readiness, ReadinessSource
    from pyruntime.service.services import RuntimeServices
    from pyruntime.service.status import ServiceError, StatusCode, status_for

# Lazy: `pyruntime.service.status` (the status codes the client's errors use) must not import the services.
_EXPORTS = {
    "MemoryStoreService": "pyruntime.service.memory_store",
    **dict.fromkeys(("ModelMemory", "ModelMemorySource"), "pyruntime.service.model_memory"),
    **dict.fromkeys(("OrchestratorService", "TurnRunner"), "pyruntime.service.orchestrator"),
    **dict.fromkeys(("Readiness", "ReadinessSource"), "pyruntime.service.readiness"),
    "RuntimeServices": "pyruntime.service.services",
    **dict.fromkeys(("ServiceError", "StatusCode", "status_for"), "pyruntime.service.status"),
    "TurnAdmission": "pyruntime.service.admission",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "MemoryStoreService",
    "ModelMemory",
    "ModelMemorySource",
    "OrchestratorService",
    "Readiness",
    "ReadinessSource",
    "RuntimeServices",
    "ServiceError",
    "StatusCode",
    "TurnAdmission",
    "TurnRunner",
    "status_for",
]
