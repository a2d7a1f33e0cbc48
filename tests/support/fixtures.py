"""Reusable fixtures: the tiny test model and a real llama.cpp server (llama-server) hosting it.

Use from any conftest with an import, e.g.
`from tests.support.fixtures import tiny_model_path, tiny_llama_server  # noqa: F401`.
Every started server is stopped by its fixture's finalizer (and exits by itself if pytest dies).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.tiny_model import TINY_MODEL_ALIAS, write_tiny_model

SERVER_START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_llama_server(model_path: Path, *, alias: str = TINY_MODEL_ALIAS, **settings: Any) -> LlamaServerProcess:
    """Start a real llama-server (behind its guarded model port) on a free port; the caller must `stop()` it.

    One thread: the tests run beside each other on a small machine. The binary is the one the runtime
    finds ($COREAI_LLAMA_SERVER, else the bootstrap's).
    """
    settings.setdefault("n_threads", 1)
    config = LlamaServerConfig(model_path=model_path, alias=alias, port=free_port(), **settings)
    server = LlamaServerProcess(config)
    server.start(timeout=SERVER_START_TIMEOUT_S)
    return server


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight GGUF (ChatML template, 2048 trained context)."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_endless_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GGUF variant whose free-text replies run to max_tokens (long streams)."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-endless.gguf", endless=True)


@pytest.fixture(scope="session")
def tiny_llama_server(tiny_model_path: Path) -> Iterator[LlamaServerProcess]:
    """A llama.cpp server hosting the tiny model for the whole session (game settings)."""
    server = start_llama_server(tiny_model_path)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_server_url(tiny_llama_server: LlamaServerProcess) -> str:
    """OpenAI base URL (`http://127.0.0.1:PORT/v1`) of the session's tiny server."""
    return tiny_llama_server.base_url
