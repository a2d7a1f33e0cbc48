"""Fixtures of the models tests: the GGUF's checksum, an empty cache, the CLI in-process (the GGUF and the file
server that serves it are the shared `gguf_bytes` and `server`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pyruntime.cli import main


@pytest.fixture
def gguf_sha256(gguf_bytes: bytes) -> str:
    """Its sha256."""
    return hashlib.sha256(gguf_bytes).hexdigest()


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
