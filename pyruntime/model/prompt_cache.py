"""Per-NPC prefix state for the hosted model (issue 13): llama-cpp-python's RAM prompt cache, made affordable.

llama-cpp-python keeps one KV sequence: four NPCs in rotation evaluate their whole prompt on every
turn. Its RAM cache saves the model state after each completion and loads the longest-prefix entry
before the next one, but as shipped (0.3.36) each entry also copies the logits of up to `n_batch`
positions (~100 MB for SmolLM2's 49k vocabulary) that its size limit does not count. This cache
keeps only the last position's logits (never used after a load: a prompt's last token is always
evaluated again) so the limit counts what is really held, and on each save drops the entries the
new one makes redundant (its own prefixes, up to the few tokens the model generated at their end:
the same conversation's earlier turns and prewarms), so the space
goes to the other NPCs in use rather than to stale turns; otherwise least recently used goes first.

With a folder (`serve --prompt-cache-dir`), the cache is mirrored on disk (`prompt_store.py`): each
save is written by a background thread (the reply is not held up), each eviction removes its file,
and a restarted server indexes the files (headers only) and loads a state from disk the first time
a prompt needs it. The disk holds what the cache holds, so the same budget bounds both.

Runs in the model server's child process only (imports llama_cpp).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp.llama import Llama, LlamaState
from llama_cpp.llama_cache import LlamaRAMCache

from pyruntime.model.prompt_store import IndexEntry, PromptStateStore

log = logging.getLogger(__name__)
_FLUSH_AT_EXIT_S = 10.0


class _DiskWriter:
    """Applies saves and removals to the store in order, on one background thread."""

    def __init__(self, store: PromptStateStore) -> None:
        self.store = store
        self._jobs: queue.Queue[tuple[str, tuple[int, ...], Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="prompt-cache-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close, _FLUSH_AT_EXIT_S)

    def save(self, key: tuple[int, ...], state: Any) -> None:
        """Write `state` under `key` soon."""
        self._jobs.put(("save", key, state))

    def remove(self, key: tuple[int, ...]) -> None:
        """Remove the file of `key` soon (after any save of it queued before)."""
        self._jobs.put(("remove", key, None))

    def close(self, timeout: float) -> None:
        """Finish the queued writes (a graceful stop keeps the last turns' states), at most `timeout` s."""
        self._jobs.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            kind, key, state = job
            try:
                if kind == "save":
                    self.store.write(key, state.input_ids, state.scores, state.n_tokens, state.llama_state,
                                     state.seed)
                else:
                    self.store.remove(key)
            except OSError as exc:  # a full or read-only disk: the RAM cache still works
                log.warning("prompt cache: could not update the disk copy (%s)", type(exc).__name__)


# An entry's key is its prompt and the tokens generated after it; the next request of the same
# conversation goes on differently from the generation prompt on (`<|im_start|>assistant\n` and the
# reply become the reply message and the next one). A one-token prewarm (turns/prewarm.py) is all
# such an end: this many tokens at the end of an older key may differ and the newer one still
# supersedes it, so the prewarm's state does not stay in the cache next to the turn that used it
# (SmolLM2's ChatML generation prompt is 3 tokens; the tiny test model spells it in 11).
SUPERSEDED_TAIL_TOKENS = 16


def _supersedes(new: tuple[int, ...], old: tuple[int, ...]) -> bool:
    """True when `new` holds all of `old`, or all but its last few tokens (a long `old` only), and goes on."""
    if len(old) > len(new):
        return False
    if new[: len(old)] == old:
        return True
    keep = len(old) - SUPERSEDED_TAIL_TOKENS
    return keep > SUPERSEDED_TAIL_TOKENS and new[:keep] == old[:keep]


class NpcPromptCache(LlamaRAMCache):
    """A RAM prompt cache whose size limit holds: last-row logits only; redundant prefixes dropped on save."""

    def __init__(self, capacity_bytes: int = (2 << 30), store: PromptStateStore | None = None) -> None:
        """A cache of `capacity_bytes`, mirrored in `store` when given (default: `install`'s folder, if any);
        the newest one is the one `/coreai/status` reports."""
        super().__init__(capacity_bytes)
        store = store if store is not None else _open_store()
        self._disk = _DiskWriter(store) if store is not None else None
        if store is not None:
            for entry in store.index():  # least recently written first: the LRU order goes on
                self.cache_state[entry.key] = entry  # type: ignore[assignment]  # loaded when a prompt needs it
            self._trim()
        # Kept up to date by the one thread that changes the cache (the model's), so the status probe
        # reads a plain int instead of iterating a dict another thread may be changing.
        self.used_bytes = self.cache_size
        global _active
        _active = self

    def __getitem__(self, key: Sequence[int]) -> Any:
        while True:
            value = super().__getitem__(key)  # KeyError when no entry shares a prefix
            if not isinstance(value, IndexEntry):
                return value
            stored = self._disk.store.read(value.path, value.key) if self._disk is not None else None
            if stored is None:  # corrupt or gone: forget it and try the next best entry
                del self.cache_state[value.key]
                self.used_bytes = self.cache_size
                continue
            state = LlamaState(input_ids=stored.input_ids, scores=stored.scores, n_tokens=stored.n_tokens,
                               llama_state=stored.llama_state, llama_state_size=len(stored.llama_state),
                               seed=stored.seed)
            self.cache_state[value.key] = state
            self.used_bytes = self.cache_size
            return state

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        key = tuple(key)
        scores = value.scores
        if getattr(scores, "ndim", 0) == 2 and scores.shape[0] > 1:
            # A fresh state of this save (save_state copies); load_state broadcasts the one row over
            # the positions it fills, and only the last one is ever read.
            value.scores = scores[-1:].copy()
        before = set(self.cache_state)
        for old in [k for k in self.cache_state if k != key and _supersedes(key, k)]:
            del self.cache_state[old]
        super().__setitem__(key, value)
        self.used_bytes = self.cache_size
        if self._disk is not None:
            for gone in before - set(self.cache_state):
                self._disk.remove(gone)
            if key in self.cache_state:
                self._disk.save(key, value)

    def _trim(self) -> None:
        """Drop the least recently used entries (and their files) until the budget holds."""
        while self.cache_size > self.capacity_bytes and self.cache_state:
            gone, _ = self.cache_state.popitem(last=False)
            if self._disk is not None:
                self._disk.remove(gone)

    def flush(self, timeout: float = _FLUSH_AT_EXIT_S) -> None:
        """Write what is queued for the disk now (tests; a normal exit does it by itself)."""
        if self._disk is not None:
            self._disk.close(timeout)
            self._disk = _DiskWriter(self._disk.store)

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


def load_state_or_start_cold(self: Llama, state: LlamaState) -> None:
    """`Llama.load_state`, but a state llama.cpp refuses (or that does not fit this model) costs the prompt's
    evaluation, not the request: the model starts from an empty KV cache instead."""
    try:
        _library_load_state(self, state)
    except (RuntimeError, ValueError) as exc:
        log.warning("prompt cache: a saved state did not load (%s); evaluating the prompt", type(exc).__name__)
        self.reset()  # n_tokens = 0: generate() clears the KV cache from position 0 and evaluates it all


def flush_active(timeout: float = _FLUSH_AT_EXIT_S) -> None:
    """Write the active cache's queued states (the server's shutdown hook: uvicorn ends a SIGTERM by raising
    it again once it has shut down, so `atexit` handlers never run there)."""
    if _active is not None:
        _active.flush(timeout)


_library_load_state = Llama.load_state
_disk_folder: Path | None = None
_disk_identity: bytes | None = None


def _open_store() -> PromptStateStore | None:
    if _disk_folder is None or _disk_identity is None:
        return None
    return PromptStateStore(_disk_folder, _disk_identity)


def install(disk_folder: Path | None = None, identity: bytes | None = None) -> None:
    """Make the server's RAM cache this one and its saves light (called in the model server child only);
    with `disk_folder`, the cache is mirrored there under the model's `identity` (`prompt_store.model_identity`)."""
    global _disk_folder, _disk_identity
    _disk_folder, _disk_identity = disk_folder, identity
    llama_cpp.LlamaRAMCache = NpcPromptCache  # type: ignore[misc] - server/model.py looks it up at load time
    Llama.save_state = save_state_last_logits  # type: ignore[method-assign]
    Llama.load_state = load_state_or_start_cold  # type: ignore[method-assign]
