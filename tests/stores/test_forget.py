"""Forgetting a player on every backend: all of the user's saves (every session, topic, role, actor) go, with the
identity that found them; another player's stay."""

from __future__ import annotations

from functools import partial

from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, StoreBundle
from pyruntime.stores.base import AgentMemoryStore, ConversationSummaryStore
from pyruntime.stores.forget import erase_saves, player_saves

ALICE = [AgentMemoryScope("t", "alice", "s1"), AgentMemoryScope("t", "alice", "s2", "quest")]
BOB = AgentMemoryScope("t", "bob", "s1")
IDENTITIES = [("Smith", None), ("Guard", "guard-7")]


def _met(who: str | None, state: AgentMemoryState) -> AgentMemoryState:
    return state.evolve(memory=f"met {who}")


def test_forget_erases_every_save_of_one_player_and_none_of_another(store: AgentMemoryStore,
                                                                    summaries: ConversationSummaryStore) -> None:
    bundle = StoreBundle(store, summaries, AgentMemoryPersistenceMode.PERSISTENT)
    for scope in [*ALICE, BOB]:
        for role, actor in IDENTITIES:
            view = bundle.scoped(scope, actor)
            view.mutate(role, partial(_met, scope.user_id))
            view.append_chat_message(role, "user", f"I am {scope.user_id}")
            view.save_summary(role, f"- {scope.user_id} came by")
    saves = player_saves(bundle, AgentMemoryScope(" t ", "alice"))
    assert len(saves.keys) == len(ALICE) * len(IDENTITIES) and saves.unattributed == 0
    erase_saves(bundle, saves.keys)
    for scope in ALICE:
        for role, actor in IDENTITIES:
            view = bundle.scoped(scope, actor)
            assert view.try_load(role).status is LoadStatus.NOT_FOUND
            assert view.get_transcript(role) == [] and view.load_summary(role) is None
    assert player_saves(bundle, AgentMemoryScope("t", "alice")).keys == ()  # not even the identities are left
    for role, actor in IDENTITIES:
        view = bundle.scoped(BOB, actor)
        loaded = view.try_load(role)
        assert loaded.state is not None and loaded.state.memory == "met bob"
        assert [m.content for m in view.get_chat_history(role)] == ["I am bob"]
    assert len(player_saves(bundle, AgentMemoryScope("t", "bob")).keys) == len(IDENTITIES)
