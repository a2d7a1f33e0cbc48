"""The `coreai.v1.Orchestrator` service: turns, the role policy and health, over proto messages.

Turns are delegated to a `TurnRunner` (the turn engine seen through proto messages); a runtime
started without a model has none, and its turn RPCs answer UNAVAILABLE. Every turn is admitted
first (`TurnAdmission`: it waits for a place within its deadline, and what it waited comes off the time
it then has; RESOURCE_EXHAUSTED with a retry hint when it cannot be served in time), runs with its trace id
on every log line, and is counted in the metrics by how it ended. Health reads a
`ReadinessSource` and never calls the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Final, Protocol

import pyruntime
from coreai.v1 import common_pb2
from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.errors import InvalidArgumentError
from pyruntime.observability import RuntimeMetrics, new_trace_id, trace_context
from pyruntime.observability.first_token import first_token_clock, text_relayed
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig, config_from_proto, config_to_proto
from pyruntime.scopes import DEFAULT_TURN_ROLE, storage_key
from pyruntime.service.admission import TurnAdmission
from pyruntime.service.model_memory import ModelMemory, ModelMemorySource, no_model_memory
from pyruntime.service.readiness import ModelState, Readiness, ReadinessSource, no_model
from pyruntime.service.status import ServiceError, StatusCode, status_for
from pyruntime.service.targets import check_id, target_from_proto

log = logging.getLogger(__name__)


class TurnRunner(Protocol):
    """Runs turns given as `RunTaskRequest`s (the target already checked)."""

    async def run_task(self, request: pb.RunTaskRequest) -> pb.RunTaskResponse:
        """The whole turn, once it has ended."""
        ...

    def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        """The turn as events while it happens; closing the iterator cancels the turn."""
        ...

    def submit_tool_result(self, request: pb.SubmitToolResultRequest) -> None:
        """Hand a client's game-tool result to the turn waiting for it."""
        ...

    async def wait_memory_writes(self, request: pb.WaitMemoryWritesRequest, timeout: float
                                 ) -> pb.WaitMemoryWritesResponse:
        """A conversation's pending memory writes (or one turn's), once they landed or `timeout` s passed."""
        ...


NO_MODEL = "no model is configured in this runtime; start it with a model to run turns"
DEFAULT_MEMORY_WAIT_MS = 30_000
MAX_MEMORY_WAIT_MS = 120_000
MAX_TRACE_ID_CHARS = 256
CLIENT_TOOLS_NEED_STREAM = ("client_tools need the streaming call StreamTask: RunTask cannot hand a game tool's "
                            "call to the client and wait for its result")


class OrchestratorService:
    """Implements every `coreai.v1.Orchestrator` RPC."""

    def __init__(self, policy: AgentMemoryPolicy, runner: TurnRunner | None = None, *,
                 model_alias: str = "", readiness: ReadinessSource | None = None,
                 admission: TurnAdmission | None = None, metrics: RuntimeMetrics | None = None,
                 model_memory: ModelMemorySource | None = None, memory_design: str = "",
                 stop_requested: Callable[[], None] | None = None,
                 model_download: Callable[[], pb.ModelDownload | None] | None = None,
                 role_publisher: Callable[[RoleMemoryConfig], None] | None = None) -> None:
        """The service over a role policy; `runner` None: turns answer UNAVAILABLE until `attach_runner`.

        `readiness` and `model_memory` are read by Health (never blocking); `memory_design` ("tool" | "writer") is
        the turn engine's, reported in Health; `stop_requested` is what the Shutdown RPC calls (None refuses it:
        serve wires it on loopback only); `model_download` gives the progress of a model being downloaded by name;
        `role_publisher` (blocking) shares a configured role with the other runtimes on the database before it is
        set here (None: this runtime alone).
        """
        self.policy: Final = policy
        """The role policy this service configures."""
        self._runner = runner
        self.model_alias = model_alias  # as Health reports it ("" without a model); set again by attach_runner
        self.memory_design = memory_design  # the turn engine's ("tool" | "writer"; "" without one), for Health
        self._stop_requested = stop_requested
        self._publish_role = role_publisher
        self._readiness: ReadinessSource = readiness or no_model
        self._model_memory: ModelMemorySource = model_memory or no_model_memory
        self._model_download: Callable[[], pb.ModelDownload | None] = model_download or (lambda: None)
        self.admission = admission or TurnAdmission()
        self.default_timeout_s: float | None = None  # the turn engine's, once attached (a turn's deadline)
        self.model_concurrency = 0  # model calls the engine is sent at once, once attached (Health)
        self.metrics = metrics or RuntimeMetrics()
        self.metrics.watch_admission(self.admission.snapshot)
        self.metrics.watch_model(self._model_snapshot)
        self.metrics.watch_model_memory(self._memory_snapshot)

    def _model_snapshot(self) -> tuple[str, int]:
        readiness = self._readiness()
        return readiness.state.value, readiness.restarts

    def _memory_snapshot(self) -> ModelMemory:
        return self._model_memory()

    def attach_runner(self, runner: TurnRunner, model_alias: str, *, memory_design: str = "",
                      model_concurrency: int | None = None, default_timeout_s: float | None = None) -> None:
        """Bind the turn engine once the model has loaded (serve answers health and stores before that).

        `model_concurrency`: the model calls the engine serves at once (admission runs as many turns unless told);
        `default_timeout_s`: the engine's turn timeout, a turn's deadline when its request sets none.
        """
        self.model_alias = model_alias
        self.memory_design = memory_design
        if model_concurrency is not None:
            self.admission.size_to(model_concurrency)
        self.model_concurrency = model_concurrency or 0
        self.default_timeout_s = default_timeout_s
        self._runner = runner

    def readiness(self) -> Readiness:
        """The model's readiness as Health reports it (read from the source given at construction)."""
        return self._readiness()

    def _checked(self, request: pb.RunTaskRequest) -> tuple[TurnRunner, str]:
        """The runner and the conversation key of a valid turn request."""
        target = target_from_proto(request.target, default_role=DEFAULT_TURN_ROLE)
        if request.timeout_ms < 0 or request.client_tool_timeout_ms < 0:
            raise ServiceError(StatusCode.INVALID_ARGUMENT,
                               "timeout_ms and client_tool_timeout_ms must be >= 0 (0 = the runtime's default)")
        if request.HasField("max_output_tokens") and request.max_output_tokens < 1:
            raise ServiceError(StatusCode.INVALID_ARGUMENT, "max_output_tokens must be >= 1 when set")
        if self._runner is None:
            readiness = self._readiness()
            if readiness.state is ModelState.NONE:
                raise ServiceError(StatusCode.UNAVAILABLE, NO_MODEL)
            raise ServiceError(StatusCode.UNAVAILABLE, f"the model is {readiness.state.value} ({readiness.reason}); "
                                                       f"retry in a few seconds")
        return self._runner, storage_key(target.role_id, target.scope, target.actor)

    def _refused(self, exc: Exception) -> ServiceError:
        error = status_for(exc)
        self.metrics.turn_ended(error.code.name.lower())
        return error

    def _ended(self, response: pb.RunTaskResponse) -> None:
        name = pb.TurnStatus.Name(response.status).removeprefix("TURN_STATUS_").lower()
        self.metrics.turn_ended(name, response.usage.prompt_tokens, response.usage.completion_tokens)

    def _deadline_s(self, request: pb.RunTaskRequest) -> float | None:
        """The turn's deadline in seconds: its own timeout, else the engine's default."""
        return request.timeout_ms / 1000.0 if request.timeout_ms > 0 else self.default_timeout_s

    @staticmethod
    def _after_wait(request: pb.RunTaskRequest, deadline_s: float | None, waited_s: float) -> pb.RunTaskRequest:
        """request with what is left of its deadline after waiting `waited_s` for a place."""
        if deadline_s is None or waited_s <= 0:
            return request
        left = pb.RunTaskRequest()
        left.CopyFrom(request)
        left.timeout_ms = max(1, int((deadline_s - waited_s) * 1000))
        return left

    @staticmethod
    def _traced(request: pb.RunTaskRequest) -> pb.RunTaskRequest:
        """request with a trace id: the client's, else a fresh one (answered back, and on every log line)."""
        if request.trace_id:
            return request
        traced = pb.RunTaskRequest()
        traced.CopyFrom(request)
        traced.trace_id = new_trace_id()
        return traced

    async def run_task(self, request: pb.RunTaskRequest) -> pb.RunTaskResponse:
        """One turn of a role (blank role runs as Creator)."""
        request = self._traced(request)
        with trace_context(request.trace_id):
            try:
                if request.client_tools:
                    raise ServiceError(StatusCode.INVALID_ARGUMENT, CLIENT_TOOLS_NEED_STREAM)
                runner, key = self._checked(request)
                deadline = self._deadline_s(request)
                async with self.admission.admit(key, deadline) as waited:
                    self.metrics.turn_admitted(waited)
                    response = await runner.run_task(self._after_wait(request, deadline, waited))
            except asyncio.CancelledError:  # the caller went away
                self.metrics.turn_ended("cancelled")
                raise
            except Exception as exc:  # noqa: BLE001 - every failure becomes a status
                raise self._refused(exc) from None
            self._ended(response)
            return response

    async def stream_task(self, request: pb.RunTaskRequest) -> AsyncIterator[pb.TurnEvent]:
        """The same turn as events; a caller that stops reading (disconnects) cancels it."""
        request = self._traced(request)
        with trace_context(request.trace_id), first_token_clock() as clock:
            async with contextlib.AsyncExitStack() as admitted:
                try:
                    runner, key = self._checked(request)
                    deadline = self._deadline_s(request)
                    waited = await admitted.enter_async_context(self.admission.admit(key, deadline))
                    self.metrics.turn_admitted(waited)
                except Exception as exc:  # noqa: BLE001
                    raise self._refused(exc) from None
                events = runner.stream_task(self._after_wait(request, deadline, waited))
                ended = False
                try:
                    while True:
                        try:
                            event = await anext(events)
                        except StopAsyncIteration:
                            return
                        except Exception as exc:  # noqa: BLE001
                            ended = True
                            raise self._refused(exc) from None
                        if event.HasField("text_delta"):
                            text_relayed(clock)
                        elif event.HasField("final"):
                            ended = True
                            self._ended(event.final)
                            self.metrics.first_token_added(clock.runtime_added())
                        yield event
                finally:
                    if not ended:  # the caller went away before the final event
                        self.metrics.turn_ended("cancelled")
                    # Closing the runner's iterator is what cancels the turn on a disconnect.
                    aclose = getattr(events, "aclose", None)
                    if aclose is not None:
                        await aclose()

    async def submit_tool_result(self, request: pb.SubmitToolResultRequest) -> pb.SubmitToolResultResponse:
        """A game tool's result for a StreamTask turn waiting for it.

        NOT_FOUND: no such call (or no turn engine); FAILED_PRECONDITION: the call already ended
        without a result (timed out, turn cancelled or ended); ALREADY_EXISTS: already answered.
        """
        try:
            if self._runner is None:
                raise ServiceError(StatusCode.NOT_FOUND, "no tool call with this turn_id and call_id")
            self._runner.submit_tool_result(request)
            return pb.SubmitToolResultResponse()
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def wait_memory_writes(self, request: pb.WaitMemoryWritesRequest) -> pb.WaitMemoryWritesResponse:
        """Wait for a conversation's pending memory writes, or one turn's (trace_id); what they wrote.

        INVALID_ARGUMENT: a bad target, a timeout_ms outside 0..120000, a trace id over 256 chars.
        A runtime without a model (or a conversation with nothing pending) answers at once, empty.
        """
        try:
            target_from_proto(request.target, default_role=DEFAULT_TURN_ROLE)  # a bad target fails here
            if not 0 <= request.timeout_ms <= MAX_MEMORY_WAIT_MS:
                raise InvalidArgumentError(f"timeout_ms must be between 0 and {MAX_MEMORY_WAIT_MS} "
                                           f"(0 = {DEFAULT_MEMORY_WAIT_MS // 1000} s)")
            if len(request.trace_id) > MAX_TRACE_ID_CHARS:
                raise InvalidArgumentError(f"trace_id must be at most {MAX_TRACE_ID_CHARS} characters")
            if self._runner is None:
                return pb.WaitMemoryWritesResponse()
            timeout_ms = request.timeout_ms or DEFAULT_MEMORY_WAIT_MS
            return await self._runner.wait_memory_writes(request, timeout_ms / 1000.0)
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def configure_role(self, request: pb.ConfigureRoleRequest) -> common_pb2.RoleMemoryConfig:
        """Register or replace a role's config; returns it as stored."""
        try:
            if not request.HasField("config"):
                raise InvalidArgumentError("config is required")
            check_id("config.role_id", request.config.role_id)
            config = config_from_proto(request.config)
            if self._publish_role is not None:  # stored first: a failure sets it nowhere
                await asyncio.to_thread(self._publish_role, config)
            self.policy.set(config)
            return config_to_proto(self.policy.get(config.role_id))
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def get_role_config(self, request: pb.GetRoleConfigRequest) -> common_pb2.RoleMemoryConfig:
        """A role's config; a role the policy does not know gets the defaults."""
        try:
            return config_to_proto(self.policy.get(check_id("role_id", request.role_id)))
        except Exception as exc:  # noqa: BLE001
            raise status_for(exc) from None

    async def list_roles(self, request: pb.ListRolesRequest) -> pb.ListRolesResponse:
        """Every built-in and configured role, sorted by id."""
        return pb.ListRolesResponse(roles=[config_to_proto(c) for c in self.policy.roles()])

    async def shutdown(self, request: pb.ShutdownRequest) -> pb.ShutdownResponse:
        """Stop the runtime gracefully for the launcher that started it (authenticated like every call but Health)."""
        if self._stop_requested is None:
            raise ServiceError(StatusCode.FAILED_PRECONDITION,
                               "this runtime cannot be stopped by a call (it listens beyond loopback, or runs "
                               "embedded); stop its process instead")
        log.info("stop requested by a Shutdown call")
        self._stop_requested()
        return pb.ShutdownResponse()

    async def health(self, request: pb.HealthRequest) -> pb.HealthResponse:
        """Ready to serve calls as configured, and whether the model answers; never calls the model."""
        readiness = self._readiness()
        memory = self._model_memory()
        admitted = self.admission.snapshot()
        return pb.HealthResponse(ready=readiness.ready, model=self.model_alias, version=pyruntime.__version__,
                                 model_ready=readiness.model_ready, memory_design=self.memory_design,
                                 model_rss_bytes=memory.rss_bytes,
                                 prompt_cache_used_bytes=memory.prompt_cache_used_bytes,
                                 prompt_cache_limit_bytes=memory.prompt_cache_limit_bytes,
                                 model_state=readiness.state.value, model_state_reason=readiness.reason,
                                 model_restarts=readiness.restarts, model_slots=memory.slots,
                                 model_slots_busy=memory.slots_busy, prompt_cache_entries=memory.prompt_cache_entries,
                                 model_gpu_layers=memory.gpu_layers,
                                 model_gpu_fallback_reason=memory.gpu_fallback_reason,
                                 model_download=self._model_download(),
                                 turns_running=admitted.running, turns_queued=admitted.queued,
                                 max_turns_running=admitted.max_running, max_turns_queued=admitted.max_queued,
                                 max_turns_per_conversation=admitted.max_per_conversation,
                                 model_concurrency=self.model_concurrency)
