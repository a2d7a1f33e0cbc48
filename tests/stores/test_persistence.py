"""Persistence modes: Persistent writes the file layout, SessionOnly touches no disk (contract §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.base import AgentMemoryStore, ConversationSummaryStore, TranscriptEntry, TranscriptKind
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from tests.support.loads import loaded

SCOPE = AgentMemoryScope("studio", "alice", "", "")


def _use_all_four_data_sets(bundle: StoreBundle) -> ScopedAgentMemoryStore:
    view = bundle.scoped(SCOPE, "npc_1")
    view.save("Merchant", AgentMemoryState(memory="sells potions"))
    view.mutate("Merchant", lambda s: s.evolve(memory=s.memory + "\nprefers gold"))
    view.append_chat_message("Merchant", "user", "hi")
    view.append_transcript("Merchant", [TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", "{}", call_id="c1")])
    view.save_summary("Merchant", "summary")
    return view


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*"))


def test_session_only_creates_no_files_or_folders(tmp_path):
    data_dir = tmp_path / "persistentDataPath"
    data_dir.mkdir()
    bundle = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, data_dir)
    view = _use_all_four_data_sets(bundle)
    assert loaded(view.try_load("Merchant")).memory == "sells potions\nprefers gold"
    assert view.load_summary("Merchant") == "summary"
    assert _files(data_dir) == []


def test_session_only_needs_no_data_dir_and_uses_the_caps():
    bundle = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None, chat_cap=2)
    assert bundle.mode is AgentMemoryPersistenceMode.SESSION_ONLY
    assert isinstance(bundle.memory, AgentMemoryStore) and isinstance(bundle.summaries, ConversationSummaryStore)
    view = bundle.scoped()
    for i in range(5):
        view.append_chat_message("Teacher", "user", f"m{i}")
    assert [m.content for m in view.get_chat_history("Teacher")] == ["m3", "m4"]


def test_session_only_data_does_not_outlive_the_bundle(tmp_path):
    _use_all_four_data_sets(open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, tmp_path))
    fresh = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, tmp_path).scoped(SCOPE, "npc_1")
    assert fresh.try_load("Merchant").state is None
    assert fresh.get_chat_history("Merchant") == [] and fresh.load_summary("Merchant") is None


def test_persistent_writes_under_core_ai_and_survives_reopening(tmp_path):
    data_dir = tmp_path / "persistentDataPath"
    _use_all_four_data_sets(open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir))
    files = [p for p in _files(data_dir) if p.is_file()]
    assert files and all(p.is_relative_to(data_dir / "CoreAI") for p in files)
    assert not any("alice" in p.name or "Merchant" in p.name or "npc_1" in p.name for p in files)
    reopened = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
    assert reopened.mode is AgentMemoryPersistenceMode.PERSISTENT
    view = reopened.scoped(SCOPE, "npc_1")
    assert loaded(view.try_load("Merchant")).memory == "sells potions\nprefers gold"
    assert [m.content for m in view.get_chat_history("Merchant")] == ["hi"]
    assert [r.call_id for r in view.get_transcript("Merchant")] == [None, "c1"]
    assert view.load_summary("Merchant") == "summary"


def test_persistent_requires_a_data_dir():
    with pytest.raises(InvalidArgumentError, match="data_dir"):
        open_stores(AgentMemoryPersistenceMode.PERSISTENT, None)


def test_mode_must_be_a_persistence_mode(tmp_path):
    with pytest.raises(InvalidArgumentError, match="mode"):
        open_stores("persistent", tmp_path)  # type: ignore[arg-type]
    assert _files(tmp_path) == []
