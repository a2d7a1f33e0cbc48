"""Erasing conversations beyond their saves: what the turn engine and the model keep of them.

A deletion through the MemoryStore service (ClearChatHistory, ClearMemory, ForgetPlayer) hands its store work to a
`ConversationEraser` with the storage keys it deletes. A runtime with a turn engine erases through it
(`TurnEngineEraser`: the engine's caches and pending work, the model's slots and parked states, the restart-warm
states saved on disk); the saves commands without a runtime (`--data-dir`) erase the engine's files left under the
data folder (`EngineFilesEraser`: restart-warm and parked states, the tail places), which a crashed or stopped
runtime may have left there.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from pyruntime.model.errors import ModelUnavailableError
from pyruntime.model.llama_server import ENGINE_STATES_RELATIVE_PATH, PROMPT_CACHE_RELATIVE_PATH
from pyruntime.model.parked_states import ParkedStates
from pyruntime.model.slot_store import INDEX_NAME, MAX_INDEX_BYTES, SlotStateStore
from pyruntime.model.slots import conversation_id

if TYPE_CHECKING:
    from pyruntime.model.hosting import LlamaServerProcess
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
            await asyncio.to_thread(server.forget_saved, [conversation_id(k) for k in keys])
        return cleared[0]


class EngineFilesEraser:
    """The eraser of the saves commands without a runtime: the engine's files of the conversations under the data
    folder (restart-warm and parked states with their index, the tail places), after `clear`."""

    def __init__(self, data_dir: Path) -> None:
        """Erase under `data_dir` (the game's persistentDataPath)."""
        self._folders = [data_dir / PROMPT_CACHE_RELATIVE_PATH, data_dir / ENGINE_STATES_RELATIVE_PATH]

    async def __call__(self, keys: Sequence[str], clear: Callable[[], Awaitable[T]]) -> T:
        """`clear()`, then the engine's files of `keys`."""
        result = await clear()
        await asyncio.to_thread(self.erase, [conversation_id(k) for k in keys])
        return result

    def erase(self, conversations: list[str]) -> None:
        """Remove the engine's files of these conversations (digests) from the data folder."""
        from pyruntime.turns.tail_anchors import FILE_NAME, TailAnchors  # the turn engine's format, loaded here only

        for folder in self._folders:
            if not folder.is_dir() or folder.is_symlink():
                continue
            SlotStateStore(folder, _index_identity(folder)).erase(conversations)
            parked = ParkedStates(folder, 0)
            for conversation in conversations:
                parked.discard(conversation)
            TailAnchors.erase_saved(folder / FILE_NAME, set(conversations))


def _index_identity(folder: Path) -> str:
    """The engine identity the folder's slot index was written for ("" when there is none): kept on a rewrite, so
    the other conversations' restart-warm states stay loadable."""
    path = folder / INDEX_NAME
    try:
        if path.is_symlink() or path.stat().st_size > MAX_INDEX_BYTES:
            return ""
        identity = json.loads(path.read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return ""
    return identity if isinstance(identity, str) else ""
