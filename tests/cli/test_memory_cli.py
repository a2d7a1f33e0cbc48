"""`coreai-runtime memory <action>`: one memory tool action on a real save, result JSON on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyruntime.scopes import AgentMemoryScope
from tests.cli.conftest import RESULT_KEYS, memory_file, memory_on_disk

BASE = "Name: Alex\nClass: Mage"


@pytest.fixture
def save(tmp_path: Path, cli) -> Path:
    """A data dir whose Creator memory is BASE (version 1)."""
    run = cli("memory", "write", "--data-dir", tmp_path, "--role", "Creator", "--content", BASE)
    assert run.rc == 0, run
    return tmp_path


def test_write_prints_the_result_json_and_writes_the_file(tmp_path: Path, cli) -> None:
    run = cli("memory", "write", "--data-dir", tmp_path, "--role", " Creator ", "--content", "Name: Alex")
    assert run.rc == 0
    assert run.out.count("\n") == 1  # one compact JSON line
    result = run.json()
    assert list(result) == RESULT_KEYS
    assert result["Success"] is True and result["Message"].startswith("DONE:")
    assert (result["Version"], result["MemoryLength"], result["Memory"]) == (1, 10, "Name: Alex")
    # The role was trimmed: the file of the bare role id holds the document.
    assert memory_on_disk(tmp_path, "Creator") == "Name: Alex"
    assert run.out.strip() == json.dumps(result, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["append", "--content", "Level: 3"], BASE + "\nLevel: 3"),
        (["clear"], ""),
        (["str_replace", "--old-text", "Mage", "--new-text", "Rogue"], "Name: Alex\nClass: Rogue"),
        (["str_replace", "--old-text", "a", "--new-text", "4", "--replace-all"], "N4me: Alex\nCl4ss: M4ge"),
        (["insert", "--line", "2", "--content", "Age: 30"], "Name: Alex\nAge: 30\nClass: Mage"),
        (["insert", "--anchor", "Name", "--content", "Age: 30"], "Name: Alex\nAge: 30\nClass: Mage"),
        (["delete", "--old-text", "\nClass: Mage"], "Name: Alex"),
        (["rename", "--old-text", "Class", "--new-text", "Job"], "Name: Alex\nJob: Mage"),
        (["write", "--content", "Fresh"], "Fresh"),
    ],
)
def test_each_mutating_action_changes_the_file(save: Path, cli, argv: list[str], expected: str) -> None:
    action, *flags = argv
    run = cli("memory", action, "--data-dir", save, "--role", "Creator", *flags)
    assert run.rc == 0, run
    result = run.json()
    assert result["Success"] is True
    assert result["Memory"] == expected
    assert result["Version"] == 2
    assert memory_on_disk(save, "Creator") == expected


def test_read_changes_nothing(save: Path, cli) -> None:
    before = memory_file(save, "Creator").read_bytes()
    run = cli("memory", "read", "--data-dir", save, "--role", "Creator")
    assert run.rc == 0
    assert (run.json()["Memory"], run.json()["Version"]) == (BASE, 1)
    assert memory_file(save, "Creator").read_bytes() == before


def test_read_of_a_role_without_a_save_is_empty(tmp_path: Path, cli) -> None:
    run = cli("memory", "read", "--data-dir", tmp_path, "--role", "Merchant")
    assert run.rc == 0
    assert (run.json()["Memory"], run.json()["Version"]) == ("", 0)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["str_replace", "--old-text", "Warrior", "--new-text", "x"], "old_text was not found in memory"),
        (["str_replace", "--new-text", "x"], "old_text is required for str_replace action"),
        (["insert", "--line", "0", "--content", "x"], "line must be a 1-based positive line number"),
        (["write"], "content"),
        (["write", "--content", "x" * 40, "--max-memory-chars", "30"], "30"),
        (["rename", "--old-text", "Nope", "--new-text", "x"], "Nope"),
    ],
)
def test_failures_exit_nonzero_print_the_result_and_leave_the_file(save: Path, cli, argv: list[str],
                                                                   error: str) -> None:
    before = memory_file(save, "Creator").read_bytes()
    action, *flags = argv
    run = cli("memory", action, "--data-dir", save, "--role", "Creator", *flags)
    assert run.rc == 1
    result = run.json()
    assert list(result) == RESULT_KEYS
    assert result["Success"] is False and result["Memory"] is None
    assert error in result["Error"] and "DONE" not in run.out
    assert memory_file(save, "Creator").read_bytes() == before


def test_max_memory_chars_defaults_to_the_role_policy(tmp_path: Path, cli) -> None:
    big = "x" * 16001
    run = cli("memory", "write", "--data-dir", tmp_path, "--role", "AINpc", "--content", big)
    assert run.rc == 1
    assert "16000" in run.json()["Error"]
    assert not memory_file(tmp_path, "AINpc").exists()
    run = cli("memory", "write", "--data-dir", tmp_path, "--role", "AINpc", "--content", big, "--max-memory-chars", "0")
    assert run.rc == 0
    assert memory_on_disk(tmp_path, "AINpc") == big


def test_scope_and_actor_flags_select_the_save(tmp_path: Path, cli) -> None:
    scope = ["--tenant", "t", "--user", "u1", "--session", "s"]
    run = cli("memory", "append", "--data-dir", tmp_path, "--role", "AINpc", *scope, "--actor", "Smith",
              "--content", "Owes 5 gold")
    assert run.rc == 0
    assert memory_on_disk(tmp_path, "AINpc", AgentMemoryScope("t", "u1", "s"), "Smith") == "Owes 5 gold"
    other_user = cli("memory", "read", "--data-dir", tmp_path, "--role", "AINpc", "--tenant", "t", "--user", "u2",
                     "--session", "s", "--actor", "Smith")
    no_actor = cli("memory", "read", "--data-dir", tmp_path, "--role", "AINpc", *scope)
    same = cli("memory", "read", "--data-dir", tmp_path, "--role", "AINpc", *scope, "--actor", "Smith")
    assert other_user.json()["Memory"] == "" and no_actor.json()["Memory"] == ""
    assert same.json()["Memory"] == "Owes 5 gold"


def test_versions_list_oldest_first(save: Path, cli) -> None:
    cli("memory", "append", "--data-dir", save, "--role", "Creator", "--content", "Level: 3")
    text = cli("memory", "versions", "--data-dir", save, "--role", "Creator")
    assert text.rc == 0
    lines = text.out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "2"]
    assert lines[0].split("\t")[2:] == ["write", "chars 0->22 (+22)"]
    assert lines[1].split("\t")[2:] == ["append", "chars 22->31 (+9)"]
    as_json = cli("memory", "versions", "--data-dir", save, "--role", "Creator", "--json").json()
    assert [v["Version"] for v in as_json] == [1, 2]
    assert as_json[1]["ContentAfter"] == BASE + "\nLevel: 3"
    assert list(as_json[0]) == ["Version", "Timestamp", "Action", "ContentAfter", "Note"]


def test_versions_of_a_role_without_a_save_is_empty(tmp_path: Path, cli) -> None:
    run = cli("memory", "versions", "--data-dir", tmp_path, "--role", "Creator", "--json")
    assert (run.rc, run.json()) == (0, [])


def test_revert_records_a_new_version(save: Path, cli) -> None:
    cli("memory", "clear", "--data-dir", save, "--role", "Creator")
    assert memory_on_disk(save, "Creator") == ""
    run = cli("memory", "revert", "1", "--data-dir", save, "--role", "Creator")
    assert run.rc == 0
    result = run.json()
    assert result["Success"] is True and result["Memory"] == BASE and result["Version"] == 3
    assert memory_on_disk(save, "Creator") == BASE
    newest = cli("memory", "versions", "--data-dir", save, "--role", "Creator", "--json").json()[-1]
    assert (newest["Action"], newest["Note"]) == ("revert", "Reverted to version 1.")


def test_revert_to_an_unknown_version_fails_and_changes_nothing(save: Path, cli) -> None:
    before = memory_file(save, "Creator").read_bytes()
    run = cli("memory", "revert", "7", "--data-dir", save, "--role", "Creator")
    assert run.rc == 1
    assert run.json()["Success"] is False and "7" in run.json()["Error"]
    assert memory_file(save, "Creator").read_bytes() == before


def test_diff_between_versions(save: Path, cli) -> None:
    cli("memory", "str_replace", "--data-dir", save, "--role", "Creator", "--old-text", "Mage", "--new-text", "Rogue")
    run = cli("memory", "diff", "1", "2", "--data-dir", save, "--role", "Creator")
    assert run.rc == 0
    assert "-Class: Mage" in run.out.splitlines() and "+Class: Rogue" in run.out.splitlines()
    as_json = cli("memory", "diff", "1", "2", "--data-dir", save, "--role", "Creator", "--json").json()
    assert as_json["diff"] == run.out
    same = cli("memory", "diff", "2", "2", "--data-dir", save, "--role", "Creator")
    assert (same.rc, same.out) == (0, "")


def test_diff_with_an_unknown_version_is_an_error(save: Path, cli, caplog: pytest.LogCaptureFixture) -> None:
    run = cli("memory", "diff", "1", "9", "--data-dir", save, "--role", "Creator")
    assert run.rc == 1 and run.out == ""
    assert any("9 not retained" in r.getMessage() for r in caplog.records)
