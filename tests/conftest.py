"""Shared fixtures: the tiny model and its llama.cpp server, a GGUF served over HTTP, PostgreSQL, the in-process CLI.

pytest finds them here for every area (tests never import a fixture); fixtures of one area live in that area's
conftest, helpers in tests/support.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pyruntime.cli import main  # noqa: E402
from tests.support.cli import CliRun  # noqa: E402
from tests.support.postgres import PostgresCluster, PostgresMissing  # noqa: E402

if TYPE_CHECKING:  # the model's modules load in ~1 s: imported by the fixtures that need them
    from pyruntime.model.hosting.process import LlamaServerProcess
    from tests.support.file_server import FileServer


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The CLI run in-process configures logging (serve the root logger, chat quiets `pyruntime` to warnings);
    later tests must not inherit it: a quieted logger would hide the records a `caplog` test looks for."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, logger in logging.Logger.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and logger.level != levels.get(name, logging.NOTSET):
            logger.setLevel(levels.get(name, logging.NOTSET))


@pytest.fixture(autouse=True)
def _garbage_collector_restored() -> Iterator[None]:
    """`serve` run in-process freezes the heap and raises the young generation's threshold once ready (a server's
    tuning); the test session's own collector goes back to how it was."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


# --- the tiny model and a real llama.cpp server hosting it -----------------------------------------

@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight GGUF (ChatML template, 2048 trained context)."""
    from tests.support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_endless_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GGUF variant whose free-text replies run to max_tokens (long streams)."""
    from tests.support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-endless.gguf", endless=True)


@pytest.fixture(scope="session")
def tiny_llama_server(tiny_model_path: Path) -> Iterator[LlamaServerProcess]:
    """A llama.cpp server hosting the tiny model for the whole session (game settings)."""
    from tests.support.fixtures import start_llama_server

    server = start_llama_server(tiny_model_path)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_server_url(tiny_llama_server: LlamaServerProcess) -> str:
    """OpenAI base URL (`http://127.0.0.1:PORT/v1`) of the session's tiny server."""
    return tiny_llama_server.base_url


# --- a GGUF served over real HTTP (model downloads) ---------------------------------------------------

@pytest.fixture(scope="session")
def gguf_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The tiny random-weight GGUF (~0.5 MB) as bytes: the endless variant, so a turn served from it has text.

    The plain variant may sample `<|im_end|>` first and reply nothing (a fresh-clone CI failed on it in
    test_a_pulled_model_is_served_by_its_name_and_answers_a_turn); the pull tests only need the bytes.
    """
    from tests.support.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf", endless=True).read_bytes()


@pytest.fixture
def server(gguf_bytes: bytes) -> Iterator[FileServer]:
    """A file server with the GGUF at /tiny.gguf (tests add misbehaving paths)."""
    from tests.support.file_server import FileServer, Served

    files = FileServer({"/tiny.gguf": Served(gguf_bytes)})
    yield files
    files.close()


# --- PostgreSQL --------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway cluster for the whole run, started on first use; missing PostgreSQL FAILS the test."""
    try:
        cluster = PostgresCluster()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh empty database of the cluster (dropped afterwards)."""
    url = postgres_cluster.database()
    yield url
    postgres_cluster.drop(url)


# --- the CLI -----------------------------------------------------------------------------------------

@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliRun]:
    """Run `coreai-runtime ARGS...` in-process; argparse usage errors count as their exit code."""

    def run(*argv: object) -> CliRun:
        capsys.readouterr()
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:
            rc = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliRun(rc, captured.out, captured.err)

    return run


# --- pythonnet's quick exit --------------------------------------------------------------------------

_session: dict[str, pytest.Session] = {}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remember the session so pytest_unconfigure can read its final exit status."""
    _session["s"] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Skip pythonnet's slow shutdown (3-5 s) once everything is reported, keeping the exit code.

    Only when Mono was started in this process (the C# tests) and it is not an xdist worker (whose controller
    waits for its own shutdown handshake); reports, cache and junit files are written before this hook.
    """
    if "clr" not in sys.modules or hasattr(config, "workerinput") or "s" not in _session:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_session["s"].exitstatus))
