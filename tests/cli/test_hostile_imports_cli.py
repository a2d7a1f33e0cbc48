"""`coreai-runtime import` is all or nothing: a snapshot one of whose roles would be refused writes no role, and a
snapshot whose JSON repeats a key is refused. Each test snapshots the whole folder tree (the data folder, the
snapshot file and a folder beside them) and checks that a refused import changed nothing at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    RoleSnapshot,
    ScopeSnapshot,
    TranscriptEntry,
    TranscriptKind,
    import_scope_snapshot,
)
from pyruntime.stores.confined import SaveLimits
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore
from pyruntime.stores.identity_index import IdentityIndex
from pyruntime.stores.persistence import StoreBundle
from tests.cli.conftest import memory_on_disk
from tests.support.tree import NO_CHANGES, changes, tree

U1 = AgentMemoryScope(user_id="u1")
MiB = 1024 * 1024


def _snapshot(*roles: dict[str, Any], user: str = "u1") -> dict[str, Any]:
    return {"formatVersion": 1, "scope": {"userId": user} if user else {}, "roles": list(roles)}


@pytest.fixture
def game(tmp_path: Path, cli) -> Path:
    """A data folder with one save (Merchant's memory "original" in u1's scope), and a folder beside it."""
    data = tmp_path / "game"
    data.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "notes.txt").write_text("not the runtime's")
    assert cli("memory", "write", "--data-dir", data, "--role", "Merchant", "--user", "u1",
               "--content", "original").rc == 0
    return data


@pytest.mark.parametrize("too_large", [
    pytest.param({"state": {"memory": "x" * (65 * MiB)}}, id="a 65 MiB memory (limit 64 MiB)"),
    pytest.param({"summary": "s" * (17 * MiB)}, id="a 17 MiB summary (limit 16 MiB)"),
])
def test_a_role_over_a_file_limit_fails_the_import_before_any_role_is_written(tmp_path: Path, game: Path, cli,
                                                                               caplog, too_large) -> None:
    slot = tmp_path / "slot.json"
    slot.write_text(json.dumps(_snapshot(
        {"roleId": "Merchant", "state": {"memory": "imported"}, "summary": "imported summary",
         "history": [{"kind": "TRANSCRIPT_KIND_USER", "name": "user", "content": "hi", "isChatMessage": True}]},
        {"roleId": "Apprentice", "state": {"memory": "new role"}},
        {"roleId": "Smith", **too_large},
    )))
    before = tree(tmp_path)
    run = cli("import", slot, "--data-dir", game)
    assert run.rc == 1 and run.out == ""
    [message] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert message.startswith("LimitExceededError: roles[2]: the ")
    assert "over its limit" in message and "no role was imported" in message
    assert changes(before, tree(tmp_path)) == NO_CHANGES  # Merchant and Apprentice too: nothing written at all
    assert memory_on_disk(game, "Merchant", U1) == "original"


def test_the_same_import_within_the_limits_writes_every_role(tmp_path: Path, game: Path, cli) -> None:
    slot = tmp_path / "slot.json"
    slot.write_text(json.dumps(_snapshot({"roleId": "Merchant", "state": {"memory": "imported"}},
                                         {"roleId": "Smith", "summary": "s" * MiB})))
    assert cli("import", slot, "--data-dir", game).json() == {"Success": True, "RolesImported": 2}
    assert memory_on_disk(game, "Merchant", U1) == "imported"


@pytest.mark.parametrize("text, key", [
    ('{"formatVersion": 1, "scope": {"userId": "u1"}, "roles": [{"roleId": "Merchant", '
     '"state": {"memory": "first", "memory": "second"}}]}', "'memory'"),
    ('{"formatVersion": 1, "roles": [{"roleId": "Merchant", "roleId": "Smith", "state": {"memory": "m"}}]}',
     "'roleId'"),
    ('{"formatVersion": 1, "formatVersion": 1, "roles": []}', "'formatVersion'"),
    ('{"formatVersion": 1, "roles": [{"roleId": "Merchant", "state": {"memory": "m"}}], '
     '"scope": {"userId": "u1"}, "scope": {"userId": "u2"}}', "'scope'"),
], ids=["memory", "roleId", "formatVersion", "scope"])
def test_a_snapshot_that_repeats_a_key_is_refused(tmp_path: Path, game: Path, cli, caplog, text: str,
                                                  key: str) -> None:
    slot = tmp_path / "slot.json"
    slot.write_text(text)
    before = tree(tmp_path)
    run = cli("import", slot, "--data-dir", game)
    assert run.rc == 2 and run.out == ""
    assert any(f"an object repeats the key {key}" in r.getMessage() for r in caplog.records)
    assert changes(before, tree(tmp_path)) == NO_CHANGES
    assert memory_on_disk(game, "Merchant", U1) == "original"


def test_a_repeated_key_that_is_not_field_like_is_not_echoed(tmp_path: Path, game: Path, cli, caplog) -> None:
    slot = tmp_path / "slot.json"
    slot.write_text('{"formatVersion": 1, "roles": [], "my secret, said the player": 1, '
                    '"my secret, said the player": 2}')
    assert cli("import", slot, "--data-dir", game).rc == 2
    assert "an object repeats the key;" in caplog.text and "secret" not in caplog.text


def _small_file_stores(root: Path, limits: SaveLimits, **caps: Any) -> StoreBundle:
    index = IdentityIndex(root)
    return StoreBundle(FileAgentMemoryStore(root, identities=index, limits=limits, **caps),
                       FileConversationSummaryStore(root, identities=index, limits=limits),
                       AgentMemoryPersistenceMode.PERSISTENT)


@pytest.mark.parametrize("kind", ["memory", "history", "summary"])
def test_every_file_limit_is_checked_for_every_role_first(tmp_path: Path, kind: str) -> None:
    # The stores' own limits, small: the third role's file would pass its kind's limit.
    bundle = _small_file_stores(tmp_path / "CoreAI", SaveLimits(memory_document=4096, history=4096, summary=4096))
    big = "x" * 5000
    third = {"memory": RoleSnapshot("Smith", None, AgentMemoryState(memory=big)),
             "history": RoleSnapshot("Smith", None, None,
                                     [TranscriptEntry(TranscriptKind.USER, "user", big, is_chat_message=True)]),
             "summary": RoleSnapshot("Smith", None, None, summary=big)}[kind]
    roles = [RoleSnapshot("Merchant", None, AgentMemoryState(memory="m")),
             RoleSnapshot("Apprentice", None, None, [TranscriptEntry(TranscriptKind.USER, "user", "hi",
                                                                     is_chat_message=True)], "sum"), third]
    before = tree(tmp_path)
    with pytest.raises(Exception, match=r"roles\[2\]: the .* over its limit of 4096 bytes") as refused:
        import_scope_snapshot(bundle, ScopeSnapshot(U1, roles, 0))
    assert type(refused.value).__name__ == "LimitExceededError"
    assert changes(before, tree(tmp_path)) == NO_CHANGES
    assert import_scope_snapshot(bundle, ScopeSnapshot(U1, roles[:2], 0)) == 2  # the others fit


def test_a_history_over_the_limit_only_before_the_caps_is_imported(tmp_path: Path) -> None:
    # What the store keeps of a long history (the rows inside the windows) is what must fit, as on a live write.
    bundle = _small_file_stores(tmp_path / "CoreAI", SaveLimits(history=4096), chat_cap=3, transcript_cap=3)
    rows = [TranscriptEntry(TranscriptKind.USER, "user", f"line {i} " + "y" * 300, is_chat_message=True)
            for i in range(40)]
    assert import_scope_snapshot(bundle, ScopeSnapshot(U1, [RoleSnapshot("Merchant", None, None, rows)], 0)) == 1
    kept = bundle.scoped(U1).get_transcript("Merchant")
    assert [r.content[:8] for r in kept] == ["line 37 ", "line 38 ", "line 39 "]
