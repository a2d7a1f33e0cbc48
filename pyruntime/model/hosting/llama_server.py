"""Settings of the hosted engine, llama.cpp's own `llama-server`: its config, where the binary is, its command line.

Pure apart from the binary lookup (which reads the environment and the file system). The process
itself is `hosting.LlamaServerProcess`; the port external clients use is `public_port.py`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 13333
DEFAULT_N_CTX = 8192  # per conversation (per slot): a memory-assembled turn needs more than 2048
MIN_N_CTX = 32
LLAMA_SERVER_ENV = "COREAI_LLAMA_SERVER"  # an explicit binary (tests, a custom GPU build)
BOOTSTRAP_COMMAND = "bash scripts/bootstrap.sh"

# Parallel slots (`-np`): NPCs whose turns are decoded together (continuous batching), each conversation
# keeping its slot's KV cache while it is warm. 4 on this 2-core machine (docs/engine.md: four NPC
# turns at once finish sooner than one after the other, and four NPCs in rotation keep their state in
# their slots); a GPU gains more from more slots (each costs n_ctx tokens of KV memory).
DEFAULT_SLOTS = 4
MAX_SLOTS = 64
# Parked states (`parked_states.py`): states of conversations that lost their slot, each in a file of its own,
# restored when they speak again; this budget bounds them. A GGUF below SMALL_MODEL_MAX_BYTES is a small model
# (SmolLM2-135M is 98 MB).
SMALL_MODEL_MAX_BYTES = 1_000_000_000
SMALL_MODEL_PROMPT_CACHE_MB = 256  # ~10 SmolLM2 conversations of 1000 tokens (22 KB per token)
LARGE_MODEL_PROMPT_CACHE_MB = 2048  # a few conversations of a 7-8B model (~128 KB per token)
# Read/write timeout of llama-server's HTTP side (`-to`, default 3600 s). Only the runtime reaches it;
# a stream that sends nothing for this long (a prompt evaluation on a very slow CPU) is cut.
SERVER_TIMEOUT_S = 600
# Log verbosity 4 (trace) prints the prompt cache's state after each change: "cache state: N prompts,
# X MiB (limits: Y MiB ...)", which is how Health learns the cache's use (no endpoint reports it).
LOG_VERBOSITY = 4


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """llama.cpp threads that leave the game half the cores: max(1, cores // 2).

    llama.cpp's threads spin at every barrier, so a thread that loses its core to the game stalls
    all the others: on a 2-core machine with the game busy, a short reply takes about 16 times as long
    on 2 threads as on 1 (docs/benchmarks.md#model-supervision).
    """
    return max(1, available_cores() // 2)


def effective_n_ctx(requested: int | None, trained: int | None) -> int:
    """The context size per conversation: the request (default 8192), never above the trained context."""
    n_ctx = DEFAULT_N_CTX if requested is None else requested
    if n_ctx < MIN_N_CTX:
        raise InvalidArgumentError(f"n_ctx must be at least {MIN_N_CTX}, got {n_ctx}")
    return min(n_ctx, trained) if trained else n_ctx


def default_prompt_cache_mb(model_path: Path) -> int:
    """The host prompt cache a model gets unless told: 256 MB for a small model, 2 GB for a large one."""
    try:
        small = model_path.stat().st_size < SMALL_MODEL_MAX_BYTES
    except OSError:
        return SMALL_MODEL_PROMPT_CACHE_MB  # the model's own load reports the missing file
    return SMALL_MODEL_PROMPT_CACHE_MB if small else LARGE_MODEL_PROMPT_CACHE_MB


@dataclass(frozen=True)
class LlamaServerConfig:
    """Game-ready settings of one hosted model (see docs/engine.md and contract §8)."""

    model_path: Path
    alias: str
    host: str = DEFAULT_HOST  # the public model port (our guard in front of llama-server)
    port: int = DEFAULT_PORT
    n_ctx: int | None = None  # per conversation (slot); None: 8192; always clamped to the trained context
    n_threads: int = field(default_factory=default_threads)
    # Layers offloaded to the GPU (llama.cpp's -ngl): 0 = CPU only, -1 = all that fit. A GPU that cannot take
    # them (no driver, not enough memory) makes the engine start again on the CPU, the reason in Health.
    n_gpu_layers: int = 0
    slots: int = DEFAULT_SLOTS
    # Room for the parked states of conversations that lost their slot (`parked_states.py`). 0: none are parked.
    prompt_cache_mb: int = SMALL_MODEL_PROMPT_CACHE_MB
    # Slot states saved here at a graceful stop and restored at the next start (restart-warm NPCs). None: off.
    prompt_cache_dir: Path | None = None
    # Where the engine writes conversations' states while it runs (parked states) when there is no prompt_cache_dir:
    # serve gives the data folder's `CoreAI/runtime/engine-states`, so a deletion of the saves takes them too and a
    # crashed runtime's are cleared by the next start. None: the engine's private temporary folder.
    state_dir: Path | None = None
    # Bearer key the public port demands; None: no key (tests, benches). The engine behind it always has its own.
    api_key: str | None = field(default=None, repr=False)
    # llama.cpp's flash attention: "auto" (its choice: on where the backend has it, the CPU included), "on", "off".
    # With it on, a prompt's distribution depends slightly on how the prompt was split between reused cells and
    # evaluation (up to 1.5e-3 in a probability, measured); off, it does not (the engine isolation check runs so).
    flash_attention: str = "auto"

    def __post_init__(self) -> None:
        if not self.alias.strip():
            raise InvalidArgumentError("model alias must not be blank")
        if not 0 < self.port < 65536:
            raise InvalidArgumentError(f"port must be within 1..65535, got {self.port}")
        if self.n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, got {self.n_threads}")
        if self.n_gpu_layers < -1:
            raise InvalidArgumentError(f"n_gpu_layers must be -1 (all), 0 (CPU) or more, got {self.n_gpu_layers}")
        if not 1 <= self.slots <= MAX_SLOTS:
            raise InvalidArgumentError(f"slots must be within 1..{MAX_SLOTS}, got {self.slots}")
        if self.prompt_cache_mb < 0:
            raise InvalidArgumentError(f"prompt_cache_mb must be 0 (off) or more, got {self.prompt_cache_mb}")
        if self.flash_attention not in ("auto", "on", "off"):
            raise InvalidArgumentError(f"flash_attention must be auto, on or off, got {self.flash_attention!r}")

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL (with `/v1`) of the public model port."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def context_tokens(self) -> int:
        """Tokens per conversation once the context is fixed (DEFAULT_N_CTX before)."""
        return self.n_ctx if self.n_ctx is not None else DEFAULT_N_CTX

    def with_n_ctx(self, n_ctx: int) -> LlamaServerConfig:
        """A copy with the context size fixed."""
        return replace(self, n_ctx=n_ctx)


@dataclass(frozen=True)
class EngineLaunch:
    """Where one llama-server process listens and reads its key: decided by the host, per start."""

    listen: str  # a Unix socket path ending in .sock, or a loopback address
    port: int  # the private port (ignored for a socket)
    key_file: Path
    n_gpu_layers: int  # what this start asks for (0 after a GPU fallback)
    # Where llama-server may write slot states without a disk prompt cache: it refuses `/slots?action=erase` (501)
    # without a save path, and the runtime erases the states a compaction superseded (model/client/slots.py).
    slot_dir: Path | None = None


def server_command(binary: Path, config: LlamaServerConfig, launch: EngineLaunch) -> list[str]:
    """The command line of llama-server for `config` (no secret on it: the key is read from `launch.key_file`).

    Each conversation gets `n_ctx` tokens of its own slot (`-c` is the whole KV, split over the slots).
    """
    n_ctx = config.context_tokens
    args = [
        str(binary),
        "--model", str(config.model_path),
        "--alias", config.alias,  # responses name the alias, never the file path
        "--host", launch.listen, "--port", str(launch.port),
        "--ctx-size", str(n_ctx * config.slots), "--parallel", str(config.slots), "--no-kv-unified",
        "--threads", str(config.n_threads), "--threads-batch", str(config.n_threads),
        "--n-gpu-layers", gpu_layers_flag(launch.n_gpu_layers),
        "--api-key-file", str(launch.key_file),
        "--jinja",  # the model's own chat template, and native tool calls
        # No host prompt cache: it hands a request any cached state its prompt starts like, whoever made it, and
        # cannot forget one conversation (llama.cpp issues 27148, 27422). The runtime parks states per conversation
        # instead (parked_states.py); idle slots keep their conversation (slots.py).
        "--cache-ram", "0",
        "--flash-attn", config.flash_attention,
        "--metrics", "--slots", "--no-ui", "--offline",
        "--timeout", str(SERVER_TIMEOUT_S),
        "--log-verbosity", str(LOG_VERBOSITY), "--log-colors", "off",
    ]
    slot_dir = config.prompt_cache_dir or launch.slot_dir
    if slot_dir is not None:
        args += ["--slot-save-path", str(slot_dir)]
    return args


def gpu_layers_flag(layers: int) -> str:
    """llama-server's `-ngl` value: -1 is `auto` (as many layers as fit in the GPU's free memory, llama.cpp's own
    fitting: a GPU too small for all of them still takes some), otherwise the exact count."""
    return "auto" if layers == -1 else str(layers)


def binary_name() -> str:
    """`llama-server`, with `.exe` on Windows."""
    return "llama-server.exe" if sys.platform == "win32" else "llama-server"


def find_llama_server() -> Path:
    """The llama-server binary: $COREAI_LLAMA_SERVER, next to a frozen runtime, in this Python's scripts
    folder (where the bootstrap installs it), then PATH. ModelUnavailableError naming the bootstrap if none."""
    name = binary_name()
    explicit = os.environ.get(LLAMA_SERVER_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ModelUnavailableError(f"${LLAMA_SERVER_ENV} names no file; unset it or point it at llama-server")
        return path
    candidates = []
    if getattr(sys, "frozen", False):
        candidates.append(Path(sys.executable).resolve().parent / name)
    candidates.append(Path(sysconfig.get_path("scripts")) / name)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise ModelUnavailableError(f"llama.cpp's {name} is not installed; install it with: {BOOTSTRAP_COMMAND} "
                                f"(or set ${LLAMA_SERVER_ENV} to its path)")


def hosted_model_config(
    model_path: Path | None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    n_ctx: int | None = None,
    n_threads: int | None = None,
    n_gpu_layers: int = 0,
    api_key: str | None = None,
    slots: int | None = None,
    prompt_cache_mb: int | None = None,
    prompt_cache_dir: Path | None = None,
    state_dir: Path | None = None,
) -> LlamaServerConfig:
    """Config for hosting `model_path`, or the embedded SmolLM2 model when it is None.

    The port always demands a key: `api_key`, else a fresh random one (`generate_model_key`).
    `slots` None: DEFAULT_SLOTS; `prompt_cache_mb` None: `default_prompt_cache_mb` of the model file;
    `prompt_cache_dir`: the slots' states saved there at a stop and restored at the next start; `state_dir`: where
    the engine writes states while it runs (see `LlamaServerConfig.state_dir`).
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
                             n_gpu_layers=n_gpu_layers, api_key=key, slots=DEFAULT_SLOTS if slots is None else slots,
                             prompt_cache_mb=cache, prompt_cache_dir=prompt_cache_dir, state_dir=state_dir)


def generate_model_key() -> str:
    """A random bearer key for the model port (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)
