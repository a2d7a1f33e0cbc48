"""Bad input to the saves CLI: a clear one-line error, the right exit code, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import RESULT_KEYS, memory_on_disk

ROOT = Path(__file__).resolve().parents[2]

BLANK_ROLE_COMMANDS = [
    ["memory", "write", "--content", "x"],
    ["memory", "read"],
    ["memory", "versions"],
    ["memory", "revert", "1"],
    ["memory", "diff", "1", "2"],
    ["history", "show"],
    ["history", "clear"],
]


@pytest.mark.parametrize("blank", ["", "   "])
@pytest.mark.parametrize("argv", BLANK_ROLE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_blank_role_exits_2_and_creates_nothing(tmp_path: Path, cli, caplog: pytest.LogCaptureFixture,
                                                 argv: list[str], blank: str) -> None:
    run = cli(*argv, "--data-dir", tmp_path, "--role", blank)
    assert run.rc == 2 and run.out == ""
    assert [r.getMessage() for r in caplog.records] == ["invalid input: role_id is required and must not be blank"]
    assert list(tmp_path.iterdir()) == []


def test_blank_export_role_exits_2_and_creates_nothing(tmp_path: Path, cli) -> None:
    run = cli("export", "--data-dir", tmp_path, "--out", tmp_path / "slot.json", "--role", " ")
    assert run.rc == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_data_dir_is_a_clear_error(tmp_path: Path, cli, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    data_dir = tmp_path / "nope"
    if kind == "file":
        data_dir.write_text("", encoding="utf-8")
    run = cli("memory", "append", "--data-dir", data_dir, "--role", "Creator", "--content", "x")
    assert run.rc == 2 and run.out == ""
    assert any("--data-dir must be an existing directory" in r.getMessage() for r in caplog.records)
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if kind == "missing" else ["nope"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "write", "--content", "x", "--max-memory-chars", "-1"], "--max-memory-chars must be >= 0"),
        (["history", "show", "--max", "-2"], "--max must be >= 0"),
    ],
)
def test_bad_numbers_exit_2(tmp_path: Path, cli, caplog: pytest.LogCaptureFixture, argv: list[str],
                            message: str) -> None:
    run = cli(*argv, "--data-dir", tmp_path, "--role", "Creator")
    assert run.rc == 2
    assert any(message in r.getMessage() for r in caplog.records)
    assert list(tmp_path.iterdir()) == []


def test_unreadable_document_is_a_failure_for_read_and_is_not_overwritten(tmp_path: Path, cli) -> None:
    cli("memory", "write", "--data-dir", tmp_path, "--role", "Creator", "--content", "keep me")
    path = next((tmp_path / "CoreAI" / "AgentMemory").glob("*.json"))
    path.write_text("{torn", encoding="utf-8")
    for argv in (["read"], ["append", "--content", "x"], ["write", "--content", "x"]):
        run = cli("memory", *argv, "--data-dir", tmp_path, "--role", "Creator")
        assert run.rc == 1
        assert run.json()["Success"] is False
    assert path.read_text(encoding="utf-8") == "{torn"
    versions = cli("memory", "versions", "--data-dir", tmp_path, "--role", "Creator")
    assert versions.rc == 1 and versions.out == ""


def _run_process(*argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyruntime.cli", *map(str, argv)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )


def test_as_a_real_process(tmp_path: Path) -> None:
    ok = _run_process("memory", "append", "--data-dir", tmp_path, "--role", "AINpc", "--content", "Likes apples")
    assert ok.returncode == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert list(result) == RESULT_KEYS and result["Memory"] == "Likes apples"
    assert memory_on_disk(tmp_path, "AINpc") == "Likes apples"

    failed = _run_process("memory", "delete", "--data-dir", tmp_path, "--role", "AINpc", "--old-text", "pears")
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["Success"] is False
    assert memory_on_disk(tmp_path, "AINpc") == "Likes apples"

    empty = tmp_path / "empty"
    empty.mkdir()
    blank = _run_process("memory", "write", "--data-dir", empty, "--role", "  ", "--content", "x")
    assert blank.returncode == 2 and blank.stdout == ""
    assert "Traceback" not in blank.stderr
    assert len(blank.stderr.strip().splitlines()) == 1
    assert "role_id is required and must not be blank" in blank.stderr
    assert list(empty.iterdir()) == []

    missing = _run_process("memory", "diff", "1", "5", "--data-dir", tmp_path, "--role", "AINpc")
    assert missing.returncode == 1 and missing.stdout == ""
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
