"""`Runtime`: one runtime built from one `RuntimeSettings` - stores, services and RPC servers, the model with its
watchdog, the turn engine - with an async start/stop lifecycle. `serve` runs it; `chat` runs it without the RPC
ports (`settings.rpc`); the tests run it in-process (tests/support/runtime.py), with what they hold handed in.

Every part gets what it depends on when it is built; nothing is patched in afterwards. The services are built
first, with the runtime's own readiness, model-memory and download sources: they read the runtime's state, so
Health answers 503 "loading" (turns UNAVAILABLE with a retry hint) while the model loads, and says ready only
once the turns are bound (`OrchestratorService.attach_runner`, one call with the runner, the alias and the
memory design).

Started in order: stores (on PostgreSQL, with the role configs every runtime on the database shares) -> services
and RPC servers -> model (a download first for `--model NAME`; a hosted llama.cpp child with its watchdog, a
checked external URL, the scripted model, or none: pyruntime/runtime_model.py) -> turn engine, bound to the
services. Stopped in reverse by `stop()` (each stage registered its own stop before it started, so a failed or
cancelled start unwinds what had started): prewarms cancelled, the RPC servers get the grace period, store calls
still running finish, queued memory passes get what is left of the grace period, the
client closes, the watchdog stops, the model child stops, the stores close.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from coreai.v1 import orchestrator_pb2
from pyruntime.catalog.pull import ModelPull, PullStatus
from pyruntime.model.hosting.engine_place import port_is_free
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.net.auth import default_token_file, is_loopback_host, write_token_file
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc import RpcConfig, RpcServers
from pyruntime.rpc.tls import tls_files
from pyruntime.runtime_model import RuntimeModel, hosted_config, start_model
from pyruntime.service import RuntimeServices
from pyruntime.service.admission import TurnAdmission
from pyruntime.service.model_memory import ModelMemory, hosted_model_memory, no_model_memory
from pyruntime.service.readiness import EXTERNAL_MODEL, MODEL_LOADING, NO_MODEL, Readiness, hosted_model_readiness
from pyruntime.service.shared_roles import shared_roles
from pyruntime.settings import DEFAULT_GRACE_S, RuntimeSettings, llm_api_key, llm_headers
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores

if TYPE_CHECKING:
    from pyruntime.service import TurnRunner
    from pyruntime.turns.orchestrator import AiOrchestrator

__all__ = ["DEFAULT_GRACE_S", "Runtime", "RuntimeModel", "RuntimeSettings", "llm_api_key", "llm_headers"]

log = logging.getLogger(__name__)

MODEL_KEY_FILE_NAME = "model_key"  # next to the token file: the model port's API key, for external clients


class StopClock:
    """When the stop began: what comes after the RPC servers (the memory passes) shares their grace period."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.began: float | None = None

    def start(self, grace: float | None = None) -> None:
        """The stop begins now (with `grace` in place of the settings' when given)."""
        if grace is not None:
            self.grace = grace
        self.began = time.monotonic()

    def left(self) -> float:
        """Seconds of the grace period still left (all of it before the stop began)."""
        if self.began is None:
            return self.grace
        return max(0.0, self.began + self.grace - time.monotonic())


class Runtime:
    """One runtime from its settings: `async with Runtime(settings) as runtime: ready = await runtime.start()`.

    `stop_requested` is what the Shutdown RPC calls (the launcher's graceful stop where there is no SIGTERM); it is
    wired only on a loopback listen address: beyond loopback a game client's token must not stop a shared server.
    What a caller already holds is handed in, never patched in later: `stores` (opened by the caller, closed by the
    runtime), `model` (a model already running, e.g. a test's shared llama.cpp child or an in-process double, bound
    in place of the settings' model; stopping it stays the caller's), `admission` (the turn limits), `turn_runner`
    (how the services run turns on the engine: `ProtoTurnRunner`, or a test's observing subclass of it).
    """

    def __init__(self, settings: RuntimeSettings, *, stop_requested: Callable[[], None] | None = None,
                 stores: StoreBundle | None = None, model: RuntimeModel | None = None,
                 admission: TurnAdmission | None = None,
                 turn_runner: Callable[[AiOrchestrator], TurnRunner] | None = None) -> None:
        self.settings = settings
        self._given_stores = stores
        self._given_model = model
        self._admission = admission
        self._turn_runner = turn_runner
        self.clock = StopClock(settings.grace)
        self._stack = contextlib.AsyncExitStack()
        self._stop_requested = stop_requested if is_loopback_host(settings.listen) else None
        self._loading_host: object | None = None  # the download, the child, then its watchdog: Health while loading
        self._download: PullStatus | None = None
        self.stores: StoreBundle | None = None
        self.services: RuntimeServices | None = None
        self.servers: RpcServers | None = None
        self.model: RuntimeModel | None = None
        self.orchestrator: AiOrchestrator | None = None  # bound once the model is up; None without a model

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # -- what the services read (never blocking, never the model server) ---------------------

    def readiness(self) -> Readiness:
        """Health's model state: loading (with the download's or the child's progress) until turns are bound."""
        if self.settings.no_model and self._given_model is None:
            return NO_MODEL
        if self.orchestrator is None or self.model is None:
            loading = hosted_model_readiness(self._loading_host) if self._loading_host is not None else MODEL_LOADING
            return MODEL_LOADING if loading.model_ready else loading
        host = self.model.host
        return hosted_model_readiness(host) if host is not None else EXTERNAL_MODEL

    def model_memory(self) -> ModelMemory:
        """The hosted model's memory figures once its turns are bound (none for an external or no model)."""
        host = self.model.host if self.model is not None and self.orchestrator is not None else None
        return hosted_model_memory(host) if host is not None else no_model_memory()

    def model_download(self) -> orchestrator_pb2.ModelDownload | None:
        """The download of a model named by `--model NAME` while it runs (None otherwise)."""
        return self._download.message() if self._download is not None else None

    # -- lifecycle --------------------------------------------------------------------------

    @cached_property
    def model_config(self) -> LlamaServerConfig:
        """The hosted model's configuration (the embedded model unless `model` says): what `start()` hosts."""
        return hosted_config(self.settings)

    async def start(self) -> dict[str, Any]:
        """Each stage in order (see the module); returns the ready line's fields. Call `stop()` after, always."""
        settings = self.settings
        stack = self._stack
        if settings.rpc:
            _check_rpc_ports_free(settings)
        stores = self.stores = self._given_stores or _open_stores(settings)
        stack.callback(stores.close)  # a database pool: closed after the RPC servers stopped
        policy = AgentMemoryPolicy()
        for role in settings.roles:
            policy.set(role)
        roles = shared_roles(stores, policy)  # on PostgreSQL: the roles every runtime on the database holds
        if roles is not None:
            stack.callback(roles.close)
            await asyncio.to_thread(roles.start)
        admission = self._admission or TurnAdmission(settings.max_turns_running, settings.max_turns_queued,
                                                     settings.max_turns_per_conversation)
        services = self.services = RuntimeServices.create(
            stores, policy, readiness=self.readiness, model_memory=self.model_memory, admission=admission,
            model_download=self.model_download, stop_requested=self._stop_requested,
            role_publisher=roles.publish if roles is not None else None)
        # The model's stops go on a stack entered before the RPC servers', so they still run after those stopped.
        model_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
        stack.push_async_callback(asyncio.to_thread, services.close)  # store calls still running, after the RPCs
        if not settings.rpc:
            return await self._start_turns(model_stack, {})
        token_file = _token_file(settings, stack)
        token_root = settings.token_root
        config = RpcConfig(host=settings.listen, grpc_port=settings.grpc_port, connect_port=settings.connect_port,
                           token=settings.token, token_file=token_file, token_root=token_root,
                           grace_s=settings.grace, limits=settings.limits,
                           tls=tls_files(settings.tls_cert, settings.tls_key))
        servers = self.servers = RpcServers(services, config)
        stack.push_async_callback(_stop_rpc, servers, self.clock)
        await servers.start()
        ready = await self._start_turns(model_stack, {"grpc_port": servers.grpc_port,
                                                      "connect_port": servers.connect_port})
        ready["token_file"] = str(token_file)
        model = self.model
        assert model is not None
        if model.port_key:
            # For external OpenAI clients on this machine; same folder and rights as the token (0600).
            key_file = write_token_file(token_file.with_name(MODEL_KEY_FILE_NAME), model.port_key, root=token_root)
            ready["model_key_file"] = str(key_file)
        return ready

    async def _start_turns(self, stack: contextlib.AsyncExitStack, ready: dict[str, Any]) -> dict[str, Any]:
        """The model (a download first when it is not pulled yet), then the turn engine bound to the services."""
        assert self.services is not None and self.stores is not None
        if self.settings.model_pull is not None and self._given_model is None:
            await self._pull_model(self.settings.model_pull)
        model = self.model = self._given_model or await self._start_model(stack)
        self.orchestrator = await self._bind_turns(self.services, self.stores, model, stack)
        return {**ready, "model_url": model.url}

    async def stop(self, grace: float | None = None) -> None:
        """Stop in reverse; queued memory passes get what is left of the grace period (`grace`, else the settings')
        counted from now."""
        self.clock.start(grace)
        if self.model is not None and self.model.supervisor is not None:
            # Stopping: the watchdog restarts nothing any more (a hung engine is stopped, not reloaded).
            self.model.supervisor.stop_restarting()
        await self._stack.aclose()

    async def _pull_model(self, pull: ModelPull) -> None:
        """Download the named model before it loads; Health says "downloading" with its progress meanwhile."""
        status = PullStatus(pull.request.name, pull.request.size_bytes)
        self._loading_host = status
        self._download = status
        log.info("model %s is not pulled yet: downloading it into %s", pull.request.name, pull.cache.root)
        pulling = asyncio.ensure_future(asyncio.to_thread(pull.cache.pull, pull.request, progress=status.update))
        try:
            model = await asyncio.shield(pulling)
        except asyncio.CancelledError:
            status.cancelled = True  # the next progress update ends the download thread; the partial file stays
            with contextlib.suppress(Exception):
                await pulling
            raise
        finally:
            self._download = None
        log.info("model %s downloaded and checked (%d bytes)", model.name, model.size_bytes)

    async def _start_model(self, stack: contextlib.AsyncExitStack) -> RuntimeModel:
        def loading(host: object) -> None:
            self._loading_host = host

        return await start_model(self.settings, lambda: self.model_config, stack, loading)

    async def _bind_turns(self, services: RuntimeServices, stores: StoreBundle, model: RuntimeModel,
                          stack: contextlib.AsyncExitStack) -> AiOrchestrator | None:
        """With a model, an orchestrator against it (its watchdog as the client's gate), bound to the services."""
        if model.url is None and model.client is None:
            return None
        from pyruntime.service.erasure import TurnEngineEraser
        from pyruntime.service.turn_runner import ProtoTurnRunner
        from pyruntime.turns import build_orchestrator  # the turn engine only when there is a model
        from pyruntime.turns.planning.tail_anchors import FILE_NAME as TAIL_ANCHORS_FILE

        settings = self.settings
        # The turn settings: the factory's model profile (the same as the chat's), with the flags' choices over it.
        gate = model.supervisor.check_available if model.supervisor is not None else None  # fail fast in a restart
        common: dict[str, Any] = {"stores": stores, "policy": services.orchestrator.policy, "gate": gate,
                                  **settings.turn_choices()}
        if model.client is not None:
            orchestrator = build_orchestrator(client=model.client, **common)
        elif model.server is not None:
            orchestrator = build_orchestrator(server=model.server, **common)
        else:
            external = settings.llm_url is not None
            orchestrator = build_orchestrator(base_url=model.url,
                                              api_key=llm_api_key(settings) if external else model.port_key,
                                              headers=llm_headers(settings) if external else None,
                                              concurrency=model.concurrency, **common)
        stack.push_async_callback(orchestrator.client.aclose)
        if settings.prompt_cache_dir is not None and model.server is not None:
            # With the prompt states on disk, the prompts after a restart must be the ones sent before it.
            anchors = settings.prompt_cache_dir / TAIL_ANCHORS_FILE
            orchestrator.load_tail_anchors(anchors)
            stack.push_async_callback(asyncio.to_thread, _save_tail_anchors, orchestrator, anchors)
        # Runs before the client closes (and after the RPC servers stop): memory passes still queued get what is
        # left of the grace period (counted from the stop: a launcher's stop timeout covers the whole stop), the
        # rest are cancelled (behind a hung or busy engine they would hold up the stop).
        passes = orchestrator.memory_passes
        clock = self.clock
        stack.push_async_callback(lambda: passes.stop(clock.left()))
        # Runs first: a prewarm warms a next turn that will not come (it never holds up a memory pass).
        stack.push_async_callback(orchestrator.prewarms.cancel)
        log.info("memory design: %s", orchestrator.settings.memory_design.value)
        services.metrics.watch_model_queue(lambda: orchestrator.queue.waiting)
        services.metrics.watch_prewarms(orchestrator.prewarms.stats.counts)
        # Health reads the runtime's state from here on: ready only once the runner is bound (self.orchestrator).
        services.orchestrator.attach_runner((self._turn_runner or ProtoTurnRunner)(orchestrator), model.alias,
                                            memory_design=orchestrator.settings.memory_design.value,
                                            model_concurrency=orchestrator.queue.capacity,
                                            default_timeout_s=orchestrator.settings.default_timeout)
        # A deletion of saves erases what the turn engine and the model keep of those conversations too.
        services.memory_store.attach_eraser(TurnEngineEraser(orchestrator, model.server))
        return orchestrator


def _check_rpc_ports_free(settings: RuntimeSettings) -> None:
    """Fail before the model loads (seconds) when an RPC port is taken; the bind itself stays the real check."""
    if ":" in settings.listen:
        return  # port_is_free speaks IPv4 only; the bind reports IPv6 conflicts
    host = "127.0.0.1" if settings.listen == "localhost" else settings.listen
    for flag, port in (("--grpc-port", settings.grpc_port), ("--connect-port", settings.connect_port)):
        if port and not port_is_free(host, port):
            raise OSError(errno.EADDRINUSE, f"port {port} ({flag}) on {settings.listen} is already in use")


def _open_stores(settings: RuntimeSettings) -> StoreBundle:
    mode = AgentMemoryPersistenceMode.SESSION_ONLY if settings.session_only else AgentMemoryPersistenceMode.PERSISTENT
    stores = open_stores(mode, settings.data_dir, chat_cap=settings.chat_history_cap,
                         transcript_cap=settings.transcript_cap, database_url=settings.store)
    log.info("stores open: %s%s (chat cap %d, transcript cap %d)", mode.value,
             " in PostgreSQL" if settings.store else "", settings.chat_history_cap, settings.transcript_cap)
    return stores


def _save_tail_anchors(orchestrator: AiOrchestrator, path: Path) -> None:
    """At shutdown (after the last turn): a failure costs warm first turns after the restart, nothing else."""
    try:
        orchestrator.save_tail_anchors(path)
    except Exception as exc:  # noqa: BLE001
        log.warning("tail anchors not saved (%s)", type(exc).__name__)


def _token_file(settings: RuntimeSettings, stack: contextlib.AsyncExitStack) -> Path:
    """--token-file, else under the data dir; session-only without one: a private folder removed at exit."""
    if settings.token_file is not None:
        return settings.token_file
    if settings.data_dir is not None:
        return default_token_file(settings.data_dir)
    folder = Path(tempfile.mkdtemp(prefix="coreai-runtime-"))  # 0700
    stack.callback(shutil.rmtree, folder, True)
    return folder / "token"


async def _stop_rpc(servers: RpcServers, clock: StopClock) -> None:
    """Stop accepting and give in-flight calls the grace period (store writes still running are waited for next)."""
    log.info("stopping")
    await servers.stop(clock.grace)
    log.info("RPC servers stopped")
