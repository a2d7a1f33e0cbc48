"""The model engine's files under a data folder, as far as a deletion without a running runtime needs them.

With file saves, the runtime's engine writes conversations' states under the data folder: restart-warm states and
their index (`<data-dir>/CoreAI/runtime/prompt-cache/`: `<digest>.slot`, `slots.json`, and where each
conversation's tail was last sent, `tail-anchors.json`) and parked states (`.../engine-states/`: `<digest>.parked`),
every file named by the conversation's digest (the SHA-256 of its storage key, `model/slots.conversation_id`). The
saves commands erase them with a conversation's saves when no runtime runs (one that stopped or crashed left them);
a running runtime erases its own (`service/erasure.py`). Plain files and JSON only: the saves commands run without
the hosted runtime's packages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyruntime.stores.fileio import atomic_write

log = logging.getLogger(__name__)

PROMPT_CACHE_RELATIVE_PATH = Path("CoreAI") / "runtime" / "prompt-cache"  # restart-warm states
ENGINE_STATES_RELATIVE_PATH = Path("CoreAI") / "runtime" / "engine-states"  # states written while the engine runs
SLOT_INDEX_NAME = "slots.json"
TAIL_ANCHORS_NAME = "tail-anchors.json"
STATE_SUFFIXES = (".slot", ".parked")
MAX_INDEX_BYTES = 16 << 20


def conversation_digest(key: str) -> str:
    """How the engine names a conversation (the SHA-256 of its storage key, as `model/slots.conversation_id`)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def erase_engine_files(data_dir: Path, keys: Iterable[str]) -> None:
    """Remove every engine file of these conversations (storage keys) under `data_dir`, and their entries in the
    slot index and the tail places (the other conversations' stay, with the index's engine identity)."""
    digests = {conversation_digest(key) for key in keys}
    for folder in (data_dir / PROMPT_CACHE_RELATIVE_PATH, data_dir / ENGINE_STATES_RELATIVE_PATH):
        if folder.is_symlink() or not folder.is_dir():
            continue
        for digest in digests:
            for suffix in STATE_SUFFIXES:
                _unlink(folder / (digest + suffix))
        _filter(folder / SLOT_INDEX_NAME, "entries", lambda entry: isinstance(entry, dict)
                and entry.get("conversation") not in digests)
        _filter(folder / TAIL_ANCHORS_NAME, "anchors", lambda row: isinstance(row, list) and bool(row)
                and row[0] not in digests)


def _filter(path: Path, field: str, keep: Any) -> None:
    """Rewrite a JSON index without the rows `keep` refuses (left as it is when it cannot be read: a file the engine
    no longer vouches for names no state it would load)."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_INDEX_BYTES:
            return
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    rows = body.get(field) if isinstance(body, dict) else None
    if not isinstance(rows, list):
        return
    kept = [row for row in rows if keep(row)]
    if len(kept) != len(rows):
        atomic_write(path, json.dumps({**body, field: kept}).encode())


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("an engine state of an erased conversation could not be removed (%s)", type(exc).__name__)
