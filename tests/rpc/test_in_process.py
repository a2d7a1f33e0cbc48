"""The in-process transport: `RuntimeClient` over a MemoryStoreService of this process, on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyruntime.client import (
    RuntimeClient,
    RuntimeLimitExceededError,
    RuntimeMemoryUnreadableError,
    RuntimeNotFoundError,
)
from pyruntime.errors import InvalidArgumentError, LimitExceededError, MemoryUnreadableError, NotFoundError
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc.in_process import InProcessTransport
from pyruntime.service.memory_store import MemoryStoreService
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, open_stores


def _client(data_dir: Path, policy: AgentMemoryPolicy | None = None) -> RuntimeClient:
    service = MemoryStoreService(open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir), policy, workers=1)
    return RuntimeClient("in-process", token="", transport=InProcessTransport(service))


def test_calls_reach_the_files_and_come_back_as_the_core_types(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        written = client.apply_memory_tool("Smith", {"action": "write", "content": "Sword: Dawnbreaker"})
        appended = client.apply_memory_tool("Smith", {"action": "append", "content": "Shield: Aegis"})
        assert (written.success, written.version, appended.version) == (True, 1, 2)
        assert [v.action for v in client.list_versions("Smith")] == ["write", "append"]
        assert "+Shield: Aegis" in client.diff_versions("Smith", 1, 2)
    # A second client (another process, as far as the files go) reads what the first one wrote.
    with _client(tmp_path) as again:
        loaded = again.load_state("Smith")
        assert loaded.status is LoadStatus.LOADED and loaded.state is not None
        assert loaded.state.memory == "Sword: Dawnbreaker\nShield: Aegis"


def test_a_failed_call_raises_the_client_error_of_its_status(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        client.apply_memory_tool("Smith", {"action": "write", "content": "Sword: Dawnbreaker"})
        with pytest.raises(RuntimeNotFoundError) as unknown:
            client.diff_versions("Smith", 1, 7)
        assert isinstance(unknown.value, NotFoundError)  # the core's error of the same meaning
        path = tmp_path / "CoreAI" / "AgentMemory" / "Smith.json"
        path.write_bytes(b"{not json")
        with pytest.raises(RuntimeMemoryUnreadableError) as unreadable:
            client.revert_memory("Smith", 1)
        assert isinstance(unreadable.value, MemoryUnreadableError)
        assert path.read_bytes() == b"{not json"  # the refused call changed nothing


def test_the_service_policy_applies(tmp_path: Path) -> None:
    policy = AgentMemoryPolicy()
    policy.set_max_memory_chars("Smith", 5)
    with _client(tmp_path, policy) as client:
        with pytest.raises(RuntimeLimitExceededError) as limited:  # RESOURCE_EXHAUSTED
            client.apply_memory_tool("Smith", {"action": "write", "content": "longer than five"})
        assert isinstance(limited.value, LimitExceededError)
        assert client.load_state("Smith").status is LoadStatus.NOT_FOUND


def test_only_the_memory_store_is_served(tmp_path: Path) -> None:
    with _client(tmp_path) as client, pytest.raises(InvalidArgumentError, match="MemoryStore only"):
        client.health()
