"""`coreai-runtime migrate`: files -> PostgreSQL -> files round-trips every save; refusals write nothing."""

from __future__ import annotations

from pathlib import Path

from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.migration import export_all, saves_held

STATE = AgentMemoryState(memory="likes swords", max_memory_versions=5,
                         versions=(MemoryVersion(1, 1_700_000_000, "write", "likes swords", "chars 0->12 (+12)"),))
SCOPES = [AgentMemoryScope("studio", f"player{i}", "slot1", None) for i in range(3)] + [EMPTY_SCOPE]


def _fill(bundle: StoreBundle) -> None:
    for n, scope in enumerate(SCOPES):
        for actor in (None, "npc_7"):
            view = bundle.scoped(scope, actor)
            view.save("BlacksmithNPC", STATE.evolve(memory=f"memory {n} {actor}"))
            view.append_transcript("BlacksmithNPC", [
                TranscriptEntry(TranscriptKind.USER, "user", f"hi {n}", timestamp=1_700_000_010, is_chat_message=True),
                TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", "{}", call_id="c1", timestamp=1_700_000_011),
                TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "hello", timestamp=1_700_000_012,
                                is_chat_message=True),
            ])
            view.save_summary("BlacksmithNPC", f"summary {n}")
        bundle.scoped(scope).append_chat_message("Merchant", "user", "chat only")
        bundle.scoped(scope).append_chat_message("Merchant", "user", "session only", persist=False)


def _comparable(bundle: StoreBundle) -> list[dict]:
    """Every scope's export, without what an import renumbers (order) or restamps (exportedAt)."""
    out = []
    for snapshot in export_all(bundle):
        data = snapshot.to_dict()
        data.pop("exportedAt", None)
        for role in data.get("roles", []):
            for row in role.get("history", []):
                row.pop("order", None)
        out.append(data)
    return sorted(out, key=repr)


def test_files_to_postgres_and_back_round_trips_every_save(cli, tmp_path: Path, postgres_url, caplog):
    game = tmp_path / "game"
    source = open_stores(AgentMemoryPersistenceMode.PERSISTENT, game)
    _fill(source)
    expected = _comparable(source)
    assert len(expected) == len(SCOPES) and sum(len(s["roles"]) for s in expected) == 3 * len(SCOPES)

    run = cli("migrate", "--from", game, "--to", postgres_url)
    assert run.rc == 0, caplog.text
    assert run.json() == {"scopes": len(SCOPES), "roles": 3 * len(SCOPES)}
    database = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=postgres_url)
    try:
        assert _comparable(database) == expected
        chat = database.scoped(SCOPES[0]).get_chat_history("Merchant")
        assert [m.content for m in chat] == ["chat only"]  # a persist=False row never leaves its process
    finally:
        database.close()

    back = tmp_path / "back"
    run = cli("migrate", "--from", postgres_url, "--to", back)
    assert run.rc == 0, caplog.text
    assert _comparable(open_stores(AgentMemoryPersistenceMode.PERSISTENT, back)) == expected


def test_a_target_holding_saves_is_refused_and_left_as_it_was(cli, tmp_path: Path, caplog):
    game = tmp_path / "game"
    _fill(open_stores(AgentMemoryPersistenceMode.PERSISTENT, game))
    other = tmp_path / "other"
    open_stores(AgentMemoryPersistenceMode.PERSISTENT, other).scoped(SCOPES[0]).save("Guard", STATE)
    run = cli("migrate", "--from", game, "--to", other)
    assert run.rc == 2 and "already holds 1 save" in caplog.text
    assert saves_held(open_stores(AgentMemoryPersistenceMode.PERSISTENT, other)) == 1


def test_unattributable_saves_fail_the_migration_before_anything_is_written(cli, tmp_path: Path, postgres_url,
                                                                          caplog):
    game = tmp_path / "game"
    _fill(open_stores(AgentMemoryPersistenceMode.PERSISTENT, game))
    for path in (game / "CoreAI" / "Identities").glob("scope-v1-*.json"):
        path.unlink()  # as if written before the identity index existed
        break
    run = cli("migrate", "--from", game, "--to", postgres_url)
    assert run.rc == 1 and "cannot be attributed" in caplog.text
    database = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=postgres_url)
    try:
        assert saves_held(database) == 0
    finally:
        database.close()


def test_bad_stores_are_usage_errors(cli, tmp_path: Path):
    assert cli("migrate", "--from", tmp_path / "missing", "--to", tmp_path / "x").rc == 2
    (tmp_path / "a").mkdir()
    assert cli("migrate", "--from", tmp_path / "a", "--to", tmp_path / "a").rc == 2
    assert not (tmp_path / "x").exists()
