"""Forgetting a player: every save of one player, found through the identity index, erased with what the stores
keep beside it (quarantined copies, the identity index entry, lock files, the database row).

A player is a tenant and a user id (contract §4): every save whose scope names them, whatever its session, topic,
role and actor; a session or topic narrows it (a save slot). Keys are one-way hashes, so only saves the identity
index attributes can be found; saves written before the index existed are counted (`PlayerSaves.unattributed`:
they may be anyone's) and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.file_layout import AGENT_MEMORY_DIR, SUMMARIES_DIR, file_stem
from pyruntime.stores.identity_index import IdentityIndex, is_hashed_stem
from pyruntime.stores.persistence import StoreBundle


@dataclass(frozen=True)
class PlayerSaves:
    """The storage keys of one player's saves, and how many saves no index attributes to anyone."""

    keys: tuple[str, ...]
    unattributed: int


def player_saves(bundle: StoreBundle, scope: AgentMemoryScope) -> PlayerSaves:
    """The saves whose scope has every non-blank field of `scope` (a player: tenant + user; a session or topic narrows
    it); an all-blank scope is refused."""
    wanted = [(index, value) for index, value in enumerate(scope.parts()) if value]
    if not wanted:
        raise InvalidArgumentError("name the player: a user_id (with its tenant_id), or the session or topic to erase; "
                                   "an all-blank scope would match every save")
    index = getattr(bundle.memory, "identities", None)
    if not isinstance(index, IdentityIndex):
        raise InvalidArgumentError("these stores keep no identity index: a player's saves cannot be found")
    known = index.identities()
    keys = tuple(sorted(k for k, who in known.items() if all(who.scope.parts()[i] == v for i, v in wanted)))
    stems = {file_stem(key) for key in known}
    unattributed = [s for s in index.stored_stems((AGENT_MEMORY_DIR, SUMMARIES_DIR)) - stems if is_hashed_stem(s)]
    return PlayerSaves(keys, len(unattributed))


def erase_saves(bundle: StoreBundle, keys: tuple[str, ...] | list[str]) -> None:
    """Erase every listed save for good: memory and versions, chat history and transcript (with quarantined copies),
    summary, then what the stores keep beside them (identity entry, lock files, database row)."""
    for key in keys:
        bundle.memory.clear(key)
        bundle.memory.clear_chat_history(key)
        bundle.summaries.clear_summary(key)
        for store in (bundle.summaries, bundle.memory):  # the memory store's last: it holds the identity
            leftovers = getattr(store, "remove_leftovers", None)
            if callable(leftovers):
                leftovers(key)
