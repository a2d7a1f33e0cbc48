"""Where each conversation's tail was last sent, kept across restarts (issue 13, with the disk prompt cache).

A restarted runtime whose model finds an NPC's prompt state on disk must send the same prompt as
before the restart, or the state is useless after the point where the two differ: the sticky tail
(`prompt.place_tail`) must stay where it was. The anchors are saved as digests only (of the
conversation's storage key and of the tail's text; never ids or game text) in one JSON file.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path

from pyruntime.stores.fileio import atomic_write, read_bytes
from pyruntime.turns.prompt import TailAnchor, is_text_digest, text_digest

log = logging.getLogger(__name__)
FORMAT = 1


def conversation_digest(storage_key: str) -> str:
    """The key an anchor is kept under: no role or user id in memory dumps or on disk."""
    return hashlib.sha256(storage_key.encode("utf-8")).hexdigest()


def save_anchors(path: Path, anchors: OrderedDict[str, TailAnchor]) -> None:
    """Write the anchors (least recently used first) atomically; the texts as digests."""
    rows = [[key, a.text if is_text_digest(a.text) else text_digest(a.text), a.after_order]
            for key, a in anchors.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"format": FORMAT, "anchors": rows}).encode())


def load_anchors(path: Path, limit: int) -> OrderedDict[str, TailAnchor]:
    """The anchors saved in `path` (the newest `limit`); none when it is missing or not sound (never raises)."""
    anchors: OrderedDict[str, TailAnchor] = OrderedDict()
    try:
        data = read_bytes(path)
        if data is None:
            return anchors
        body = json.loads(data)
        if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("anchors"), list):
            raise ValueError("not an anchors file")
        for row in body["anchors"][-limit:]:
            key, text, order = row
            if not (isinstance(key, str) and isinstance(text, str) and is_text_digest(text)
                    and isinstance(order, int) and order >= 0):
                raise ValueError("bad anchor row")
            anchors[key] = TailAnchor(text, order)
    except Exception as exc:  # noqa: BLE001 - a bad file costs warm first turns, never the runtime
        log.warning("tail anchors not loaded (%s): the first turn of each NPC places its tail afresh",
                    type(exc).__name__)
        anchors.clear()
    return anchors
