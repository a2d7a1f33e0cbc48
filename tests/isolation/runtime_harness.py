"""Runtimes for the isolation tests: serve's own runtime in this process over both transports, hosting the tiny
model in a llama-server whose `/slots` shows each slot's last prompt and reply (`LLAMA_SERVER_SLOTS_DEBUG`), so a
test can look for a conversation's text inside the engine as well as on disk."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pyruntime.app import Runtime as AppRuntime
from pyruntime.app import RuntimeModel, RuntimeSettings
from pyruntime.client import RuntimeClient
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores.engine_files import ENGINE_STATES_RELATIVE_PATH, PROMPT_CACHE_RELATIVE_PATH
from tests.support.fixtures import SERVER_START_TIMEOUT_S, free_port
from tests.support.runtime import RuntimeThread
from tests.support.tiny_model import TINY_MODEL_ALIAS

TOKEN = "isolation-token-0123456789abcdef"


class DebugSlotsEngine(LlamaServerProcess):
    """The hosted engine as serve runs it, with its slots' last prompt and reply shown by `/slots` (test only)."""

    def _child_env(self) -> dict[str, str]:
        return {**super()._child_env(), "LLAMA_SERVER_SLOTS_DEBUG": "1"}

    def slot_texts(self) -> list[str]:
        """Every slot's prompt and generated text, as `/slots` shows them now."""
        slots = self.status(timeout=30.0)["slots"]
        assert isinstance(slots, list)
        return [f"{s.get('prompt', '')}\n{s.get('generated', '')}" for s in slots if isinstance(s, dict)]

    def token_bytes(self, text: str) -> bytes:
        """The token ids of `text` as llama.cpp writes them in a state file (int32, little-endian)."""
        assert self._http is not None
        tokens = self._http.post("/tokenize", json={"content": text}, timeout=30.0).json()["tokens"]
        return struct.pack(f"<{len(tokens)}i", *tokens)


def start_engine(model: Path, data_dir: Path, **settings: Any) -> DebugSlotsEngine:
    """The tiny model hosted as serve hosts it for file saves under `data_dir` (engine states and restart-warm
    states in the data folder); the caller stops it."""
    settings.setdefault("n_threads", 1)
    config = LlamaServerConfig(model_path=model, alias=TINY_MODEL_ALIAS, port=free_port(),
                               state_dir=data_dir / ENGINE_STATES_RELATIVE_PATH,
                               prompt_cache_dir=data_dir / PROMPT_CACHE_RELATIVE_PATH, **settings)
    engine = DebugSlotsEngine(config)
    engine.start(timeout=SERVER_START_TIMEOUT_S)
    return engine


@dataclass
class Served:
    """A runtime serving `data_dir` with `engine`; `client(transport)` gives a blocking client."""

    handle: RuntimeThread
    engine: DebugSlotsEngine
    data_dir: Path

    def client(self, transport: str) -> RuntimeClient:
        """A client of "grpc" or "connect" (close it)."""
        url = f"grpc://127.0.0.1:{self.handle.grpc_port}" if transport == "grpc" else self.handle.connect_url
        return RuntimeClient(url, token=TOKEN, timeout=120)

    def stop(self) -> None:
        """Stop the runtime, then the engine gracefully (it saves its slots' states, as serve's stop does)."""
        self.handle.stop()
        self.engine.stop()


def serve(model: Path, data_dir: Path, *, roles: tuple[RoleMemoryConfig, ...] = (), **engine_settings: Any) -> Served:
    """Start the engine and serve's runtime over it (both transports, file saves, restart-warm states on, `roles`
    registered as `--role-config` does)."""
    engine = start_engine(model, data_dir, **engine_settings)
    settings = RuntimeSettings(data_dir=data_dir, grpc_port=0, connect_port=0, token=TOKEN, grace=2.0,
                               prompt_cache_dir=data_dir / PROMPT_CACHE_RELATIVE_PATH, roles=roles)
    hosted = RuntimeModel(engine.base_url, engine.config.alias, engine, port_key=engine.api_key)
    try:
        return Served(RuntimeThread(AppRuntime(settings, model=hosted)), engine, data_dir)
    except BaseException:
        engine.stop()
        raise


def files_under(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Every regular file below `root` with its bytes (links are not followed)."""
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path, path.read_bytes()


def engine_reachable(engine: LlamaServerProcess) -> bool:
    """Whether the engine answers (its debug `/slots` can be read)."""
    try:
        return engine.health(timeout=5.0)
    except httpx.HTTPError:
        return False
