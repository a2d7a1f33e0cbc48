"""Run the llama.cpp server in a child process: start, wait until it answers, stop.

A child process keeps a native crash of llama.cpp out of the runtime and lets tests kill it.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from types import TracebackType

import httpx

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.errors import ModelUnavailableError
from pyruntime.model.gguf_info import read_gguf_info
from pyruntime.model.lifeline import child_popen_options, tie_child_to_this_process
from pyruntime.model.llama_server import (
    API_KEY_ENV,
    DEFAULT_HOST,
    DEFAULT_PORT,
    LlamaServerConfig,
    default_threads,
    effective_n_ctx,
)
from pyruntime.model.port_guard import STATUS_PATH

log = logging.getLogger(__name__)

# A hosted GGUF below this size is a small model (SmolLM2-135M is 98 MB; a 1B model at 4 bits ~0.7 GB).
# It gets the memory writer pass (turns/factory.py) and, by default, a RAM prompt cache: the pass's own
# prompt would otherwise evict the conversation's, and the next reply would evaluate it all again
# (reply latency vs history only 2.39x without the cache, 1.35x with it: bench/memory_eval.py).
SMALL_MODEL_MAX_BYTES = 1_000_000_000
# The default cache for a small model: ~10 SmolLM2 conversations of 1000 tokens (2.2-22 MB each).
SMALL_MODEL_PROMPT_CACHE_MB = 256

MALLOC_MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MALLOC_MMAP_THRESHOLD_BYTES = "131072"  # glibc's initial threshold, kept fixed (it grows by default)

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # so the child imports this same pyruntime
_POLL_S = 0.05
_TICK_S = 2.0
_STDERR_LINES = 50


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (checked by binding it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is free
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class LlamaServerProcess:
    """One hosted model: llama-cpp-python's OpenAI-compatible server in a child process."""

    def __init__(self, config: LlamaServerConfig) -> None:
        """Prepare (not start) a server for `config`."""
        self._requested = config
        self.config = config
        self._process: subprocess.Popen[bytes] | None = None
        # The child's stderr is kept in memory, never logged: llama-cpp-python prints request
        # bodies (player text) in its error traces. Startup errors quote its tail.
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_LINES)
        self.startup_seconds: float | None = None
        # The child's last answer to `status()` (the watchdog probes it every second): what Health reports
        # of the prompt cache without calling the child itself.
        self.last_status: dict[str, object] = {}

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. `http://127.0.0.1:13333/v1`."""
        return self.config.base_url

    @property
    def api_key(self) -> str | None:
        """The bearer key the port demands (None: none)."""
        return self.config.api_key

    @property
    def auth_headers(self) -> dict[str, str]:
        """Headers that authenticate a request to this server."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def pid(self) -> int | None:
        """Process id of the child, None before start."""
        return self._process.pid if self._process else None

    def is_alive(self) -> bool:
        """True while the child process runs."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 120.0) -> None:
        """Spawn the child and wait until `GET /v1/models` answers; raise ModelUnavailableError if not."""
        if self.is_alive():
            return
        info = read_gguf_info(self._requested.model_path)
        self.config = self._requested.with_n_ctx(effective_n_ctx(self._requested.n_ctx, info.context_length))
        if not port_is_free(self.config.host, self.config.port):
            raise ModelUnavailableError(f"port {self.config.port} on {self.config.host} is already in use")
        log.info(
            "loading model %s (%.1f MB, n_ctx=%d, threads=%d) on port %d",
            self.config.model_path,
            info.size_bytes / 1e6,
            self.config.n_ctx,
            self.config.n_threads,
            self.config.port,
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        # glibc keeps freed prompt-cache state copies (2-22 MB each) in its heap: with a fixed mmap threshold
        # they go back to the OS. SmolLM2, 4 NPCs, 256 MB cache: 767 vs 950 MB RSS after 100 turns, same
        # TTFT (bench_npcs.py, docs/design/prompt-layout.md). Other C libraries ignore the variable.
        env.setdefault(MALLOC_MMAP_THRESHOLD_ENV, MALLOC_MMAP_THRESHOLD_BYTES)
        env.pop(API_KEY_ENV, None)
        if self.config.api_key:
            env[API_KEY_ENV] = self.config.api_key
        began = time.perf_counter()
        self.last_status = {}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "pyruntime.model.llama_server", self.config.to_json()],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the library prints request chatter there
            stderr=subprocess.PIPE,
            **child_popen_options(),  # Ctrl+C reaches only us; we stop the child in order
        )
        tie_child_to_this_process(self._process)  # dies with the runtime on every OS (model/lifeline.py)
        threading.Thread(target=self._drain_stderr, args=(self._process,), name="llama-stderr", daemon=True).start()
        try:
            self._wait_ready(began, timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.perf_counter() - began
        log.info("model server ready in %.2f s", self.startup_seconds)

    def _wait_ready(self, began: float, timeout: float) -> None:
        assert self._process is not None
        next_tick = began + _TICK_S
        with httpx.Client(timeout=2.0) as http:
            while True:
                code = self._process.poll()
                if code is not None:
                    time.sleep(0.1)  # let the drain thread read the child's last words
                    last = self._stderr_tail[-1] if self._stderr_tail else "no output"
                    raise ModelUnavailableError(f"model server exited with code {code} while starting: {last}")
                try:
                    if http.get(f"{self.base_url}/models", headers=self.auth_headers).status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet: the model is still loading
                now = time.perf_counter()
                if now - began > timeout:
                    raise ModelUnavailableError(f"model server did not answer within {timeout:.0f} s")
                if now >= next_tick:
                    log.info("still loading model ... %.0f s", now - began)
                    next_tick = now + _TICK_S
                time.sleep(_POLL_S)

    def _drain_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self._stderr_tail.append(line)

    def recent_stderr(self) -> list[str]:
        """The child's last stderr lines (for debugging by hand; may contain request text)."""
        return list(self._stderr_tail)

    def status(self, timeout: float = 2.0) -> dict[str, object]:
        """The child's generation status (`GET /coreai/status`, answered without the model lock).

        Raises httpx errors when the child does not answer in `timeout` (hung, stopped, dead).
        """
        root = self.base_url.removesuffix("/v1")
        response = httpx.get(f"{root}{STATUS_PATH}", headers=self.auth_headers, timeout=timeout)
        response.raise_for_status()
        data = response.json()
        if not isinstance(data, dict):
            raise ValueError("status is not a JSON object")
        self.last_status = data
        return data

    def kill(self) -> int | None:
        """SIGKILL the child at once (a hung or stopped child ignores SIGTERM) and reap it."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.kill()
            process.wait()
        return process.returncode

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate the child (kill it if it does not exit in `timeout`); returns its exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("model server did not stop in %.0f s; killing it", timeout)
                process.kill()
                process.wait()
        return process.returncode

    def __enter__(self) -> LlamaServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def hosted_model_config(
    model_path: Path | None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    api_key: str | None = None,
    prompt_cache_mb: int | None = None,
    prompt_cache_dir: Path | None = None,
) -> LlamaServerConfig:
    """Config for hosting `model_path`, or the embedded SmolLM2 model when it is None.

    The port always demands a key: `api_key`, else a fresh random one (`generate_model_key`).
    `prompt_cache_mb` None: `default_prompt_cache_mb` of the model file; `prompt_cache_dir`: the cache on disk
    too (a model that gets no cache by default needs `prompt_cache_mb` with it).
    """
    threads = default_threads() if n_threads is None else n_threads
    key = api_key or generate_model_key()
    if model_path is None:
        path, alias = embedded_model_path(), EMBEDDED_MODEL_ALIAS
    elif model_path.suffix.lower() != ".gguf":
        raise InvalidArgumentError("--model must be a .gguf file")
    else:
        path, alias = model_path, model_path.stem.lower() or "local-model"
    cache = default_prompt_cache_mb(path) if prompt_cache_mb is None else prompt_cache_mb
    return LlamaServerConfig(model_path=path, alias=alias, host=host, port=port, n_ctx=n_ctx, n_threads=threads,
                             n_gpu_layers=n_gpu_layers, api_key=key, prompt_cache_mb=cache,
                             prompt_cache_dir=prompt_cache_dir)


def default_prompt_cache_mb(model_path: Path) -> int:
    """The RAM prompt cache a hosted model gets unless told: small models one, large ones none.

    A large model's KV state per prompt is hundreds of MB (saving it after every reply costs more than
    it saves at this budget), so it is opt-in there (`serve --prompt-cache-mb`).
    """
    try:
        small = model_path.stat().st_size < SMALL_MODEL_MAX_BYTES
    except OSError:
        return 0  # the model's own load reports the missing file
    return SMALL_MODEL_PROMPT_CACHE_MB if small else 0


def generate_model_key() -> str:
    """A random bearer key for the model port (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)
