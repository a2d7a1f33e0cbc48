"""The `coreai.v1.Orchestrator` service: turns, the role policy and health, over proto messages.

Turns are delegated to a `TurnRunner` (the turn engine seen through proto messages); a runtime
started without a model has none, and its turn RPCs answer UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import pyruntime
from coreai.v1 import common_pb2, orchestrator_pb2 as pb
from pyruntime.errors import InvalidArgumentError
from pyruntime.policy import AgentMemoryPolicy, config_from_proto, config_to_proto
from pyruntime.scopes import DEFAULT_TURN_ROLE
from pyruntime.service.status import ServiceError, StatusCode, status_for
from pyruntime.service.targets import check_id, target_from_proto


class TurnRunner(Protocol):
    """Runs turns given as `RunTaskRequest`s (the target already checked)."""

    async def run_task(self, request: pb.RunTaskRequest) -> pb.RunTaskResponse:
        """The whole turn, once it has ended."""
        ...

    def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        """The turn as events while it happens; closing the iterator cancels the turn."""
        ...


ModelProbe = Callable[[], Awaitable[bool]]
"""Answers whether the model server is ready right now."""

NO_MODEL = "no model is configured in this runtime; start it with a model to run turns"


class OrchestratorService:
    """Implements every `coreai.v1.Orchestrator` RPC."""

    def __init__(self, policy: AgentMemoryPolicy, runner: TurnRunner | None = None, *,
                 model_alias: str = "", model_probe: ModelProbe | None = None) -> None:
        self._policy = policy
        self._runner = runner
        self._model_alias = model_alias
        self._model_probe = model_probe

    @property
    def policy(self) -> AgentMemoryPolicy:
        """The role policy this service configures."""
        return self._policy

    def _checked_runner(self, request: pb.RunTaskRequest) -> TurnRunner:
        target_from_proto(request.target, default_role=DEFAULT_TURN_ROLE)
        if request.timeout_ms < 0:
            raise ServiceError(StatusCode.INVALID_ARGUMENT, "timeout_ms must be >= 0 (0 = the runtime's default)")
        if request.HasField("max_output_tokens") and request.max_output_tokens < 1:
            raise ServiceError(StatusCode.INVALID_ARGUMENT, "max_output_tokens must be >= 1 when set")
        if self._runner is None:
            raise ServiceError(StatusCode.UNAVAILABLE, NO_MODEL)
        return self._runner

    async def run_task(self, request: pb.RunTaskRequest) -> pb.RunTaskResponse:
        """One turn of a role (blank role runs as Creator)."""
        try:
            runner = self._checked_runner(request)
            return await runner.run_task(request)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            raise status_for(exc) from None

    async def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        """The same turn as events; a caller that stops reading (disconnects) cancels it."""
        try:
            runner = self._checked_runner(request)
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None
        events = runner.stream_task(request)
        try:
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
                except Exception as exc:  # noqa: BLE001
                    raise status_for(exc) from None
                yield event
        finally:
            # Closing the runner's iterator is what cancels the turn on a disconnect.
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def configure_role(self, request: pb.ConfigureRoleRequest) -> common_pb2.RoleMemoryConfig:
        """Register or replace a role's config; returns it as stored."""
        try:
            if not request.HasField("config"):
                raise InvalidArgumentError("config is required")
            check_id("config.role_id", request.config.role_id)
            config = config_from_proto(request.config)
            self._policy.set(config)
            return config_to_proto(self._policy.get(config.role_id))
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def get_role_config(self, request: pb.GetRoleConfigRequest) -> common_pb2.RoleMemoryConfig:
        """A role's config; a role the policy does not know gets the defaults."""
        try:
            return config_to_proto(self._policy.get(check_id("role_id", request.role_id)))
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def list_roles(self, request: pb.ListRolesRequest) -> pb.ListRolesResponse:
        """Every built-in and configured role, sorted by id."""
        return pb.ListRolesResponse(roles=[config_to_proto(c) for c in self._policy.roles()])

    async def health(self, request: pb.HealthRequest) -> pb.HealthResponse:
        """Ready to serve calls; whether the model answers too."""
        model_ready = False
        if self._model_probe is not None:
            try:
                model_ready = bool(await self._model_probe())
            except Exception:  # noqa: BLE001 - a failing probe means "not ready", not an error
                model_ready = False
        return pb.HealthResponse(ready=True, model=self._model_alias, version=pyruntime.__version__,
                                 model_ready=model_ready)
