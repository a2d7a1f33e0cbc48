"""Fixtures of the slow tests: the real SmolLM2-135M hosted once per session (meaning, not just protocol)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.fixtures import start_llama_server


@pytest.fixture(scope="session")
def smollm2_server() -> Iterator[LlamaServerProcess]:
    """The embedded SmolLM2-135M-Instruct behind a real llama.cpp server, with the game settings."""
    server = start_llama_server(embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS)
    yield server
    server.stop()
