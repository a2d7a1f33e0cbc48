"""The rolling summary of session-only chat stays in process memory, on real files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pyruntime.history.budget import compute_history_budget
from pyruntime.history.pipeline import prepare_scoped_turn_history
from pyruntime.history.tokens import HeuristicTokenCounter
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, open_stores
from pyruntime.stores.snapshot import export_scope_snapshot

ALEX = AgentMemoryScope(user_id="alex")
PERSISTENT = AgentMemoryPersistenceMode.PERSISTENT


def all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def folded_turn(view, config: RoleMemoryConfig):
    """A turn's history preparation that has to fold (a small context), committed as after a successful turn."""
    for i in range(40):
        view.append_chat_message("AINpc", "user" if i % 2 == 0 else "assistant", f"secret line {i}",
                                 persist=config.persist_chat_history)
    budget = compute_history_budget(model_context_tokens=8192, overflow_attempt=2)
    prepared = asyncio.run(prepare_scoped_turn_history(view, "AINpc", config=config,
                                                        counter=HeuristicTokenCounter(), budget=budget))
    assert prepared.pending_summary and "secret" in prepared.pending_summary
    assert prepared.commit() is True
    return prepared.pending_summary


def test_the_summary_of_session_only_chat_never_reaches_a_file(tmp_path):
    bundle = open_stores(PERSISTENT, tmp_path)
    view = bundle.scoped(ALEX)
    summary = folded_turn(view, RoleMemoryConfig("AINpc", persist_chat_history=False))

    assert view.load_summary("AINpc") == summary  # the next turn of this process still has it
    assert b"secret" not in all_bytes(tmp_path)  # neither the chat nor its summary is on disk
    summaries = tmp_path / "CoreAI" / "ConversationSummaries"
    assert not summaries.exists() or not any(summaries.iterdir())
    assert view.load_summary("AINpc", persisted_only=True) is None
    assert "secret" not in export_scope_snapshot(bundle, ALEX, ["AINpc"], None).to_json()
    assert open_stores(PERSISTENT, tmp_path).scoped(ALEX).load_summary("AINpc") is None  # another process
    view.clear_chat_history("AINpc")
    assert view.load_summary("AINpc") is None


def test_the_summary_of_persisted_chat_is_written(tmp_path):
    bundle = open_stores(PERSISTENT, tmp_path)
    summary = folded_turn(bundle.scoped(ALEX), RoleMemoryConfig("AINpc", persist_chat_history=True))
    reopened = open_stores(PERSISTENT, tmp_path)
    assert reopened.scoped(ALEX).load_summary("AINpc") == summary
    assert export_scope_snapshot(reopened, ALEX, ["AINpc"], None).roles[0].summary == summary


@pytest.mark.parametrize("mode", list(AgentMemoryPersistenceMode))
def test_a_persisted_summary_replaces_a_session_one_and_only_it_is_exported(tmp_path, mode):
    bundle = open_stores(mode, tmp_path)
    view = bundle.scoped(ALEX)
    view.append_chat_message("AINpc", "user", "kept")
    view.save_summary("AINpc", "session summary", persist=False)
    assert export_scope_snapshot(bundle, ALEX, ["AINpc"], None).roles[0].summary is None
    view.save_summary("AINpc", "saved summary")
    assert view.load_summary("AINpc") == "saved summary"
    assert export_scope_snapshot(bundle, ALEX, ["AINpc"], None).roles[0].summary == "saved summary"
