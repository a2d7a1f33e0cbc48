"""Parked states: the KV state of a conversation that lost its slot, kept in a file named after that conversation
alone, loaded back only into that conversation's next request.

llama-server has a host prompt cache of its own (`--cache-ram`) for such states, but it is addressed by content: a
request whose prompt starts like a cached state gets that state, whichever conversation made it, and no call removes
one conversation's entry. Upstream, that cache has restored an unrelated conversation into a fresh slot while
reporting no cached tokens (llama.cpp issue 27148), and system prompts have leaked between clients (llama.cpp issue
27422). The runtime therefore runs llama-server with that cache off and parks states itself: llama-server writes and
reads the files (`POST /slots/N?action=save|restore`, under its `--slot-save-path`), this module names them, counts
them against the budget (`--prompt-cache-mb`), evicts the oldest first, and deletes them, one conversation at a
time. Which conversation is parked is `slots.SlotAffinity`'s (pure); the HTTP calls are `slot_moves.py`'s.

The files hold token ids and KV tensors of player text: they live only in the engine's save folder (private, or
the disk prompt cache's), are removed when restored, evicted, erased, and at every start and stop of the engine.
"""

from __future__ import annotations

import logging
import os
import re
from collections import OrderedDict
from pathlib import Path

from pyruntime.model.client.slots import ANONYMOUS

log = logging.getLogger(__name__)

SUFFIX = ".parked"
_NAME = re.compile(r"^(?:[0-9a-f]{64}|" + ANONYMOUS + r")\.parked$")


class ParkedStates:
    """The parked state files in one engine's save folder, within a byte budget (0: nothing is parked)."""

    def __init__(self, folder: Path, limit_bytes: int) -> None:
        """Park in `folder` (llama-server's `--slot-save-path`), at most `limit_bytes` in all."""
        self.folder = Path(folder)
        self.limit_bytes = max(0, limit_bytes)
        self._sizes: OrderedDict[str, int] = OrderedDict()  # conversation -> bytes, the oldest first

    @property
    def enabled(self) -> bool:
        """Whether states are parked at all (a budget above 0)."""
        return self.limit_bytes > 0

    @staticmethod
    def file_name(conversation: str) -> str:
        """The file of a conversation's parked state (conversations are named by a 64-hex digest)."""
        if conversation != ANONYMOUS and not re.fullmatch(r"[0-9a-f]{64}", conversation):
            raise ValueError("a conversation is named by its 64-hex digest")
        return conversation + SUFFIX

    def prepare(self, conversation: str) -> str:
        """Before llama-server writes a conversation's state: nothing is at its name (a link would be written
        through); returns the name to give it."""
        name = self.file_name(conversation)
        self._unlink(name)
        return name

    def record(self, conversation: str, size: int) -> list[str]:
        """llama-server wrote `size` bytes for `conversation`; returns the conversations evicted for room (the
        oldest first; their files are already removed)."""
        self._sizes.pop(conversation, None)
        self._sizes[conversation] = max(0, size)
        evicted = []
        while self.used_bytes > self.limit_bytes and self._sizes:
            oldest = next(iter(self._sizes))
            self.discard(oldest)
            evicted.append(oldest)
        return evicted

    def claim(self, conversation: str) -> str | None:
        """The file to restore `conversation` from, taken out of the budget (no eviction removes it meanwhile);
        None when it has none. `discard` it once restored."""
        if self._sizes.pop(conversation, None) is None:
            return None
        return self.file_name(conversation)

    def discard(self, conversation: str) -> None:
        """Remove `conversation`'s parked state, if it has one."""
        self._sizes.pop(conversation, None)
        self._unlink(self.file_name(conversation))

    def clear(self) -> None:
        """Remove every parked state (the engine starts or stops: its states mean nothing to another run)."""
        self._sizes.clear()
        try:
            names = [p.name for p in self.folder.iterdir()]
        except OSError:
            return
        for name in names:
            if _NAME.match(name):
                self._unlink(name)

    @property
    def used_bytes(self) -> int:
        """Bytes the parked states take."""
        return sum(self._sizes.values())

    @property
    def entries(self) -> int:
        """How many conversations have a parked state."""
        return len(self._sizes)

    def _unlink(self, name: str) -> None:
        try:
            os.unlink(self.folder / name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("a parked state could not be removed (%s)", type(exc).__name__)
