"""Hostile saves through the saves CLI: links, FIFOs and oversized files are refused at once with one clear line,
nothing outside the data folder is read or written, and `history clear` / `memory clear` remove them."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import memory_file
from tests.support.hostile_files import make_outside, outside_state, plant

DEADLINE_S = 20.0


def within(run: Any, *argv: object):
    """The CLI run in a thread that must end in time (a FIFO opened for reading blocks forever)."""
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("run", run(*argv)), daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the command blocked"
    return box["run"]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return make_outside(tmp_path)


def messages(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_memory_history_and_export_refuse_a_hostile_save_at_once(tmp_path: Path, cli, outside: Path, kind: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "game"
    for path in (memory_file(data, "Teacher"), data / "CoreAI" / "AgentMemory" / "Teacher.history.jsonl"):
        plant(path, kind, outside)
    before = outside_state(outside)
    word = "link" if kind == "link" else "FIFO"
    for argv in (("memory", "read", "--data-dir", data, "--role", "Teacher"),
                 ("memory", "append", "--data-dir", data, "--role", "Teacher", "--content", "x"),
                 ("history", "show", "--data-dir", data, "--role", "Teacher"),
                 ("export", "--data-dir", data, "--role", "Teacher", "--out", tmp_path / "slot.json")):
        caplog.clear()
        run = within(cli, *argv)
        assert run.rc == 1, argv
        said = run.out + messages(caplog)
        assert "outside secret" not in said and word in said, argv
        assert "Traceback" not in run.err
    assert not (tmp_path / "slot.json").exists()
    assert within(cli, "history", "clear", "--data-dir", data, "--role", "Teacher").rc == 0
    assert not os.path.lexists(data / "CoreAI" / "AgentMemory" / "Teacher.history.jsonl")
    memory_file(data, "Teacher").unlink()  # the CLI's memory actions never replace an unreadable document
    assert within(cli, "memory", "append", "--data-dir", data, "--role", "Teacher", "--content", "fresh").rc == 0
    assert outside_state(outside) == before


def test_import_refuses_a_fifo_or_an_oversized_file_without_reading_it(tmp_path: Path, cli,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "game"
    data.mkdir()
    fifo = tmp_path / "slot.fifo"
    os.mkfifo(fifo)
    run = within(cli, "import", fifo, "--data-dir", data)
    assert run.rc == 2 and "FIFO" in messages(caplog)
    link = tmp_path / "slot-link.json"
    link.symlink_to(fifo)  # a link the user made is followed, to what it names
    caplog.clear()
    assert within(cli, "import", link, "--data-dir", data).rc == 2 and "FIFO" in messages(caplog)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(8 * 1024**3)  # sparse
    caplog.clear()
    assert within(cli, "import", huge, "--data-dir", data).rc == 2 and "over its limit" in messages(caplog)
    assert list(data.iterdir()) == []


def test_a_token_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path, cli, caplog: pytest.LogCaptureFixture) -> None:
    token = tmp_path / "token"
    os.mkfifo(token)
    run = within(cli, "memory", "read", "--runtime", "http://127.0.0.1:9", "--token-file", token, "--role", "Teacher")
    assert run.rc == 2 and "token file cannot be read" in messages(caplog)


def test_a_role_id_with_a_zero_width_character_is_a_usage_error(tmp_path: Path, cli,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    run = cli("memory", "append", "--data-dir", tmp_path, "--role", "Teacher\u200b", "--content", "x")
    assert run.rc == 2 and "U+200B" in messages(caplog)
    assert not (tmp_path / "CoreAI").exists()
