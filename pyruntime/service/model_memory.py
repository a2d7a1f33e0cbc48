"""The hosted model server's memory and slots, as Health and `/metrics` report them, read without calling it.

RSS comes from the OS (`/proc/PID/status` on Linux; 0 on other systems: the standard library reads
another process's resident memory nowhere else). The prompt cache's use is what llama-server last
logged (`LlamaServerProcess.cache`), the slots its answer to the watchdog's last probe
(`LlamaServerProcess.last_status`), the GPU layers how the running engine was started.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelMemory:
    """The model server's resident memory, its prompt cache (bytes, entries), slots and GPU layers (0: none)."""

    rss_bytes: int = 0
    prompt_cache_used_bytes: int = 0
    prompt_cache_limit_bytes: int = 0
    prompt_cache_entries: int = 0
    slots: int = 0
    slots_busy: int = 0
    gpu_layers: int = 0
    gpu_fallback_reason: str = ""


ModelMemorySource = Callable[[], ModelMemory]
"""Reads the model server's memory now; must not block on the model (a /proc read at most)."""

NO_MODEL_MEMORY = ModelMemory()


def no_model_memory() -> ModelMemory:
    """The memory of a runtime without a hosted model: zeros."""
    return NO_MODEL_MEMORY


def process_rss_bytes(pid: int | None, proc: Path = Path("/proc")) -> int:
    """Resident memory of process `pid` in bytes; 0 when unknown (no /proc, the process is gone)."""
    if pid is None:
        return 0
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # "VmRSS:   123456 kB"
    return 0


def hosted_model_memory(host: object) -> ModelMemory:
    """The memory of a hosted model server (a `LlamaServerProcess`, or a supervisor with `.server`)."""
    server = getattr(host, "server", host)
    is_alive = getattr(server, "is_alive", None)
    config = getattr(server, "config", None)
    fallback = str(getattr(server, "gpu_fallback_reason", "") or "")
    if not callable(is_alive) or not is_alive():
        return ModelMemory(slots=int(getattr(config, "slots", 0) or 0), gpu_fallback_reason=fallback)
    status = getattr(server, "last_status", None) or {}
    cache = getattr(server, "cache", None)
    limit = int(getattr(config, "prompt_cache_mb", 0) or 0) << 20
    return ModelMemory(rss_bytes=process_rss_bytes(getattr(server, "pid", None)),
                       prompt_cache_used_bytes=_count(getattr(cache, "used_bytes", 0)),
                       prompt_cache_limit_bytes=_count(getattr(cache, "limit_bytes", 0)) or limit,
                       prompt_cache_entries=_count(getattr(cache, "entries", 0)),
                       slots=_count(status.get("slots_total")) or int(getattr(config, "slots", 0) or 0),
                       slots_busy=_count(status.get("slots_busy")),
                       gpu_layers=int(getattr(server, "gpu_layers", 0) or 0),
                       gpu_fallback_reason=fallback)


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
