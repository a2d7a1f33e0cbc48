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

from collections.abc import Sequence
from typing import Any

from llama_cpp.llama_cache import LlamaRAMCache


def _is_prefix(short: tuple[int, ...], long: tuple[int, ...]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


class NpcPromptCache(LlamaRAMCache):
    """A RAM prompt cache whose size limit holds: last-row logits only; redundant prefixes dropped on save."""

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

    @property
    def entries(self) -> int:
        """How many states are held."""
        return len(self.cache_state)
