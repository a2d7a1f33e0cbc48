"""Per-NPC prefix state for the hosted model (issue 13): llama-cpp-python's RAM prompt cache, made affordable.

llama-cpp-python keeps one KV sequence: four NPCs in rotation evaluate their whole prompt on every
turn. Its RAM cache saves the model state after each completion and loads the longest-prefix entry
before the next one, but as shipped (0.3.36) each entry also copies the logits of up to `n_batch`
positions (~100 MB for SmolLM2's 49k vocabulary) that its size limit does not count. This cache
keeps only the last position's logits (never used after a load: a prompt's last token is always
evaluated again) so the limit counts what is really held, and on each save drops the entries the
new one makes redundant (its own prefixes: the same conversation's earlier turns), so the space
goes to the other NPCs in use rather than to stale turns; otherwise least recently used goes first.

Runs in the model server's child process only (imports llama_cpp).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp
from llama_cpp.llama import Llama, LlamaState
from llama_cpp.llama_cache import LlamaRAMCache


def _is_prefix(short: tuple[int, ...], long: tuple[int, ...]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


class NpcPromptCache(LlamaRAMCache):
    """A RAM prompt cache whose size limit holds: last-row logits only; redundant prefixes dropped on save."""

    def __init__(self, capacity_bytes: int = (2 << 30)) -> None:
        """An empty cache of `capacity_bytes`; the newest one is the one `/coreai/status` reports."""
        super().__init__(capacity_bytes)
        # Kept up to date by the one thread that changes the cache (the model's), so the status probe
        # reads a plain int instead of iterating a dict another thread may be changing.
        self.used_bytes = 0
        global _active
        _active = self

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        key = tuple(key)
        scores = value.scores
        if getattr(scores, "ndim", 0) == 2 and scores.shape[0] > 1:
            # A fresh state of this save (save_state copies); load_state broadcasts the one row over
            # the positions it fills, and only the last one is ever read.
            value.scores = scores[-1:].copy()
        for old in [k for k in self.cache_state if k != key and _is_prefix(k, key)]:
            del self.cache_state[old]
        super().__setitem__(key, value)
        self.used_bytes = self.cache_size

    @property
    def entries(self) -> int:
        """How many states are held."""
        return len(self.cache_state)


_active: NpcPromptCache | None = None


def status() -> dict[str, int]:
    """The prompt cache's part of the child's `/coreai/status` (zeros before the model made its cache)."""
    cache = _active
    if cache is None:
        return {"prompt_cache_used_bytes": 0, "prompt_cache_limit_bytes": 0, "prompt_cache_entries": 0}
    return {"prompt_cache_used_bytes": cache.used_bytes, "prompt_cache_limit_bytes": int(cache.capacity_bytes),
            "prompt_cache_entries": len(cache.cache_state)}


def save_state_last_logits(self: Llama) -> LlamaState:
    """`Llama.save_state` without the copy of up to `n_batch` logits rows (~96 MB for SmolLM2, 0.1-0.6 s
    here after every completion with the cache on): only the last row, the one a load can use."""
    size = llama_cpp.llama_state_get_size(self._ctx.ctx)
    buffer = (ctypes.c_uint8 * int(size))()
    written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
    if written > int(size):
        raise RuntimeError("failed to copy the llama state")
    rows = min(self.n_tokens, self.scores.shape[0])
    last = self.scores[max(0, rows - 1): max(1, rows)]
    return LlamaState(scores=last.copy(), input_ids=self.input_ids.copy(), n_tokens=self.n_tokens,
                      llama_state=ctypes.string_at(buffer, written), llama_state_size=written, seed=self._seed)


def install() -> None:
    """Make the server's RAM cache this one and its saves light (called in the model server child only)."""
    llama_cpp.LlamaRAMCache = NpcPromptCache  # type: ignore[misc] - server/model.py looks it up at load time
    Llama.save_state = save_state_last_logits  # type: ignore[method-assign]
