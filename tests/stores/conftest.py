"""Store factories: every contract test runs against each real backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pyruntime.stores.base import AgentMemoryStore, ConversationSummaryStore
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore

StoreFactory = Callable[..., AgentMemoryStore]


@pytest.fixture(params=["in_memory", "file", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test; memory and summary stores of one test always share it."""
    return request.param


@pytest.fixture
def database(backend: str, request: pytest.FixtureRequest):
    """The PostgreSQL database of the postgres backend (one per test, shared by its stores); None otherwise."""
    if backend != "postgres":
        yield None
        return
    from pyruntime.stores.postgres import PostgresDatabase

    db = PostgresDatabase(request.getfixturevalue("postgres_url"))
    yield db
    db.close()


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """`<persistentDataPath>/CoreAI` of the file backend."""
    return tmp_path / "CoreAI"


@pytest.fixture
def store_factory(backend: str, data_root: Path, database) -> StoreFactory:
    """Builds a fresh store of the backend; keyword arguments are chat_cap / transcript_cap."""
    if backend == "in_memory":
        return lambda **caps: InMemoryAgentMemoryStore(**caps)
    if backend == "postgres":
        from pyruntime.stores.postgres import PostgresAgentMemoryStore

        return lambda **caps: PostgresAgentMemoryStore(database, **caps)
    from pyruntime.stores.file_store import FileAgentMemoryStore  # owned by another area; imported lazily

    return lambda **caps: FileAgentMemoryStore(data_root, **caps)


@pytest.fixture
def store(store_factory: StoreFactory) -> AgentMemoryStore:
    """A fresh store with the default caps."""
    return store_factory()


@pytest.fixture
def summaries(backend: str, data_root: Path, database) -> ConversationSummaryStore:
    """A fresh summary store of the backend."""
    if backend == "in_memory":
        return InMemoryConversationSummaryStore()
    if backend == "postgres":
        from pyruntime.stores.postgres import PostgresConversationSummaryStore

        return PostgresConversationSummaryStore(database)
    from pyruntime.stores.file_store import FileConversationSummaryStore

    return FileConversationSummaryStore(data_root)
