"""`RuntimeServices`: both services of one runtime over its stores and role policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coreai.v1.orchestrator_pb2 import ModelDownload
from pyruntime.observability import RuntimeMetrics
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig
from pyruntime.service.admission import TurnAdmission
from pyruntime.service.memory_store import MemoryStoreService
from pyruntime.service.model_memory import ModelMemorySource
from pyruntime.service.orchestrator import OrchestratorService, TurnRunner
from pyruntime.service.readiness import ReadinessSource
from pyruntime.stores import StoreBundle


@dataclass
class RuntimeServices:
    """Both services of one runtime, sharing its stores and role policy."""

    memory_store: MemoryStoreService
    orchestrator: OrchestratorService

    @classmethod
    def create(cls, stores: StoreBundle, policy: AgentMemoryPolicy | None = None, *,
               runner: TurnRunner | None = None, model_alias: str = "",
               readiness: ReadinessSource | None = None, admission: TurnAdmission | None = None,
               metrics: RuntimeMetrics | None = None,
               model_memory: ModelMemorySource | None = None, stop_requested: Callable[[], None] | None = None,
               model_download: Callable[[], ModelDownload | None] | None = None,
               role_publisher: Callable[[RoleMemoryConfig], None] | None = None) -> RuntimeServices:
        """The services over stores; without a runner the turn RPCs answer UNAVAILABLE; `role_publisher`: see
        `OrchestratorService`."""
        policy = policy if policy is not None else AgentMemoryPolicy()
        return cls(MemoryStoreService(stores, policy),
                   OrchestratorService(policy, runner, model_alias=model_alias, readiness=readiness,
                                       admission=admission, metrics=metrics, model_memory=model_memory,
                                       stop_requested=stop_requested, model_download=model_download,
                                       role_publisher=role_publisher))

    @property
    def metrics(self) -> RuntimeMetrics:
        """The runtime's metrics (served at `/metrics`)."""
        return self.orchestrator.metrics

    def close(self) -> None:
        """Wait for in-flight store calls to finish (graceful shutdown)."""
        self.memory_store.close()
