"""`Runtime`: one runtime built from one `RuntimeSettings` - stores, services and RPC servers, the model with its
watchdog, the turn engine - with an async start/stop lifecycle (`serve` runs it; `chat` shares its model start).

Every part gets what it depends on when it is built; nothing is patched in afterwards. The services are built
first, with the runtime's own readiness, model-memory and download sources: they read the runtime's state, so
Health answers 503 "loading" (turns UNAVAILABLE with a retry hint) while the model loads, and says ready only
once the turns are bound (`OrchestratorService.attach_runner`, one call with the runner, the alias and the
memory design).

Started in order: stores -> services and RPC servers -> model (a download first for `--model NAME`; a hosted
llama.cpp child with its watchdog, a checked external URL, the scripted model, or none) -> turn engine, bound to
the services. Stopped in reverse by `stop()` (each stage registered its own stop before it started, so a failed
or cancelled start unwinds what had started): prewarms cancelled, the RPC servers get the grace period, queued
memory passes what is left of it, the client closes, the watchdog stops, the model child stops, the stores close.
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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import TYPE_CHECKING, Any

from coreai.v1 import orchestrator_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.llm_key import LLM_API_KEY_ENV, read_llm_api_key
from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.hosting import LlamaServerProcess, generate_model_key, hosted_model_config, port_is_free
from pyruntime.model.llama_server import DEFAULT_HOST, DEFAULT_PORT
from pyruntime.model.scripted import Script
from pyruntime.model.scripted_server import MODEL_ID, ScriptedModelServer
from pyruntime.model.supervisor import ModelSupervisor
from pyruntime.models.pull import ModelPull, PullStatus
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc import RpcConfig, RpcServers
from pyruntime.rpc.auth import default_token_file, is_loopback_host, write_token_file
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT
from pyruntime.rpc.grpc_server import DEFAULT_GRPC_PORT
from pyruntime.rpc.tls import tls_files
from pyruntime.service import RuntimeServices
from pyruntime.service.model_memory import ModelMemory, hosted_model_memory, no_model_memory
from pyruntime.service.readiness import EXTERNAL_MODEL, MODEL_LOADING, NO_MODEL, Readiness, hosted_model_readiness
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.in_memory import DEFAULT_CHAT_CAP, DEFAULT_TRANSCRIPT_CAP
from pyruntime.stores.persistence import DATA_FOLDER
from pyruntime.turns.memory_writer import MemoryDesign
from pyruntime.turns.modes import ToolCallMode

if TYPE_CHECKING:
    from pyruntime.turns.orchestrator import AiOrchestrator

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 5.0
_WATCH_S = 0.5
MODEL_KEY_FILE_NAME = "model_key"  # next to the token file: the model port's API key, for external clients
TAIL_ANCHORS_FILE_NAME = "tail-anchors.json"  # in the prompt cache folder: where each conversation's tail went


@dataclass(frozen=True)
class RuntimeSettings:
    """What one runtime is to be: its model, stores, RPC ports and turn settings (`serve`'s flags, typed)."""

    model: Path | None = None
    llm_url: str | None = None
    no_model: bool = False
    scripted_model: Path | None = None  # a script file: serve the scripted model (pyruntime/model/scripted.py)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    ctx: int | None = None
    data_dir: Path | None = None
    store: str | None = None  # a postgresql:// URL: saves in that database instead of files (headless servers)
    session_only: bool = False
    listen: str = DEFAULT_HOST
    grpc_port: int = DEFAULT_GRPC_PORT
    connect_port: int = DEFAULT_CONNECT_PORT
    token_file: Path | None = None
    tls_cert: Path | None = None  # with tls_key: both RPC ports speak TLS (required beyond loopback)
    tls_key: Path | None = None
    grace: float = DEFAULT_GRACE_S
    chat_history_cap: int = DEFAULT_CHAT_CAP
    transcript_cap: int = DEFAULT_TRANSCRIPT_CAP
    tool_mode: ToolCallMode | None = None
    memory_design: MemoryDesign | None = None  # None: the factory's model profile decides
    prewarm: bool | None = None  # None: on for a hosted model, off for --llm-url (the factory's default)
    parent_pid: int | None = None
    exit_on_stdin_eof: bool = False
    threads: int | None = None  # None: default_threads() (half the cores, at least 1)
    n_gpu_layers: int = 0  # layers of the hosted model on the GPU; 0: CPU only, -1: all
    prompt_cache_mb: int | None = None  # host RAM for cold conversations' states; 0: off, None: by model size
    prompt_cache_dir: Path | None = None  # the slots' states saved there at a stop, restored at start; None: off
    slots: int | None = None  # parallel slots of the hosted engine; None: DEFAULT_SLOTS
    llm_api_key_file: Path | None = None  # the --llm-url server's key, in a file
    llm_headers: tuple[str, ...] = ()  # extra "Name: value" headers for the --llm-url server
    models_dir: Path | None = None  # where `--model NAME` is looked up (None: <data-dir>/CoreAI/models, per-user cache)
    model_pull: ModelPull | None = None  # `--model NAME` of a catalogue model not pulled yet: downloaded first

    @property
    def hosts_model(self) -> bool:
        """True when serve runs llama.cpp itself (neither --llm-url nor --no-model)."""
        return self.llm_url is None and not self.no_model and self.scripted_model is None

    @property
    def token_root(self) -> Path | None:
        """The data folder the token file is in (its default place, `<data-dir>/CoreAI/runtime/`): nothing below it
        is followed through a link. A --token-file the user named is written where it says."""
        if self.token_file is not None or self.data_dir is None:
            return None
        return Path(self.data_dir) / DATA_FOLDER


def llm_headers(settings: RuntimeSettings) -> dict[str, str]:
    """The --llm-header values as headers; InvalidArgumentError for one that is not `Name: value`."""
    headers: dict[str, str] = {}
    for raw in settings.llm_headers:
        name, sep, value = raw.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or any(c in name for c in " \t()<>@,;:\\\"/[]?={}") or not name.isascii():
            raise InvalidArgumentError('--llm-header must be "Name: value"')
        if any(c in raw for c in "\r\n\0") or not value.isprintable():
            raise InvalidArgumentError("--llm-header must be one printable line")
        if name.lower() == "authorization":
            raise InvalidArgumentError("--llm-header cannot carry the key: use --llm-api-key-file or "
                                       f"${LLM_API_KEY_ENV}")
        headers[name] = value
    return headers


def llm_api_key(settings: RuntimeSettings) -> str | None:
    """The --llm-url server's key: --llm-api-key-file, else $COREAI_LLM_API_KEY, else None (never logged)."""
    return read_llm_api_key(settings.llm_api_key_file)


class StopClock:
    """When the stop began: what comes after the RPC servers (the memory passes) shares their grace period."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.began: float | None = None

    def start(self) -> None:
        """The stop begins now."""
        self.began = time.monotonic()

    def left(self) -> float:
        """Seconds of the grace period still left (all of it before the stop began)."""
        if self.began is None:
            return self.grace
        return max(0.0, self.began + self.grace - time.monotonic())


@dataclass(frozen=True)
class RuntimeModel:
    """Where turns go: the base URL, the alias shown in Health, the hosted child and its watchdog (if hosted)."""

    url: str | None
    alias: str
    server: LlamaServerProcess | None = None
    supervisor: ModelSupervisor | None = None  # watches and restarts the hosted child
    port_key: str | None = None  # the key of the model port the runtime opened (hosted or scripted)

    @property
    def host(self) -> LlamaServerProcess | ModelSupervisor | None:
        """What Health and the memory figures read: the watchdog, else the child (never the model server)."""
        return self.supervisor or self.server


async def start_hosted_model(server: LlamaServerProcess, stack: contextlib.AsyncExitStack,
                             loading: Callable[[object], None] | None = None) -> ModelSupervisor:
    """Start the llama.cpp child and its watchdog; their stops go on `stack` (the watchdog's runs first).

    `loading` is told what to read the load's progress from: the child, then its supervisor.
    """
    stack.push_async_callback(_stop_model, server)
    if loading is not None:
        loading(server)
    await _host(server)
    supervisor = ModelSupervisor(server)  # restarts a child that dies or hangs
    if loading is not None:
        loading(supervisor)
    supervisor.watch()
    stack.push_async_callback(asyncio.to_thread, supervisor.stop_watching)  # before the child is stopped
    return supervisor


async def _host(server: LlamaServerProcess) -> None:
    """Start the llama.cpp child; if cancelled meanwhile, keep stopping it until its start gives up."""
    loading = asyncio.ensure_future(asyncio.to_thread(server.start))
    loading.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no "never retrieved" noise
    try:
        await asyncio.shield(loading)
    except asyncio.CancelledError:
        # The loading thread cannot be cancelled; a child it spawns after one stop() would outlive us.
        while not loading.done():
            await asyncio.to_thread(server.stop)
            await asyncio.wait({loading}, timeout=_WATCH_S)
        raise


async def _stop_model(server: LlamaServerProcess) -> None:
    if server.pid is None:
        return
    await asyncio.to_thread(server.stop)
    log.info("model server stopped")


class Runtime:
    """One runtime from its settings: `async with Runtime(settings) as runtime: ready = await runtime.start()`.

    `stop_requested` is what the Shutdown RPC calls (the launcher's graceful stop where there is no SIGTERM); it is
    wired only on a loopback listen address: beyond loopback a game client's token must not stop a shared server.
    """

    def __init__(self, settings: RuntimeSettings, *, stop_requested: Callable[[], None] | None = None) -> None:
        self.settings = settings
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
        if self.settings.no_model:
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

    async def start(self) -> dict[str, Any]:
        """Each stage in order (see the module); returns the ready line's fields. Call `stop()` after, always."""
        settings = self.settings
        stack = self._stack
        _check_rpc_ports_free(settings)
        stores = self.stores = _open_stores(settings)
        stack.callback(stores.close)  # a database pool: closed after the RPC servers stopped
        services = self.services = RuntimeServices.create(
            stores, AgentMemoryPolicy(), readiness=self.readiness, model_memory=self.model_memory,
            model_download=self.model_download, stop_requested=self._stop_requested)
        # The model's stops go on a stack entered before the RPC servers', so they still run after those stopped.
        model_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
        token_file = _token_file(settings, stack)
        token_root = settings.token_root
        config = RpcConfig(host=settings.listen, grpc_port=settings.grpc_port, connect_port=settings.connect_port,
                           token_file=token_file, token_root=token_root, grace_s=settings.grace,
                           tls=tls_files(settings.tls_cert, settings.tls_key))
        servers = self.servers = RpcServers(services, config)
        stack.push_async_callback(_stop_rpc, servers)
        await servers.start()
        if settings.model_pull is not None:
            await self._pull_model(settings.model_pull)
        model = self.model = await self._start_model(model_stack)
        self.orchestrator = await self._bind_turns(services, stores, model, model_stack)
        ready = {"grpc_port": servers.grpc_port, "connect_port": servers.connect_port, "model_url": model.url,
                 "token_file": str(token_file)}
        if model.port_key:
            # For external OpenAI clients on this machine; same folder and rights as the token (0600).
            key_file = write_token_file(token_file.with_name(MODEL_KEY_FILE_NAME), model.port_key, root=token_root)
            ready["model_key_file"] = str(key_file)
        return ready

    async def stop(self) -> None:
        """Stop in reverse; queued memory passes get what is left of the grace period counted from now."""
        self.clock.start()
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
        settings = self.settings
        if settings.no_model:
            log.info("no model: turns answer UNAVAILABLE")
            return RuntimeModel(None, "")
        if settings.llm_url is not None:
            return RuntimeModel(settings.llm_url, await _check_external(settings.llm_url, llm_api_key(settings),
                                                                        llm_headers(settings)))
        if settings.scripted_model is not None:
            key = generate_model_key()  # the same key rule as the hosted model port
            scripted = ScriptedModelServer(Script.load(settings.scripted_model), settings.host, settings.port,
                                           api_key=key)
            await scripted.start()
            stack.push_async_callback(scripted.stop)
            return RuntimeModel(scripted.base_url, MODEL_ID, port_key=key)
        config = hosted_model_config(settings.model, host=settings.host, port=settings.port, n_ctx=settings.ctx,
                                     n_threads=settings.threads, n_gpu_layers=settings.n_gpu_layers,
                                     slots=settings.slots, prompt_cache_mb=settings.prompt_cache_mb,
                                     prompt_cache_dir=settings.prompt_cache_dir)
        server = LlamaServerProcess(config)

        def loading(host: object) -> None:
            self._loading_host = host

        supervisor = await start_hosted_model(server, stack, loading)
        log.info("serving model %s at %s (%d slots)", server.config.alias, server.base_url, server.config.slots)
        return RuntimeModel(server.base_url, server.config.alias, server, supervisor, port_key=server.api_key)

    async def _bind_turns(self, services: RuntimeServices, stores: StoreBundle, model: RuntimeModel,
                          stack: contextlib.AsyncExitStack) -> AiOrchestrator | None:
        """With a model, an orchestrator against it (its watchdog as the client's gate), bound to the services."""
        if model.url is None:
            return None
        from pyruntime.turns import build_orchestrator  # the turn engine only when there is a model
        from pyruntime.turns.convert import ProtoTurnRunner

        settings = self.settings
        # Tool mode and calls per round: the factory's model profile, the same as the chat's.
        gate = model.supervisor.check_available if model.supervisor is not None else None  # fail fast in a restart
        common: dict[str, Any] = {"stores": stores, "policy": services.orchestrator.policy,
                                  "tool_mode": settings.tool_mode, "memory_design": settings.memory_design,
                                  "prewarm": settings.prewarm, "gate": gate}
        if model.server is not None:
            orchestrator = build_orchestrator(server=model.server, **common)
        else:
            external = settings.llm_url is not None
            orchestrator = build_orchestrator(base_url=model.url,
                                              api_key=llm_api_key(settings) if external else model.port_key,
                                              headers=llm_headers(settings) if external else None, **common)
        stack.push_async_callback(orchestrator.client.aclose)
        if settings.prompt_cache_dir is not None and model.server is not None:
            # With the prompt states on disk, the prompts after a restart must be the ones sent before it.
            anchors = settings.prompt_cache_dir / TAIL_ANCHORS_FILE_NAME
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
        log.info("memory design: %s", orchestrator.memory_design.value)
        services.metrics.watch_model_queue(lambda: orchestrator.queue.waiting)
        services.metrics.watch_prewarms(orchestrator.prewarms.stats.counts)
        # Health reads the runtime's state from here on: ready only once the runner is bound (self.orchestrator).
        services.orchestrator.attach_runner(ProtoTurnRunner(orchestrator), model.alias,
                                            memory_design=orchestrator.memory_design.value)
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


async def _check_external(url: str, api_key: str | None, headers: dict[str, str]) -> str:
    """The alias of the external server's first model (never a path); raises when it does not answer."""
    async with OpenAICompatClient(url, timeout=10.0, api_key=api_key, headers=headers) as client:
        models = await client.models()
    log.info("external model server answers with %d model(s)", len(models))
    if not models:
        return ""
    # llama-cpp-python lists a model by its file path unless it has an alias; a path never goes out.
    name = PurePosixPath(models[0].replace("\\", "/")).name
    return name[:-5] if name.lower().endswith(".gguf") else name


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


async def _stop_rpc(servers: RpcServers) -> None:
    """Stop accepting, give in-flight calls the grace period, then wait for store writes still running."""
    log.info("stopping")
    try:
        await servers.stop()
    finally:
        await asyncio.to_thread(servers.services.close)
    log.info("RPC servers stopped")
