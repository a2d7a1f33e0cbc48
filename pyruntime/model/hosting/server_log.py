"""What the runtime reads from llama-server's log (pure): the prompt cache's use, and why a GPU was refused.

llama-server reports its host prompt cache only in its log (at verbosity 4), after each change:
`srv  update:  - cache state: 3 prompts, 61.234 MiB (limits: 256.000 MiB, 8192 tokens, 11000 est)`.
The log is never forwarded to the runtime's own log: at other levels, and in errors, llama.cpp may
print request text. `EngineLog` keeps what one engine said in memory; the parsers below are pure.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass

_MIB = 1 << 20
_CACHE_STATE = re.compile(r"cache state: (\d+) prompts, ([\d.]+) MiB \(limits: ([\d.]+) MiB")
# Lines that mean the GPU could not take the model: no usable device or driver, or not enough memory on it.
_GPU_FAILURES = (
    (re.compile(r"out of memory|cudaMalloc failed|failed to allocate (CUDA|Metal|Vulkan|ROCm|SYCL)", re.I),
     "not enough GPU memory for the requested layers"),
    (re.compile(r"(no CUDA-capable device|CUDA driver version is insufficient|failed to initialize (CUDA|Vulkan|"
                r"Metal)|ggml_cuda_init: failed|no usable GPU found|vk.*ErrorInitializationFailed)", re.I),
     "no usable GPU (driver or device missing)"),
)
_NO_GPU_BUILD = re.compile(r"compiled without (support for )?GPU|no usable GPU found|does not support GPU", re.I)
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


@dataclass(frozen=True)
class CacheState:
    """The host prompt cache as llama-server last reported it."""

    entries: int = 0
    used_bytes: int = 0
    limit_bytes: int = 0


def cache_state(line: str) -> CacheState | None:
    """The cache state a log line reports, or None."""
    match = _CACHE_STATE.search(line)
    if match is None:
        return None
    return CacheState(int(match.group(1)), int(float(match.group(2)) * _MIB), int(float(match.group(3)) * _MIB))


def gpu_failure(line: str) -> str | None:
    """Why the GPU could not be used, when a log line says so (a short reason without the line itself)."""
    for pattern, reason in _GPU_FAILURES:
        if pattern.search(line):
            return reason
    return None


def offloaded_layers(line: str) -> tuple[int, int] | None:
    """(layers on the GPU, layers in all) when the line is the loader's report, else None."""
    match = _OFFLOADED.search(line)
    return (int(match.group(1)), int(match.group(2))) if match else None


def gpu_missing_in_build(line: str) -> bool:
    """True when the line says this llama-server has no GPU backend (layers then run on the CPU)."""
    return _NO_GPU_BUILD.search(line) is not None


STDERR_LINES = 80  # the engine's last lines kept in memory (never logged)


class EngineLog:
    """What one engine's stderr said since its start: the prompt cache, the GPU facts, its last lines.

    Fed by the thread that drains the child's stderr, read by the others; kept in memory only.
    """

    def __init__(self, cache_limit_bytes: int) -> None:
        """An empty log for an engine whose prompt cache holds `cache_limit_bytes`."""
        self._tail: deque[str] = deque(maxlen=STDERR_LINES)
        self._lock = threading.Lock()
        self.cache = CacheState(limit_bytes=cache_limit_bytes)
        self.offloaded: tuple[int, int] | None = None  # (on the GPU, in all) as the loader reported
        self.no_gpu_backend = False  # the engine said it has no GPU backend
        self.gpu_failure: str | None = None  # why the GPU refused the model, as the engine said

    def reset(self, cache_limit_bytes: int) -> None:
        """Forget what an earlier child said (a new one starts)."""
        self._tail.clear()
        self.cache = CacheState(limit_bytes=cache_limit_bytes)
        self.offloaded = None
        self.no_gpu_backend = False
        self.gpu_failure = None

    def feed(self, line: str) -> None:
        """Read one line of the engine's stderr (decoded, stripped, not blank)."""
        state = cache_state(line)
        if state is not None:
            self.cache = state
            return  # one per request: not worth the tail
        offloaded = offloaded_layers(line)
        if offloaded is not None:
            self.offloaded = offloaded
        if gpu_missing_in_build(line):
            self.no_gpu_backend = True
        failure = gpu_failure(line)
        if failure is not None:
            self.gpu_failure = failure
        with self._lock:
            self._tail.append(line)

    def recent(self) -> list[str]:
        """The last lines (for debugging by hand; may contain request text)."""
        with self._lock:
            return list(self._tail)

    def last_words(self) -> str:
        """The last error line (else the last line), clipped: why a child exited while starting."""
        lines = [line for line in self.recent() if "error" in line.lower() or "failed" in line.lower()]
        return (lines or self.recent() or ["no output"])[-1][-300:]
