"""`coreai-runtime history show|clear`, `export` and `import` against real saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyruntime.scopes import AgentMemoryScope
from tests.cli.conftest import file_bundle, memory_file, memory_on_disk, seed_history

U1 = AgentMemoryScope("t", "u1")
U1_FLAGS = ["--tenant", "t", "--user", "u1"]


def test_history_show_json(tmp_path: Path, cli) -> None:
    seed_history(tmp_path, U1)
    run = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS, "--json")
    assert run.rc == 0
    shown = run.json()
    assert shown["summary"] == "- user: hello"
    contents = [row["content"] for row in shown["history"]]
    assert contents == ["My name is Alex", '{"action":"append","content":"Name: Alex"}', '{"Success":true}',
                        "Nice to meet you,\nAlex!"]
    assert shown["history"][1]["kind"] == "TRANSCRIPT_KIND_TOOL_CALL" and shown["history"][1]["callId"] == "c1"
    assert shown["history"][0]["isChatMessage"] is True


def test_history_show_max_and_text(tmp_path: Path, cli) -> None:
    seed_history(tmp_path, U1)
    newest = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS, "--max", "1", "--json")
    assert [row["content"] for row in newest.json()["history"]] == ["Nice to meet you,\nAlex!"]
    text = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS)
    lines = text.out.splitlines()
    assert lines[:3] == ["## Conversation Summary", "- user: hello", "## History"]
    rows = [line.split("\t")[1:] for line in lines[3:]]
    assert rows[0] == ["user", "user", "My name is Alex"]
    assert rows[1][:2] == ["tool_call", "memory"]
    assert rows[3] == ["assistant", "assistant", "Nice to meet you,\\nAlex!"]  # one row per line


def test_history_show_of_another_scope_is_empty(tmp_path: Path, cli) -> None:
    seed_history(tmp_path, U1)
    run = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", "--user", "u2", "--json")
    assert run.json() == {"summary": None, "history": []}


def test_history_clear_removes_history_transcript_and_summary_but_not_memory(tmp_path: Path, cli) -> None:
    seed_history(tmp_path, U1)
    cli("memory", "write", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS, "--content", "Name: Alex")
    run = cli("history", "clear", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS)
    assert run.rc == 0
    assert run.json() == {"Success": True, "ClearedRows": 4, "SummaryCleared": True}
    view = file_bundle(tmp_path).scoped(U1)
    assert view.get_chat_history("SmartChat") == []
    assert view.get_transcript("SmartChat") == []
    assert view.load_summary("SmartChat") is None
    assert memory_on_disk(tmp_path, "SmartChat", U1) == "Name: Alex"


def test_export_then_import_into_another_scope(tmp_path: Path, cli) -> None:
    seed_history(tmp_path, U1)
    cli("memory", "write", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS, "--content", "Name: Alex")
    cli("memory", "append", "--data-dir", tmp_path, "--role", "BlacksmithNPC", *U1_FLAGS, "--actor", "Smith",
        "--content", "Owes 5 gold")
    out = tmp_path / "slot.json"
    run = cli("export", "--data-dir", tmp_path, *U1_FLAGS, "--out", out, "--role", "SmartChat",
              "--role", "BlacksmithNPC", "--actor", "local", "--actor", "Smith")
    assert run.rc == 0
    assert run.json() == {"Success": True, "RolesExported": 2}
    snapshot = json.loads(out.read_text(encoding="utf-8"))  # proto3 JSON
    assert snapshot["scope"] == {"tenantId": "t", "userId": "u1"}
    assert sorted((r["roleId"], r.get("actor", "")) for r in snapshot["roles"]) == [
        ("BlacksmithNPC", "Smith"), ("SmartChat", "")]

    imported = cli("import", out, "--data-dir", tmp_path, "--into-tenant", "t", "--into-user", "u2")
    assert imported.rc == 0
    assert imported.json() == {"Success": True, "RolesImported": 2}
    u2 = AgentMemoryScope("t", "u2")
    assert memory_on_disk(tmp_path, "SmartChat", u2) == "Name: Alex"
    assert memory_on_disk(tmp_path, "BlacksmithNPC", u2, "Smith") == "Owes 5 gold"
    shown = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", "--tenant", "t", "--user", "u2",
                "--json").json()
    assert shown["summary"] == "- user: hello"
    assert [r["content"] for r in shown["history"]][-1] == "Nice to meet you,\nAlex!"
    versions = cli("memory", "versions", "--data-dir", tmp_path, "--role", "SmartChat", "--tenant", "t",
                   "--user", "u2", "--json").json()
    assert [v["Action"] for v in versions] == ["write"]
    # The source scope is untouched.
    assert memory_on_disk(tmp_path, "SmartChat", U1) == "Name: Alex"


def test_export_finds_every_role_with_saves_and_import_restores_the_own_scope(tmp_path: Path, cli) -> None:
    cli("memory", "write", "--data-dir", tmp_path, "--role", "Merchant", *U1_FLAGS, "--content", "Sells swords")
    cli("memory", "write", "--data-dir", tmp_path, "--role", "CustomRole", *U1_FLAGS, "--content", "also exported")
    cli("memory", "write", "--data-dir", tmp_path, "--role", "Merchant", "--user", "u2", "--content", "other scope")
    out = tmp_path / "slot.json"
    assert cli("export", "--data-dir", tmp_path, *U1_FLAGS, "--out", out).json()["RolesExported"] == 2
    assert sorted(r["roleId"] for r in json.loads(out.read_text(encoding="utf-8"))["roles"]) == [
        "CustomRole", "Merchant"]
    cli("memory", "write", "--data-dir", tmp_path, "--role", "Merchant", *U1_FLAGS, "--content", "changed later")
    assert cli("import", out, "--data-dir", tmp_path).rc == 0
    assert memory_on_disk(tmp_path, "Merchant", U1) == "Sells swords"


def test_the_readme_save_slot_example(tmp_path: Path, cli) -> None:
    """README: `memory append --role BlacksmithNPC --user alex`, then `export --user alex` (it exported 0 roles)."""
    game, other = tmp_path / "game", tmp_path / "other"
    game.mkdir()
    other.mkdir()
    assert cli("memory", "append", "--data-dir", game, "--role", "BlacksmithNPC", "--user", "alex",
               "--content", "Likes axes").rc == 0
    slot = tmp_path / "slot1.json"
    assert cli("export", "--out", slot, "--data-dir", game, "--user", "alex").json() == {
        "Success": True, "RolesExported": 1}
    assert cli("import", slot, "--data-dir", other).json() == {"Success": True, "RolesImported": 1}
    assert memory_on_disk(other, "BlacksmithNPC", AgentMemoryScope(user_id="alex")) == "Likes axes"


def test_export_of_saves_it_cannot_attribute_fails_and_says_how_many(tmp_path: Path, cli,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cli("memory", "write", "--data-dir", tmp_path, "--role", "OldRole", *U1_FLAGS, "--content", "pre-index save")
    for path in (tmp_path / "CoreAI" / "Identities").iterdir():  # as if written before the index existed
        path.unlink()
    out = tmp_path / "slot.json"
    run = cli("export", "--data-dir", tmp_path, *U1_FLAGS, "--out", out)
    assert run.rc == 1 and run.out == "" and not out.exists()
    assert any("1 save(s)" in r.getMessage() and "cannot be attributed" in r.getMessage() for r in caplog.records)
    assert cli("export", "--data-dir", tmp_path, *U1_FLAGS, "--role", "OldRole", "--out", out).json()[
        "RolesExported"] == 1
    assert cli("export", "--data-dir", tmp_path, *U1_FLAGS, "--out", out).json()["RolesExported"] == 1  # indexed now


def test_import_of_a_bad_file_writes_nothing(tmp_path: Path, cli, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "game"
    data.mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text('{"formatVersion": 1, "roles": [{"roleId": "  "}]}', encoding="utf-8")
    run = cli("import", bad, "--data-dir", data, "--into-user", "u2")
    assert run.rc == 2 and run.out == ""
    assert any("role_id is required" in r.getMessage() for r in caplog.records)
    bad.write_text("not json", encoding="utf-8")
    assert cli("import", bad, "--data-dir", data).rc == 2
    assert cli("import", tmp_path / "missing.json", "--data-dir", data).rc == 2
    assert list(data.iterdir()) == []


def test_export_to_a_missing_folder_is_an_error(tmp_path: Path, cli) -> None:
    run = cli("export", "--data-dir", tmp_path, "--out", tmp_path / "no" / "slot.json")
    assert run.rc == 2
    assert not (tmp_path / "no").exists()
    assert not memory_file(tmp_path, "Creator").exists()


def test_an_unreadable_summary_is_reported_and_history_clear_still_fixes_it(tmp_path: Path, cli,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    seed_history(tmp_path, U1)
    summary = next((tmp_path / "CoreAI" / "ConversationSummaries").iterdir())
    summary.write_bytes(b'{"Summary": "torn')
    run = cli("history", "show", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS)
    assert run.rc == 1 and any("summary cannot be read" in r.getMessage() for r in caplog.records)
    assert summary.read_bytes() == b'{"Summary": "torn'  # reported, not replaced
    cleared = cli("history", "clear", "--data-dir", tmp_path, "--role", "SmartChat", *U1_FLAGS).json()
    assert cleared == {"Success": True, "ClearedRows": 4, "SummaryCleared": True} and not summary.exists()
