"""Erasing conversations beyond their saves: what the turn engine and the model keep of them.

A deletion through the MemoryStore service (ClearChatHistory, ClearMemory, ForgetPlayer) hands its store work to a
`ConversationEraser` with the storage keys it deletes. A runtime with a turn engine erases through it
(`TurnEngineEraser`: the engine's caches and pending work, the model's slots and parked states, the restart-warm
states saved on disk); the saves commands without a runtime (`--data-dir`) erase the engine's files left under the
data folder (`EngineFilesEraser`, `stores/engine_files.py`), which a stopped or crashed runtime may have left there.
Nothing of the model package is imported here until a runtime erases: the saves commands run without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from pyruntime.stores.engine_files import conversation_digest, erase_engine_files

if TYPE_CHECKING:
    from pyruntime.model.hosting.process import LlamaServerProcess
    from pyruntime.turns.orchestrator import AiOrchestrator

log = logging.getLogger(__name__)
T = TypeVar("T")


class ConversationEraser(Protocol):
    """Runs a deletion's store work (`clear`) for conversations (`keys`) and erases what else is kept of them."""

    def __call__(self, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """`clear()`'s result, once the conversations are gone everywhere this eraser reaches."""
        ...


class TurnEngineEraser:
    """The eraser of a runtime with a turn engine and, when hosted, its model server."""

    def __init__(self, orchestrator: AiOrchestrator, server: LlamaServerProcess | None) -> None:
        """Erase through `orchestrator` (its caches and its model client) and `server`'s saved states."""
        self._orchestrator = orchestrator
        self._server = server

    async def __call__(self, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> T:
        """Hold and erase the conversations in the turn engine around `clear`, then the engine's saved states."""
        from pyruntime.model.client.errors import ModelUnavailableError  # a runtime with a model has the model package

        server = self._server
        cleared: list[T] = []

        async def clear_and_keep() -> T:
            cleared.append(await clear())
            return cleared[0]

        try:
            await self._orchestrator.forget_conversations(keys, clear_and_keep)
        except ModelUnavailableError as exc:
            if not cleared or (server is not None and server.is_alive()):
                raise ModelUnavailableError(f"{'the saves were erased, but ' if cleared else ''}the model server "
                                            f"did not erase its states of them ({exc}); try again") from None
            # Not running: its slots died with it; its parked states are removed (and cleared at its next start).
            log.info("the model server is not running: none of its slots holds the erased conversations")
        if server is not None:
            await asyncio.to_thread(server.forget_saved, [conversation_digest(k) for k in keys])
        return cleared[0]


class EngineFilesEraser:
    """The eraser of the saves commands without a runtime: the engine's files of the conversations under the data
    folder (restart-warm and parked states with their index entries, the tail places), after `clear`."""

    def __init__(self, data_dir: Path) -> None:
        """Erase under `data_dir` (the game's persistentDataPath)."""
        self._data_dir = data_dir

    async def __call__(self, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> T:
        """`clear()`, then the engine's files of `keys`."""
        result = await clear()
        await asyncio.to_thread(erase_engine_files, self._data_dir, list(keys))
        return result
