"""The scoped decorator: (role, scope, actor) -> one key for memory, chat, transcript and summary."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope, storage_key
from pyruntime.stores.base import LoadStatus, TranscriptEntry, TranscriptKind
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore
from pyruntime.stores.null import NullAgentMemoryStore, NullConversationSummaryStore
from pyruntime.stores.scoped import ScopedAgentMemoryStore

ALICE = AgentMemoryScope("studio", "alice", "", "")
BOB = AgentMemoryScope("studio", "bob", "", "")
ROLE = "BlacksmithNPC"


@pytest.fixture
def scoped(store, summaries) -> ScopedAgentMemoryStore:
    return ScopedAgentMemoryStore(store, summaries, ALICE)


def _fill(view: ScopedAgentMemoryStore, text: str) -> None:
    view.save(ROLE, AgentMemoryState(memory=text))
    view.append_chat_message(ROLE, "user", text)
    view.append_transcript(ROLE, [TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", text, call_id="c")])
    view.save_summary(ROLE, text)


def _contents(view: ScopedAgentMemoryStore) -> tuple:
    loaded = view.try_load(ROLE)
    return (
        loaded.state.memory if loaded.state else None,
        [m.content for m in view.get_chat_history(ROLE)],
        [r.content for r in view.get_transcript(ROLE)],
        view.load_summary(ROLE),
    )


def test_properties_and_key(scoped, store, summaries):
    assert scoped.store is store and scoped.summaries is summaries
    assert scoped.scope == ALICE and scoped.actor is None
    assert scoped.key(f"  {ROLE} ") == storage_key(ROLE, ALICE)


def test_two_scopes_are_isolated(scoped):
    bob = scoped.with_scope(BOB)
    _fill(scoped, "alice data")
    _fill(bob, "bob data")
    assert _contents(scoped) == ("alice data", ["alice data"], ["alice data", "alice data"], "alice data")
    assert _contents(bob) == ("bob data", ["bob data"], ["bob data", "bob data"], "bob data")
    bob.clear_chat_history(ROLE)
    bob.clear(ROLE)
    assert _contents(bob) == (None, [], [], None)
    assert _contents(scoped)[0] == "alice data"


def test_two_actors_are_isolated_and_local_is_no_actor(scoped):
    npc1 = scoped.with_scope(ALICE, "npc_1")
    npc2 = scoped.with_scope(ALICE, "npc_2")
    _fill(npc1, "one")
    _fill(npc2, "two")
    assert _contents(npc1)[0] == "one" and _contents(npc2)[0] == "two"
    assert _contents(scoped) == (None, [], [], None)
    _fill(scoped.with_scope(ALICE, "local"), "anonymous")
    assert _contents(scoped)[0] == "anonymous"
    assert npc1.actor == "npc_1" and npc1.key(ROLE) != npc2.key(ROLE)


def test_one_identity_uses_the_same_key_for_all_four_data_sets(store, summaries):
    view = ScopedAgentMemoryStore(store, summaries, ALICE, "npc_1")
    _fill(view, "x")
    key = storage_key(ROLE, ALICE, "npc_1")
    assert store.try_load(key).state.memory == "x"
    assert [m.content for m in store.get_chat_history(key)] == ["x"]
    assert [r.content for r in store.get_transcript(key)] == ["x", "x"]
    assert summaries.load_summary(key) == "x"


def test_clear_chat_history_also_clears_the_summary_but_not_memory(scoped):
    _fill(scoped, "data")
    scoped.clear_chat_history(ROLE)
    assert _contents(scoped) == ("data", [], [], None)


def test_clear_summary_only_clears_the_summary(scoped):
    _fill(scoped, "data")
    scoped.clear_summary(ROLE)
    assert _contents(scoped) == ("data", ["data"], ["data", "data"], None)


def test_mutate_goes_to_the_scoped_key(scoped, store):
    after = scoped.mutate(ROLE, lambda s: s.evolve(memory="m"))
    assert after.memory == "m"
    assert store.try_load(storage_key(ROLE, ALICE)).state.memory == "m"
    assert store.try_load(ROLE).status is LoadStatus.NOT_FOUND


def test_empty_scope_uses_the_bare_role_key(store, summaries):
    view = ScopedAgentMemoryStore(store, summaries)
    assert view.scope == EMPTY_SCOPE
    view.append_chat_message(" Teacher ", "user", "hi")
    assert [m.content for m in store.get_chat_history("Teacher")] == ["hi"]


@pytest.mark.parametrize("role", ["", "   ", None])
def test_blank_role_is_an_error_and_writes_nothing_anywhere(role, tmp_path):
    from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore

    root = tmp_path / "CoreAI"
    memory, summaries = InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore()
    views = [ScopedAgentMemoryStore(memory, summaries, ALICE, "npc"),
             ScopedAgentMemoryStore(FileAgentMemoryStore(root), FileConversationSummaryStore(root), ALICE, "npc")]
    entry = TranscriptEntry(TranscriptKind.USER, "user", "x", is_chat_message=True)
    for view in views:
        calls: list[Callable[[], object]] = [
            partial(view.save, role, AgentMemoryState(memory="x")),
            partial(view.mutate, role, lambda s: s.evolve(memory="x")),
            partial(view.append_chat_message, role, "user", "x"),
            partial(view.append_transcript, role, [entry]),
            partial(view.save_summary, role, "x"),
            partial(view.clear, role),
            partial(view.clear_chat_history, role),
            partial(view.try_load, role),
            partial(view.get_chat_history, role),
        ]
        for call in calls:
            with pytest.raises(InvalidArgumentError, match="role_id"):
                call()
    assert memory._data == {} and summaries._summaries == {}
    assert not root.exists() or [p for p in root.rglob("*") if p.is_file()] == []


def test_blank_key_is_refused_by_the_in_memory_stores():
    with pytest.raises(InvalidArgumentError, match="key"):
        InMemoryAgentMemoryStore().append_chat_message("  ", "user", "x")
    with pytest.raises(InvalidArgumentError, match="key"):
        InMemoryConversationSummaryStore().save_summary("", "x")


def test_null_stores_keep_nothing():
    view = ScopedAgentMemoryStore(NullAgentMemoryStore(), NullConversationSummaryStore(), ALICE)
    _fill(view, "gone")
    assert _contents(view) == (None, [], [], None)
    assert view.try_load(ROLE).status is LoadStatus.NOT_FOUND
    assert view.mutate(ROLE, lambda s: s.evolve(memory="m")).memory == "m"
    assert view.mutate(ROLE, lambda s: None) == AgentMemoryState()
    assert view.try_load(ROLE).status is LoadStatus.NOT_FOUND


def test_a_write_long_after_the_key_was_first_derived_still_records_its_identity(tmp_path, monkeypatch):
    # A view notes its key's identity once, not at every call; a write notes it again, so the index still records it
    # however many other conversations were noted in between (the index keeps only the newest notes).
    from pyruntime.stores import AgentMemoryPersistenceMode, identity_index, open_stores
    from pyruntime.stores.file_store import FileAgentMemoryStore

    monkeypatch.setattr(identity_index, "MAX_NOTED", 4)
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    view = stores.scoped(ALICE)
    key = view.key(ROLE)
    for n in range(10):  # other players' turns, noted meanwhile
        stores.scoped(AgentMemoryScope("studio", f"player-{n}", "", "")).key(ROLE)
    view.append_chat_message(ROLE, "user", "hello")
    assert isinstance(stores.memory, FileAgentMemoryStore)
    recorded = stores.memory.identities.identities()
    assert recorded[key].role_id == ROLE and recorded[key].key == key
