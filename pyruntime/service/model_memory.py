"""The hosted model server's memory, as Health and `/metrics` report it, read without calling the model.

RSS comes from the OS (`/proc/PID/status` on Linux; 0 on other systems: the standard library reads
another process's resident memory nowhere else). The prompt cache's size is the child's answer to
the watchdog's last status probe (`LlamaServerProcess.last_status`), its limit the configured one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelMemory:
    """Bytes: the model server's resident memory, and its prompt cache's use and budget (0: unknown or none)."""

    rss_bytes: int = 0
    prompt_cache_used_bytes: int = 0
    prompt_cache_limit_bytes: int = 0


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
    if not callable(is_alive) or not is_alive():
        return NO_MODEL_MEMORY
    status = getattr(server, "last_status", None) or {}
    config = getattr(server, "config", None)
    limit = int(getattr(config, "prompt_cache_mb", 0) or 0) << 20
    used = status.get("prompt_cache_used_bytes", 0) if isinstance(status, dict) else 0
    return ModelMemory(rss_bytes=process_rss_bytes(getattr(server, "pid", None)),
                       prompt_cache_used_bytes=used if isinstance(used, int) and used > 0 else 0,
                       prompt_cache_limit_bytes=limit)
