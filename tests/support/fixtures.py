"""Helpers behind the shared fixtures (tests/conftest.py): free ports and a real llama.cpp server (llama-server).

A started server is stopped by whoever started it (a fixture's finalizer); it exits by itself if pytest dies.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.tiny_model import TINY_MODEL_ALIAS

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
