"""Host llama.cpp's own server: start llama-server, wait until it answers, put the model port in front, stop.

The engine listens where only the runtime reaches it: a Unix socket in a private (0700) folder on
POSIX, a private loopback port on Windows; it demands its own key either way, read from a 0600 file
in that folder (never on a command line, which other users can read) and removed once it is read.
The runtime's orchestrator talks to it directly (`client_options`); external OpenAI clients use the
public model port (`public_port.py`), guarded like the RPC ports, which forwards to it.

A separate process keeps a native crash of llama.cpp out of the runtime and lets tests kill it; it
dies with the runtime on every OS (`lifeline.py`). Its stderr is kept in memory and never logged
(llama.cpp may print request text); the runtime reads the prompt cache's state and GPU failures from
it (`server_log.py`). A GPU that cannot take the requested layers makes the engine start again on
the CPU, with the reason in Health, instead of failing to start.

Over 400 lines as one job, the lifecycle of one child (start, readiness, CPU fallback, what it reports, stop),
whose steps share the child's handles; its private folder, key, address and
environment are `engine_place.py`'s, its config and command line `llama_server.py`'s, its log's facts
`server_log.py`'s, the restart-warm slot calls `warm_slots.py`'s.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.client.parked_states import ParkedStates
from pyruntime.model.client.pool import KEEPALIVE_EXPIRY_S
from pyruntime.model.client.slots import SlotAffinity
from pyruntime.model.hosting.engine_place import (
    engine_address,
    engine_env,
    port_is_free,
    state_folder,
    write_key_file,
)
from pyruntime.model.hosting.gguf_info import read_gguf_info
from pyruntime.model.hosting.lifeline import kill_model_server, spawn_model_server
from pyruntime.model.hosting.llama_server import (
    DEFAULT_SLOTS,
    SMALL_MODEL_MAX_BYTES,
    SMALL_MODEL_PROMPT_CACHE_MB,
    EngineLaunch,
    LlamaServerConfig,
    default_prompt_cache_mb,
    effective_n_ctx,
    find_llama_server,
    generate_model_key,
    hosted_model_config,
    server_command,
)
from pyruntime.model.hosting.server_log import CacheState, EngineLog
from pyruntime.model.hosting.slot_store import SlotStateStore, engine_identity
from pyruntime.model.hosting.warm_slots import restore_slots, save_slots
from pyruntime.model.public_port import EngineProxy, GuardedPort, ModelPortAuth

log = logging.getLogger(__name__)

# The config (`hosted_model_config`, `generate_model_key`) is llama_server.py's, re-exported where callers found it.
__all__ = [
    "DEFAULT_SLOTS", "SMALL_MODEL_MAX_BYTES", "SMALL_MODEL_PROMPT_CACHE_MB", "LlamaServerProcess",
    "default_prompt_cache_mb", "generate_model_key", "hosted_model_config",
]

ENGINE_HOST = "http://engine"  # the Host of requests over the Unix socket (any name: only we connect)
ENGINE_KEEPALIVE = httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S)  # the model port's proxy to the engine
_POLL_S = 0.05
_TICK_S = 2.0


class LlamaServerProcess:
    """One hosted model: llama.cpp's llama-server in a child process, behind the guarded model port."""

    def __init__(self, config: LlamaServerConfig) -> None:
        """Prepare (not start) a server for `config`."""
        self._requested = config
        self.config = config
        self._process: subprocess.Popen[bytes] | None = None
        # The child's stderr is kept in memory, never logged (llama.cpp may print request text).
        self._log = EngineLog(config.prompt_cache_mb << 20)
        self.startup_seconds: float | None = None
        self.binary: Path | None = None
        self.slots = SlotAffinity(config.slots)
        # The last answer to `status()` (the watchdog probes it every second): what Health reports without a call.
        self.last_status: dict[str, object] = {}
        self.gpu_layers = config.n_gpu_layers  # what the running engine was started with
        self.gpu_fallback_reason = ""  # why the requested GPU layers run on the CPU ("" when they do not)
        self.restored_slots = 0  # slot states loaded from the disk cache at the last start
        self.template_renders_tools = False  # does the model's chat template render tools (llama-server's /props)
        self._private: Path | None = None
        self._engine_key = ""
        self._launch: EngineLaunch | None = None
        self._public: GuardedPort | None = None
        self._http: httpx.Client | None = None
        self._store: SlotStateStore | None = None
        # States of conversations that lost their slot, in the engine's save folder (known once it first starts).
        self.parked: ParkedStates | None = None

    # -- where it answers ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL of the public model port, e.g. `http://127.0.0.1:13333/v1`."""
        return self.config.base_url

    @property
    def api_key(self) -> str | None:
        """The bearer key the public port demands (None: none)."""
        return self.config.api_key

    @property
    def auth_headers(self) -> dict[str, str]:
        """Headers that authenticate a request to the public port."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def engine_url(self) -> str:
        """The engine's own root URL (over its Unix socket, or its private port on Windows)."""
        launch = self._launch
        if launch is None or launch.listen.endswith(".sock"):
            return ENGINE_HOST
        return f"http://{launch.listen}:{launch.port}"

    @property
    def engine_headers(self) -> dict[str, str]:
        """Headers that authenticate a request to the engine itself."""
        return {"Authorization": f"Bearer {self._engine_key}"}

    def engine_socket(self) -> str | None:
        """The engine's Unix socket (None: it listens on TCP at `engine_url`)."""
        launch = self._launch
        return launch.listen if launch is not None and launch.listen.endswith(".sock") else None

    def engine_transport(self) -> httpx.AsyncHTTPTransport | None:
        """An async httpx transport to the engine, for the model port's proxy (None: plain TCP to `engine_url`)."""
        path = self.engine_socket()
        return httpx.AsyncHTTPTransport(uds=path, limits=ENGINE_KEEPALIVE) if path else None

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of an `OpenAICompatClient` that talks to the engine directly (no hop), in its dialect.

        The key and the socket are those of this start: a client made before a restart keeps working
        because a restart reuses both (`restart`).
        """
        return {"base_url": f"{self.engine_url}/v1", "api_key": self._engine_key,
                "unix_socket": self.engine_socket, "slots": self.slots, "parked": self.parked,
                "llama_server": True,
                "forced_tools_as_schema": not self.template_renders_tools, "model": self.config.alias}

    @property
    def pid(self) -> int | None:
        """Process id of the child, None before start."""
        return self._process.pid if self._process else None

    def is_alive(self) -> bool:
        """True while the child process runs."""
        return self._process is not None and self._process.poll() is None

    # -- start ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        """Start llama-server and wait until it answers, then open the model port; ModelUnavailableError if not."""
        if self.is_alive():
            return
        info = read_gguf_info(self._requested.model_path)
        self.config = self._requested.with_n_ctx(effective_n_ctx(self._requested.n_ctx, info.context_length))
        if self._public is None and not port_is_free(self.config.host, self.config.port):
            raise ModelUnavailableError(f"port {self.config.port} on {self.config.host} is already in use")
        self.binary = find_llama_server()
        log.info("loading model %s (%.1f MB, %d slots of %d tokens, threads=%d) on port %d",
                 self.config.model_path, info.size_bytes / 1e6, self.config.slots, self.config.n_ctx,
                 self.config.n_threads, self.config.port)
        began = time.perf_counter()
        reopened = self._public is None
        try:
            self._start_engine(began, timeout)
            self._restore_slots()
            if self._public is None:
                self._open_public_port()
        except BaseException:
            # A first start leaves nothing behind; a restart keeps the model port (it answers 503 meanwhile).
            self.kill()
            if reopened:
                self.stop()
            raise
        self.startup_seconds = time.perf_counter() - began
        log.info("model server ready in %.2f s", self.startup_seconds)

    def restart(self, timeout: float = 120.0) -> None:
        """Start the engine again after `kill()` (same model port, same keys: clients go on as they were)."""
        self.start(timeout)

    def _start_engine(self, began: float, timeout: float) -> None:
        """Spawn the engine (on the CPU again when the GPU cannot take the layers) and wait for it."""
        self.gpu_fallback_reason = ""
        layers = self.config.n_gpu_layers
        try:
            self._spawn_and_wait(layers, began, timeout)
        except ModelUnavailableError as exc:
            if layers == 0 or self.is_alive():
                raise
            reason = self._log.gpu_failure or f"the model did not load with {layers} GPU layers ({exc})"
            log.warning("GPU refused the model (%s); starting on the CPU", reason)
            self._spawn_and_wait(0, time.perf_counter(), timeout)
            self.gpu_fallback_reason = reason
            return
        if layers != 0 and self._log.no_gpu_backend:
            self.gpu_layers = 0
            self.gpu_fallback_reason = "this llama-server has no GPU backend (a CPU build); the layers run on the CPU"
        elif layers != 0 and self._log.offloaded is not None:
            on_gpu, total = self._log.offloaded
            self.gpu_layers = on_gpu
            if on_gpu < total and (layers == -1 or on_gpu < layers):
                self.gpu_fallback_reason = f"{on_gpu} of {total} layers fit in the GPU's free memory"

    def _spawn_and_wait(self, layers: int, began: float, timeout: float) -> None:
        # One private folder, key and address for the life of this object: a restart keeps clients working.
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="coreai-engine-"))  # 0700, short enough for a socket path
        if not self._engine_key:
            self._engine_key = secrets.token_urlsafe(32)
        key_file = write_key_file(self._private, self._engine_key)
        listen, port = engine_address(self._private, self._launch.port if self._launch is not None else None)
        slot_dir = None
        if self.config.prompt_cache_dir is None:  # llama-server's save path otherwise (EngineLaunch.slot_dir)
            slot_dir = state_folder(self.config.state_dir) or self._private / "slots"
            slot_dir.mkdir(mode=0o700, exist_ok=True)
        self._launch = EngineLaunch(listen=listen, port=port, key_file=key_file, n_gpu_layers=layers,
                                    slot_dir=slot_dir)
        if self.config.prompt_cache_dir is not None:
            self.config.prompt_cache_dir.mkdir(parents=True, exist_ok=True)
        save_folder = self.config.prompt_cache_dir or slot_dir
        assert save_folder is not None
        if self.parked is None:
            self.parked = ParkedStates(save_folder, self.config.prompt_cache_mb << 20)
        self.parked.clear()  # a previous run's parked states (a crash, a restart) mean nothing to this one
        assert self.binary is not None
        command = server_command(self.binary, self.config, self._launch)
        self._log.reset(self.config.prompt_cache_mb << 20)
        self.last_status = {}
        self.slots.reset()
        self.gpu_layers = layers
        self._process = spawn_model_server(command, env=self._child_env(), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        threading.Thread(target=self._drain_stderr, args=(self._process,), name="llama-stderr", daemon=True).start()
        self._http = httpx.Client(base_url=self.engine_url, headers=self.engine_headers, timeout=2.0,
                                  transport=httpx.HTTPTransport(uds=listen) if listen.endswith(".sock") else None)
        self._wait_ready(began, timeout)

    def _child_env(self) -> dict[str, str]:
        return engine_env()

    def _wait_ready(self, began: float, timeout: float) -> None:
        assert self._process is not None and self._http is not None and self._launch is not None
        next_tick = began + _TICK_S
        key_read = False
        while True:
            code = self._process.poll()
            if code is not None:
                time.sleep(0.1)  # let the drain thread read the child's last words
                raise ModelUnavailableError(
                    f"model server exited with code {code} while starting: {self._log.last_words()}")
            try:
                status = self._http.get("/health").status_code
            except httpx.TransportError:
                status = None  # not listening yet
            if status is not None and not key_read:
                self._launch.key_file.unlink(missing_ok=True)  # read at startup, before it listens
                key_read = True
            if status == 200:
                self._read_props()
                return
            now = time.perf_counter()
            if now - began > timeout:
                raise ModelUnavailableError(f"model server did not answer within {timeout:.0f} s")
            if now >= next_tick:
                log.info("still loading model ... %.0f s", now - began)
                next_tick = now + _TICK_S
            time.sleep(_POLL_S)

    def _read_props(self) -> None:
        """What the runtime needs from `/props`: whether the model's template renders tools."""
        assert self._http is not None
        try:
            caps = self._http.get("/props", timeout=10.0).json().get("chat_template_caps") or {}
        except (httpx.HTTPError, ValueError, AttributeError):
            caps = {}
        self.template_renders_tools = bool(caps.get("supports_tools")) and bool(caps.get("supports_tool_calls"))

    def _open_public_port(self) -> None:
        def connect() -> httpx.AsyncClient:
            return httpx.AsyncClient(base_url=self.engine_url, transport=self.engine_transport(),
                                     timeout=httpx.Timeout(None, connect=5.0), limits=ENGINE_KEEPALIVE)

        proxy = EngineProxy(connect, lambda: dict(self.engine_headers))
        app = ModelPortAuth(proxy, port=lambda: self.config.port, api_key=self.config.api_key)
        self._public = GuardedPort(app, self.config.host, self.config.port, on_stop=proxy.aclose)
        try:
            self._public.start()
        except OSError as exc:
            self._public = None
            raise ModelUnavailableError(f"port {self.config.port} on {self.config.host} is already in use") from exc

    @property
    def public_port(self) -> GuardedPort | None:
        """The guarded model port (None before start)."""
        return self._public

    # -- the child's stderr ----------------------------------------------------------------

    def _drain_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self._log.feed(line)

    @property
    def cache(self) -> CacheState:
        """The parked states of conversations that lost their slot (the runtime's prompt cache)."""
        parked = self.parked
        if parked is None:
            return CacheState(limit_bytes=self.config.prompt_cache_mb << 20)
        return CacheState(used_bytes=parked.used_bytes, entries=parked.entries, limit_bytes=parked.limit_bytes)

    # -- what the watchdog and Health read -------------------------------------------------

    def health(self, timeout: float = 2.0) -> bool:
        """True when the engine answers `GET /health` with 200 (its HTTP threads; never waits for a decode)."""
        if self._http is None:
            return False
        return self._http.get("/health", timeout=timeout).status_code == 200

    def status(self, timeout: float = 2.0) -> dict[str, object]:
        """The slots (`GET /slots`, answered between decode steps) and the parked states (`cache`).

        Raises httpx errors when the engine does not answer in `timeout` (hung, stopped, dead).
        """
        if self._http is None:
            raise httpx.ConnectError("the model server has not started")
        response = self._http.get("/slots", timeout=timeout)
        response.raise_for_status()
        slots = response.json()
        if not isinstance(slots, list):
            raise ValueError("/slots is not a JSON list")
        busy = sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing"))
        cache = self.cache
        data: dict[str, object] = {
            "slots_total": len(slots), "slots_busy": busy, "slots": slots,
            "prompt_cache_used_bytes": cache.used_bytes, "prompt_cache_entries": cache.entries,
            "prompt_cache_limit_bytes": cache.limit_bytes or (self.config.prompt_cache_mb << 20),
        }
        self.last_status = data
        return data

    # -- restart-warm slots ----------------------------------------------------------------

    def _slot_store(self) -> SlotStateStore | None:
        if self.config.prompt_cache_dir is None or self.binary is None:
            return None
        if self._store is None:
            identity = engine_identity(self.config.model_path, self.config.context_tokens, self.binary)
            self._store = SlotStateStore(self.config.prompt_cache_dir, identity)
        return self._store

    def _restore_slots(self) -> None:
        """Load the states saved at the last graceful stop into the slots (those that pass the store's checks)."""
        store = self._slot_store()
        self.restored_slots = 0
        if store is None or self._http is None:
            return
        self.restored_slots = restore_slots(self._http, store, self.slots, self.config.slots)

    def forget_saved(self, conversations: list[str]) -> None:
        """Remove the restart-warm states saved for these conversations (`--prompt-cache-dir`), files and index."""
        if self.config.prompt_cache_dir is None:
            return
        # Before any start this runtime has no identity to write: an empty one makes the next start drop the rest.
        store = self._slot_store() or SlotStateStore(self.config.prompt_cache_dir, "")
        store.erase(conversations)

    def save_slots(self) -> int:
        """Have the engine save each slot's conversation to the disk cache (a graceful stop); how many it saved."""
        store = self._slot_store()
        if store is None or self._http is None or not self.is_alive():
            return 0
        return save_slots(self._http, store, self.slots)

    # -- stop ------------------------------------------------------------------------------

    def kill(self) -> int | None:
        """SIGKILL the engine at once (a hung or stopped one ignores SIGTERM) and reap it; the model port stays."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            kill_model_server(process)
            process.wait()
        self._close_engine_client()
        return process.returncode

    def stop(self, timeout: float = 5.0) -> int | None:
        """Save the slots (disk cache), close the model port, stop the engine (killed if it does not exit in
        `timeout`); returns its exit code."""
        try:
            self.save_slots()
        except Exception as exc:  # noqa: BLE001 - a failed save costs warm first turns, nothing else
            log.warning("slot states not saved (%s)", type(exc).__name__)
        if self._public is not None:
            self._public.stop()
            self._public = None
        process = self._process
        code = None
        if process is not None:
            if process.poll() is None:
                if sys.platform == "win32":
                    process.terminate()  # llama-server handles only Ctrl+C there; the slots were saved above
                else:
                    process.send_signal(signal.SIGTERM)
                    with contextlib.suppress(OSError):  # a frozen (SIGSTOPped) engine handles it once it runs
                        process.send_signal(signal.SIGCONT)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("model server did not stop in %.0f s; killing it", timeout)
                    kill_model_server(process)
                    process.wait()
            code = process.returncode
        self._close_engine_client()
        if self.parked is not None:
            self.parked.clear()
        self._cleanup_private()
        return code

    def _close_engine_client(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _cleanup_private(self) -> None:
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    def __enter__(self) -> LlamaServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
