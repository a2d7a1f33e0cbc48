"""Helpers of the saves CLI tests: the real CLI runs in-process (the `cli` fixture) against real files in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, TranscriptEntry, TranscriptKind, open_stores
from pyruntime.stores.file_layout import file_stem

RESULT_KEYS = ["Success", "Message", "Error", "Version", "MemoryLength", "Memory"]


def memory_file(data_dir: Path, role: str, scope: AgentMemoryScope = EMPTY_SCOPE, actor: str | None = None) -> Path:
    """Where the file store keeps the memory document of (scope, actor, role)."""
    return data_dir / "CoreAI" / "AgentMemory" / f"{file_stem(storage_key(role, scope, actor))}.json"


def memory_on_disk(data_dir: Path, role: str, scope: AgentMemoryScope = EMPTY_SCOPE, actor: str | None = None) -> str:
    """The `memory` field of the document file, read straight from disk."""
    return json.loads(memory_file(data_dir, role, scope, actor).read_text(encoding="utf-8"))["memory"]


def file_bundle(data_dir: Path) -> StoreBundle:
    """A fresh set of file stores on data_dir (what another process would open)."""
    return open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)


def seed_history(data_dir: Path, scope: AgentMemoryScope, role: str = "SmartChat") -> None:
    """Chat, a tool call + result and a summary, written straight to the files (safe beside a runtime)."""
    view = file_bundle(data_dir).scoped(scope)
    view.append_chat_message(role, "user", "My name is Alex")
    view.append_transcript(role, [
        TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", '{"action":"append","content":"Name: Alex"}', "c1", 100),
        TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", '{"Success":true}', "c1", 101),
    ])
    view.append_chat_message(role, "assistant", "Nice to meet you,\nAlex!")
    view.save_summary(role, "- user: hello")
