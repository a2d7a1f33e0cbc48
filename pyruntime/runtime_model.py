"""Where a runtime's turns go: the model it starts from its settings (`pyruntime/app.py` runs this stage).

One of: none (`--no-model`), an external OpenAI-compatible server (checked at start unless told not to), the
scripted model served over HTTP (`--scripted-model`), or a hosted llama.cpp child with its watchdog. Each start
puts its own stop on the stack it is given, before it starts, so a failed or cancelled start unwinds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from pyruntime.model.client.concurrency import engine_concurrency
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess, generate_model_key, hosted_model_config
from pyruntime.model.hosting.supervisor import ModelSupervisor
from pyruntime.settings import RuntimeSettings, llm_api_key, llm_headers
from pyruntime.stores.engine_files import ENGINE_STATES_RELATIVE_PATH
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import MODEL_ID, ScriptedModelServer

if TYPE_CHECKING:
    from pyruntime.model.client.seam import ModelClient

log = logging.getLogger(__name__)

_WATCH_S = 0.5


@dataclass(frozen=True)
class RuntimeModel:
    """Where turns go: the base URL, the alias shown in Health, the hosted child and its watchdog (if hosted)."""

    url: str | None
    alias: str
    server: LlamaServerProcess | None = None
    supervisor: ModelSupervisor | None = None  # watches and restarts the hosted child
    port_key: str | None = None  # the key of the model port the runtime opened (hosted or scripted)
    client: ModelClient | None = None  # an in-process model (pyruntime.testing): turns call it, no HTTP
    concurrency: int | None = None  # model calls an external server is sent at once (None: the factory's default)

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


def hosted_config(settings: RuntimeSettings) -> LlamaServerConfig:
    """The hosted model's configuration from the settings (the embedded model unless `model` says).

    With file saves, the engine's states of conversations live under the data folder
    (`ENGINE_STATES_RELATIVE_PATH`): deleting the saves deletes them; session-only and database saves keep them in
    the engine's private temporary folder.
    """
    s = settings
    files = s.data_dir is not None and not s.session_only and s.store is None
    return hosted_model_config(s.model, host=s.host, port=s.port, n_ctx=s.ctx, n_threads=s.threads,
                               n_gpu_layers=s.n_gpu_layers, slots=s.slots, prompt_cache_mb=s.prompt_cache_mb,
                               prompt_cache_dir=s.prompt_cache_dir,
                               state_dir=s.data_dir / ENGINE_STATES_RELATIVE_PATH if files and s.data_dir else None)


async def start_model(settings: RuntimeSettings, config: Callable[[], LlamaServerConfig],
                      stack: contextlib.AsyncExitStack, loading: Callable[[object], None]) -> RuntimeModel:
    """The settings' model, started; its stops on `stack`. `config`: the hosted model's configuration (asked only
    when hosting); `loading` is told what to read a hosted load's progress from."""
    if settings.no_model:
        log.info("no model: turns answer UNAVAILABLE")
        return RuntimeModel(None, "")
    if settings.llm_url is not None:
        concurrency = settings.llm_concurrency
        if not settings.check_llm_url:
            return RuntimeModel(settings.llm_url, "", concurrency=concurrency)
        key, headers = llm_api_key(settings), llm_headers(settings)
        alias = await _check_external(settings.llm_url, key, headers)
        if concurrency is None:
            concurrency = await engine_concurrency(settings.llm_url, api_key=key, headers=headers)
        return RuntimeModel(settings.llm_url, alias, concurrency=concurrency)
    if settings.scripted_model is not None:
        key = generate_model_key()  # the same key rule as the hosted model port
        scripted = ScriptedModelServer(Script.load(settings.scripted_model), settings.host, settings.port,
                                       api_key=key)
        await scripted.start()
        stack.push_async_callback(scripted.stop)
        return RuntimeModel(scripted.base_url, MODEL_ID, port_key=key)
    server = LlamaServerProcess(config())
    supervisor = await start_hosted_model(server, stack, loading)
    log.info("serving model %s at %s (%d slots)", server.config.alias, server.base_url, server.config.slots)
    return RuntimeModel(server.base_url, server.config.alias, server, supervisor, port_key=server.api_key)


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
