"""Fixtures of the turn tests: the real HTTP client keeping the bodies it sent (for the scripted model served over
HTTP and the slow tests' SmolLM2), the tiny model's server prepared but not started (what `build_orchestrator` reads
of it), stores."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.queue import ModelRequestQueue
from pyruntime.model.client.seam import Gate
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns import AiOrchestrator, ToolRegistry
from tests.support.fixtures import free_port
from tests.support.tiny_model import TINY_CONTEXT_LENGTH, TINY_MODEL_ALIAS

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh event loop."""
    return asyncio.run(coro)


class RecordingClient(OpenAICompatClient):
    """The real client; it also keeps every request body the turn engine asked for (the model call stays real).

    It speaks the hosted engine's dialect, as `build_orchestrator` makes the runtime's own client do: a forced call
    goes to llama-server as a JSON schema. The bodies kept are the requests as built, before that translation.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("llama_server", True)
        kwargs.setdefault("forced_tools_as_schema", True)
        super().__init__(*args, **kwargs)
        self.bodies: list[dict[str, Any]] = []

    async def _request_body(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        body = await super()._request_body(*args, **kwargs)
        self.bodies.append(copy.deepcopy(body))
        return body


def make_orchestrator(
    base_url: str,
    stores: StoreBundle | None = None,
    *,
    policy: AgentMemoryPolicy | None = None,
    tools: ToolRegistry | None = None,
    gate: Gate | None = None,
    model: str | None = None,
    **options: Any,
) -> tuple[AiOrchestrator, RecordingClient]:
    """An orchestrator over a real server with a recording client (model context: the tiny model's 2048);
    `gate`: the client's, as the runtime passes its watchdog's; `model`: the model name the client sends."""
    client = RecordingClient(base_url, gate=gate, model=model)
    options.setdefault("model_context_tokens", 2048)
    orchestrator = AiOrchestrator(
        policy or AgentMemoryPolicy(),
        stores or open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None),
        client,
        ModelRequestQueue(),
        tools=tools,
        **options,
    )
    return orchestrator, client


@pytest.fixture
def prepared_server(tiny_model_path: Path) -> LlamaServerProcess:
    """The tiny model's server, prepared and never started: its configuration and GGUF (size, chat template) are all
    `build_orchestrator` reads of a hosted server, so the factory's choices need no engine. Its context is given
    (a start resolves an unset one from the GGUF)."""
    return LlamaServerProcess(LlamaServerConfig(model_path=tiny_model_path, alias=TINY_MODEL_ALIAS, port=free_port(),
                                                n_ctx=TINY_CONTEXT_LENGTH))


@pytest.fixture
def file_stores(tmp_path: Path) -> StoreBundle:
    """Persistent file stores under tmp_path."""
    return open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)


@pytest.fixture
def memory_stores() -> StoreBundle:
    """Session-only stores."""
    return open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
