"""Fixtures of the models tests: a generated GGUF, a real loopback HTTP server that serves it, the CLI in-process."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyruntime.cli import main
from tests.support.file_server import FileServer, Served
from tests.support.tiny_model import write_tiny_model


@pytest.fixture(scope="session")
def gguf_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The tiny random-weight GGUF (~0.5 MB) as bytes: the endless variant, so a turn served from it has text.

    The plain variant may sample `<|im_end|>` first and reply nothing (a fresh-clone CI failed on it in
    test_a_pulled_model_is_served_by_its_name_and_answers_a_turn); the pull tests only need the bytes.
    """
    return write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf", endless=True).read_bytes()


@pytest.fixture
def gguf_sha256(gguf_bytes: bytes) -> str:
    """Its sha256."""
    return hashlib.sha256(gguf_bytes).hexdigest()


@pytest.fixture
def server(gguf_bytes: bytes) -> Iterator[FileServer]:
    """A file server with the GGUF at /tiny.gguf (tests add misbehaving paths)."""
    files = FileServer({"/tiny.gguf": Served(gguf_bytes)})
    yield files
    files.close()


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    """An empty cache folder."""
    return tmp_path / "models"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture):
    """Runs `coreai-runtime ARGS` in this process: (exit code, stdout, stderr with the log lines)."""

    def run(*args: str) -> tuple[int, str, str]:
        caplog.clear()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err + caplog.text

    return run
