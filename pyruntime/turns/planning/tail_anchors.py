"""Where each conversation's tail was last sent, kept across restarts (with the engine's states on disk).

A restarted runtime whose model finds an NPC's prompt state on disk must send the same prompt as
before the restart, or the state is useless after the point where the two differ: the sticky tail
(`prompt.place_tail`) must stay where it was, and so must each memory note (`prompt.place_notes`). The
anchors are saved as digests and numbers only (of the conversation's storage key and of the tail's
text, store orders, memory version numbers; never ids or game text) in one JSON file. A note's text
is rebuilt from the memory versions, so its version number is all that is kept (so is the version of
the block a compaction folded the notes into).

`TailAnchors` keeps them in memory while the runtime serves: one entry per conversation, bounded, the least
recently used conversation dropped first.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path

from pyruntime.stores.fileio import atomic_write, read_bytes
from pyruntime.turns.planning.prompt import NoteAnchor, PromptAnchors, TailAnchor, is_text_digest, text_digest

log = logging.getLogger(__name__)
# Rows [key, tail digest, tail order, [[note order, note version], ...], head's folded version]; format 1
# had the first three only.
FORMAT = 2
FILE_NAME = "tail-anchors.json"  # in the prompt cache's folder
MAX_TAIL_ANCHORS = 4096  # conversations whose tail placement is remembered (a few hundred bytes each)


def conversation_digest(storage_key: str) -> str:
    """The key an anchor is kept under: no role or user id in memory dumps or on disk."""
    return hashlib.sha256(storage_key.encode("utf-8")).hexdigest()


def save_anchors(path: Path, anchors: OrderedDict[str, PromptAnchors]) -> None:
    """Write the anchors (least recently used first) atomically; the texts as digests."""
    rows = [[key, a.tail.text if is_text_digest(a.tail.text) else text_digest(a.tail.text), a.tail.after_order,
             [[n.after_order, n.version] for n in a.notes], a.head_version]
            for key, a in anchors.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"format": FORMAT, "anchors": rows}).encode())


def _order(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("bad anchor row")
    return value


def _note_anchors(rows: object) -> tuple[NoteAnchor, ...]:
    if not isinstance(rows, list):
        raise ValueError("bad anchor row")
    notes = []
    for row in rows:
        if not isinstance(row, list) or len(row) != 2:
            raise ValueError("bad anchor row")
        notes.append(NoteAnchor(_order(row[0]), _order(row[1])))
    return tuple(notes)


def load_anchors(path: Path, limit: int) -> OrderedDict[str, PromptAnchors]:
    """The anchors saved in `path` (the newest `limit`); none when it is missing or not sound (never raises)."""
    anchors: OrderedDict[str, PromptAnchors] = OrderedDict()
    try:
        data = read_bytes(path)
        if data is None:
            return anchors
        body = json.loads(data)
        if (not isinstance(body, dict) or body.get("format") not in (1, FORMAT)
                or not isinstance(body.get("anchors"), list)):
            raise ValueError("not an anchors file")
        for row in body["anchors"][-limit:]:
            if not isinstance(row, list) or len(row) != (3 if body["format"] == 1 else 5):
                raise ValueError("bad anchor row")
            key, text = row[0], row[1]
            if not (isinstance(key, str) and isinstance(text, str) and is_text_digest(text)):
                raise ValueError("bad anchor row")
            notes, head_version = (_note_anchors(row[3]), _order(row[4])) if len(row) == 5 else ((), 0)
            anchors[key] = PromptAnchors(TailAnchor(text, _order(row[2])), notes, head_version)
    except Exception as exc:  # noqa: BLE001 - a bad file costs warm first turns, never the runtime
        log.warning("tail anchors not loaded (%s): the first turn of each NPC places its tail afresh",
                    type(exc).__name__)
        anchors.clear()
    return anchors


class TailAnchors:
    """Where each conversation's tail and memory notes were last sent: they stay there."""

    def __init__(self, limit: int = MAX_TAIL_ANCHORS) -> None:
        self.limit = limit
        self._anchors: OrderedDict[str, PromptAnchors] = OrderedDict()

    def get(self, conversation: str) -> PromptAnchors | None:
        """The anchors a conversation's last request kept (`conversation_digest` of its key), if any."""
        return self._anchors.get(conversation)

    def keep(self, conversation: str, anchors: PromptAnchors) -> None:
        """Remember where this request's tail and notes went (bounded: the least recently used go first)."""
        self._anchors[conversation] = anchors
        self._anchors.move_to_end(conversation)
        while len(self._anchors) > self.limit:
            self._anchors.popitem(last=False)

    def forget(self, conversation: str) -> None:
        """Drop the conversation's places (its saves are being erased)."""
        self._anchors.pop(conversation, None)

    def load(self, path: Path) -> None:
        """Take the places saved by `save` (a runtime restarted with the disk prompt cache)."""
        self._anchors = load_anchors(path, self.limit)

    def save(self, path: Path) -> None:
        """Save where each conversation's tail and notes were last sent (digests only), for `load`."""
        save_anchors(path, self._anchors)
