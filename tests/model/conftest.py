"""Fixtures of the model-runtime tests: shared tiny servers plus per-test servers that tests may kill."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.fixtures import start_llama_server


@pytest.fixture
def llama_server_factory() -> Iterator[Callable[..., LlamaServerProcess]]:
    """Start servers with custom settings inside one test; all are stopped afterwards."""
    started: list[LlamaServerProcess] = []

    def start(model_path: Path, **settings: Any) -> LlamaServerProcess:
        server = start_llama_server(model_path, **settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def small_ctx_server(tiny_model_path: Path) -> Iterator[LlamaServerProcess]:
    """The tiny model hosted with a 256-token context, to overflow it for real."""
    server = start_llama_server(tiny_model_path, n_ctx=256)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def endless_server(tiny_endless_model_path: Path) -> Iterator[LlamaServerProcess]:
    """The endless tiny model with game settings."""
    server = start_llama_server(tiny_endless_model_path)
    yield server
    server.stop()
