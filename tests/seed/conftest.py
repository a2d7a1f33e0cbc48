"""Fixtures of the seed port: CoreAI's own EditMode memory tests, rewritten against our public surface.

A seed test runs where a Unity developer coming from CoreAI would meet the behaviour: the store API on real
files (`FileAgentMemoryStore` on a temporary data folder, the folder CoreAI's tests give `new
FileAgentMemoryStore(log, root, chatCap, transcriptCap)`), the memory tool, the `coreai-runtime memory|history`
CLI, and the C# client of a runtime (compiled with mcs, called through pythonnet) where the behaviour is the
C# API's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.file_store import FileAgentMemoryStore
from tests.unity.conftest import Runtime, load_assemblies, start_runtime

ROLE = "Teacher"
"""The role CoreAI's tests call `_roleId` (a bare role id is its own storage key, contract §4)."""

StoreFactory = Callable[..., FileAgentMemoryStore]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """`<persistentDataPath>/CoreAI` of one test: nothing outside tmp_path is written."""
    return tmp_path / "CoreAI"


@pytest.fixture
def new_store(root: Path) -> StoreFactory:
    """`NewStore(chatCap, transcriptCap)`: a fresh store instance on the test's folder (what another process opens)."""

    def make(chat_cap: int = 500, transcript_cap: int = 2000, **options: Any) -> FileAgentMemoryStore:
        return FileAgentMemoryStore(root, chat_cap=chat_cap, transcript_cap=transcript_cap, **options)

    return make


def memory_path(root: Path, key: str = ROLE) -> Path:
    """`AgentMemory/<stem>.json` of key (a bare role id's stem is the id)."""
    return root / "AgentMemory" / f"{key}.json"


def history_path(root: Path, key: str = ROLE) -> Path:
    """`AgentMemory/<stem>.history.jsonl` of key."""
    return root / "AgentMemory" / f"{key}.history.jsonl"


def history_lines(root: Path, key: str = ROLE) -> list[str]:
    """The non-blank lines of key's history file."""
    return [line for line in history_path(root, key).read_text(encoding="utf-8").splitlines() if line.strip()]


def loaded_memory(store: FileAgentMemoryStore, key: str = ROLE) -> AgentMemoryState:
    """The state a fresh read finds (fails the test when there is none)."""
    result = store.try_load(key)
    assert result.state is not None, result
    return result.state


@pytest.fixture(scope="session")
def assemblies() -> Path:
    """The C# client and the package's test assemblies, loaded (those of tests/unity)."""
    return load_assemblies()


@pytest.fixture
def csharp_runtime(assemblies: Path, tmp_path: Path) -> Iterator[Runtime]:
    """A runtime serving the file stores of `tmp_path/data` (no model: the memory store is what these tests use)."""
    runtime = start_runtime(tmp_path / "data", no_model=True)
    yield runtime
    runtime.stop()


@pytest.fixture
def csharp_store(csharp_runtime: Runtime) -> Iterator[Any]:
    """The C# `IAgentMemoryStore` a game gets from its runtime client (`CoreAIRuntimeClient.CreateMemoryStore()`)."""
    from CoreAI.Ai import AgentMemoryPolicy

    client = csharp_runtime.client(policy=AgentMemoryPolicy())
    yield client.CreateMemoryStore()
    client.Dispose()
