"""The engine side of slot affinity: what a slot needs before a request, and erasing conversations' states.

`slots.SlotAffinity` (pure) decides; this does it over llama-server's slot actions. Before a request: the state
of the slot's previous conversation is parked under its own name (`parked_states.py`), the request's own parked
state is restored, and a request that has none tells llama-server not to reuse the slot's cells
(`cache_prompt: false`): a state reaches only the conversation that made it. For a deletion, a conversation's
slots are erased and scrubbed and its parked state removed.

Each conversation's park and restore run under its own lock, so a conversation that comes back while its state
is still being written waits for the file, and a slot changes hands only while idle (`SlotAffinity.acquire`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.client.parked_states import ParkedStates
from pyruntime.model.client.slots import ANONYMOUS, SlotAffinity, SlotUse

log = logging.getLogger(__name__)

# An empty completion on a slot: llama-server keeps a slot's last request (its prompt and reply, shown by a debug
# /slots) until another request runs there, even after an erase; this one replaces it with nothing.
SCRUB_REQUEST = {"prompt": "", "n_predict": 0, "cache_prompt": False}
FREE_SLOT_POLL_S = 0.02


@dataclass(frozen=True)
class EngineAnswer:
    """The engine's answer to a POST: its HTTP status and body."""

    status_code: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.body)


Post = Callable[[str, Mapping[str, str] | None, Mapping[str, Any]], Awaitable[EngineAnswer | None]]


class SlotMoves:
    """Parks, restores, erases and scrubs the hosted engine's slots for one client."""

    def __init__(self, slots: SlotAffinity, parked: ParkedStates | None, post: Post) -> None:
        """`post(path, params, body)`: a POST to the engine's root (None when it did not answer)."""
        self.slots = slots
        self.parked = parked
        self._post = post
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()  # while in use

    async def acquire(self, conversation: str | None, messages: Sequence[Mapping[str, Any]]) -> SlotUse:
        """The request's slot (`SlotAffinity.acquire`), waiting for one to be released when every slot is busy (rare:
        the request queue grants no more calls than there are slots; polled, as the client may serve several event
        loops one after the other)."""
        while True:
            use = self.slots.acquire(conversation, messages)
            if use is not None:
                return use
            await asyncio.sleep(FREE_SLOT_POLL_S)

    def release(self, use: SlotUse) -> None:
        """The request on `use.slot` ended."""
        self.slots.release(use)

    async def prepare(self, use: SlotUse) -> bool:
        """Make the slot ready for the request; True when the request must reuse nothing the slot holds."""
        if use.park is not None:
            await self._park(use.slot, use.park)
        if not use.arrived:
            if use.erase_first:
                await self.erase(use.slot)
            return False
        async with self._lock(use.conversation):  # after its own park, if that is still being written
            name = self.parked.claim(use.conversation) if self.parked is not None else None
            restored = use.restore and name is not None and await self._action(use.slot, "restore", name)
            if self.parked is not None:
                self.parked.discard(use.conversation)  # restored (it lives in the slot now), superseded, or refused
        return not restored

    async def erase(self, slot: int) -> bool:
        """Drop a slot's state (`POST /slots/N?action=erase`); False when the engine refused."""
        return await self._action(slot, "erase")

    async def scrub(self, slot: int) -> None:
        """Erase a slot and replace its last request with an empty one; ModelUnavailableError when it cannot."""
        if not await self.erase(slot):
            raise ModelUnavailableError(f"the model server did not erase slot {slot}")
        response = await self._post("/completion", None, {**SCRUB_REQUEST, "id_slot": slot})
        if response is None or response.status_code != 200:
            raise ModelUnavailableError(f"the model server did not clear slot {slot}'s last request")

    async def forget(self, conversations: Iterable[str]) -> None:
        """Erase every state of `conversations` in the engine: the slots they used (erased and scrubbed) and their
        parked states; the anonymous slot's too (the memory writer's and the summarizer's last request may be
        theirs). Raises ModelUnavailableError when the engine did not do it."""
        refused: ModelUnavailableError | None = None
        for conversation in [*conversations, ANONYMOUS]:
            async with self._lock(conversation):
                slots = self.slots.forget_conversation(conversation)
                if self.parked is not None:
                    self.parked.discard(conversation)
                for slot in slots:
                    try:
                        await self.scrub(slot)
                    except ModelUnavailableError as exc:  # the other slots still get theirs
                        refused = exc
        if refused is not None:
            raise refused

    async def _park(self, slot: int, conversation: str) -> None:
        async with self._lock(conversation):
            if self.parked is None or not self.parked.enabled:
                self.slots.unpark(conversation)
                return
            name = self.parked.prepare(conversation)
            response = await self._post(f"/slots/{slot}", {"action": "save"}, {"filename": name})
            if response is None or response.status_code != 200:
                log.debug("slot %d not parked (HTTP %s)", slot, getattr(response, "status_code", "error"))
                self.slots.unpark(conversation)
                self.parked.discard(conversation)
                return
            written = _int(response, "n_written")
            for evicted in self.parked.record(conversation, written):
                self.slots.unpark(evicted)

    async def _action(self, slot: int, action: str, filename: str | None = None) -> bool:
        return await slot_action(self._post, slot, action, filename)

    def _lock(self, conversation: str) -> asyncio.Lock:
        lock = self._locks.get(conversation)
        if lock is None:
            lock = self._locks[conversation] = asyncio.Lock()
        return lock


async def slot_action(post: Post, slot: int, action: str, filename: str | None = None) -> bool:
    """One of llama-server's slot actions (erase, save, restore); False when it refused or did not answer."""
    response = await post(f"/slots/{slot}", {"action": action}, {"filename": filename} if filename else {})
    if response is None or response.status_code != 200:
        log.debug("slot %d: %s refused (HTTP %s)", slot, action, getattr(response, "status_code", "error"))
        return False
    return True


def _int(response: EngineAnswer, name: str) -> int:
    try:
        value = response.json().get(name)
    except (ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) else 0
