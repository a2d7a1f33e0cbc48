"""The engine side of restart-warm NPCs: ask llama-server to save its slots at a graceful stop and to
restore them at the next start (`POST /slots/N?action=save|restore`).

What may be saved or loaded, and the files' index, is `slot_store.SlotStateStore`'s (pure file I/O);
which conversation holds which slot is `slots.SlotAffinity`'s. The process is `hosting.LlamaServerProcess`.
"""

from __future__ import annotations

import logging
import time

import httpx

from pyruntime.model.client.slots import ANONYMOUS, SlotAffinity
from pyruntime.model.hosting.slot_store import SlotStateStore

log = logging.getLogger("pyruntime.model.hosting.process")  # where these lines were always logged

SLOT_IO_TIMEOUT_S = 30.0
# A stop saves the slots within this budget (newest first), after a probe that the engine answers at all:
# SIGTERM must end serve promptly even with the engine hung (a soak saw serve still up 60 s after it).
SAVE_BUDGET_S = 10.0
SAVE_PROBE_S = 1.0


def restore_slots(engine: httpx.Client, store: SlotStateStore, slots: SlotAffinity, count: int) -> int:
    """Load the states saved at the last graceful stop into the engine's `count` slots (those that pass the
    store's checks) and give each back its conversation; how many were restored."""
    restored = 0
    for slot, entry in enumerate(store.restorable(count)):
        try:
            response = engine.post(f"/slots/{slot}", params={"action": "restore"},
                                   json={"filename": entry.file}, timeout=SLOT_IO_TIMEOUT_S)
        except httpx.HTTPError:
            response = None
        if response is None or response.status_code != 200:
            log.warning("slot state not restored (HTTP %s)", getattr(response, "status_code", "error"))
            store.forget(entry)
            continue
        slots.assign(entry.conversation, slot)
        restored += 1
    if restored:
        log.info("restored %d conversation(s) into their slots", restored)
    return restored


def save_slots(engine: httpx.Client, store: SlotStateStore, slots: SlotAffinity) -> int:
    """Have the engine save each held slot's conversation (the newest first, within `SAVE_BUDGET_S`); how
    many it saved. Nothing when the engine does not answer a health probe: a hung one would only wait."""
    holders = sorted(((slots.last_used(s), s, c) for s, c in slots.holders().items() if c != ANONYMOUS),
                     reverse=True)
    if not holders:
        return 0
    try:
        answering = engine.get("/health", timeout=SAVE_PROBE_S).status_code == 200
    except httpx.HTTPError:
        answering = False
    if not answering:  # hung or frozen: a save would only wait; the stop goes on without it
        log.warning("model server does not answer; slot states not saved")
        return 0
    deadline = time.monotonic() + SAVE_BUDGET_S  # the newest conversations first, until the budget is spent
    saved = []
    for _, slot, conversation in holders:
        left = deadline - time.monotonic()
        if left <= 0:
            log.warning("slot saves took longer than %.0f s; the rest not saved", SAVE_BUDGET_S)
            break
        name = store.prepare(conversation)
        try:
            response = engine.post(f"/slots/{slot}", params={"action": "save"}, json={"filename": name},
                                   timeout=min(SLOT_IO_TIMEOUT_S, left))
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            saved.append(conversation)
    return len(store.record(saved))
