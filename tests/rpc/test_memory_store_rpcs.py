"""Every MemoryStore and policy RPC through both transports, against real file stores, read back from disk."""

from __future__ import annotations

import asyncio
import json

import pytest

from pyruntime.client import AsyncRuntimeClient, RuntimeClient
from pyruntime.errors import LimitExceededError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores import AgentMemoryPersistenceMode, LoadStatus, TranscriptKind, open_stores
from tests.rpc.conftest import TRANSPORTS, Runtime
from tests.support.loads import loaded

ALICE = AgentMemoryScope(tenant_id="t", user_id="alice", session_id="s1")
BOB = AgentMemoryScope(tenant_id="t", user_id="bob", session_id="s1")


def disk_state(runtime: Runtime, role: str, scope: AgentMemoryScope, actor: str | None = None) -> AgentMemoryState:
    """The state as a fresh store reads it from the files (not through the runtime)."""
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, runtime.data_dir)
    loaded = stores.memory.try_load(storage_key(role, scope, actor))
    assert loaded.status is LoadStatus.LOADED and loaded.state is not None
    return loaded.state


def test_memory_tool_typed_and_raw_arguments_reach_the_file(runtime: Runtime, client: RuntimeClient) -> None:
    first = client.apply_memory_tool("Teacher", {"action": "write", "content": "Name: Alice"}, scope=ALICE)
    assert first.success and first.version == 1 and first.memory == "Name: Alice"
    # The raw JSON a model produced, with a wrong-case name and a string line number, is repaired.
    raw = client.apply_memory_tool("Teacher", '{"Action": "insert", "content": "Likes: swords", "line": "2"}',
                                   scope=ALICE)
    assert raw.success and raw.memory == "Name: Alice\nLikes: swords"
    assert disk_state(runtime, "Teacher", ALICE).memory == "Name: Alice\nLikes: swords"
    # A refused edit stays a result, with the exact JSON the model would see.
    missing = client.apply_memory_tool("Teacher", {"action": "str_replace", "old_text": "Bob", "new_text": "x"},
                                       scope=ALICE)
    assert not missing.success and "old_text was not found" in (missing.error or "")
    assert json.loads(missing.to_json())["Success"] is False
    read = client.apply_memory_tool("Teacher", {"action": "read"}, scope=ALICE)
    assert read.success and read.version == 2 and read.memory == "Name: Alice\nLikes: swords"


def test_scopes_and_actors_are_isolated(runtime: Runtime, client: RuntimeClient) -> None:
    client.apply_memory_tool("Merchant", {"action": "append", "content": "alice owes 5 gold"}, scope=ALICE)
    client.apply_memory_tool("Merchant", {"action": "append", "content": "guard memory"}, scope=ALICE, actor="guard1")
    assert client.load_state("Merchant", scope=BOB).status is LoadStatus.NOT_FOUND
    assert loaded(client.load_state("Merchant", scope=ALICE)).memory == "alice owes 5 gold"
    guard = client.load_state("Merchant", scope=ALICE, actor="guard1")
    assert guard.state is not None and guard.state.memory == "guard memory"
    assert disk_state(runtime, "Merchant", ALICE, "guard1").memory == "guard memory"


def test_state_versions_revert_diff_and_clear(runtime: Runtime, client: RuntimeClient) -> None:
    state = AgentMemoryState(memory="b", versions=(MemoryVersion(1, 10, "write", "a", "chars 0->1 (+1)"),
                                                   MemoryVersion(2, 20, "write", "b", "chars 1->1 (+0)")))
    client.save_state("Analyzer", state, scope=ALICE)
    assert disk_state(runtime, "Analyzer", ALICE) == state
    assert client.load_state("Analyzer", scope=ALICE).state == state
    assert [v.version for v in client.list_versions("Analyzer", scope=ALICE)] == [1, 2]
    assert client.diff_versions("Analyzer", 1, 2, scope=ALICE).splitlines()[2:] == [
        "@@ -1 +1 @@", "-a", "\\ No newline at end of file", "+b", "\\ No newline at end of file"]
    reverted = client.revert_memory("Analyzer", 1, scope=ALICE)
    assert reverted.success and reverted.memory == "a" and reverted.version == 3
    assert disk_state(runtime, "Analyzer", ALICE).versions[-1].note == "Reverted to version 1."
    client.append_chat_message("Analyzer", "user", "keep me", scope=ALICE)
    client.clear_memory("Analyzer", scope=ALICE)
    assert client.load_state("Analyzer", scope=ALICE).status is LoadStatus.NOT_FOUND
    assert client.list_versions("Analyzer", scope=ALICE) == []
    assert [m.content for m in client.get_chat_history("Analyzer", scope=ALICE)] == ["keep me"]


def test_chat_history_transcript_and_summary(runtime: Runtime, client: RuntimeClient) -> None:
    for i in range(4):
        client.append_chat_message("SmartChat", "user" if i % 2 == 0 else "assistant", f"m{i}", scope=ALICE)
    client.append_chat_message("SmartChat", "user", "volatile", persist=False, scope=ALICE)
    history = client.get_chat_history("SmartChat", scope=ALICE)
    assert [m.content for m in history] == ["m0", "m1", "m2", "m3", "volatile"]
    assert [m.content for m in client.get_chat_history("SmartChat", 2, scope=ALICE)] == ["m3", "volatile"]
    rows = client.get_transcript("SmartChat", scope=ALICE)
    assert [r.kind for r in rows[:2]] == [TranscriptKind.USER, TranscriptKind.ASSISTANT]
    assert all(r.is_chat_message for r in rows)
    stem = storage_key("SmartChat", ALICE)
    on_disk = (runtime.memory_dir / f"{stem}.history.jsonl").read_text(encoding="utf-8")
    assert "m3" in on_disk and "volatile" not in on_disk  # persist=false never reaches a file

    assert client.load_summary("SmartChat", scope=ALICE) is None
    client.save_summary("SmartChat", "they talked", scope=ALICE)
    assert client.load_summary("SmartChat", scope=ALICE) == "they talked"
    client.clear_summary("SmartChat", scope=ALICE)
    assert client.load_summary("SmartChat", scope=ALICE) is None
    client.save_summary("SmartChat", "again", scope=ALICE)
    client.clear_chat_history("SmartChat", scope=ALICE)  # also clears the summary
    assert client.get_chat_history("SmartChat", scope=ALICE) == []
    assert client.get_transcript("SmartChat", scope=ALICE) == []
    assert client.load_summary("SmartChat", scope=ALICE) is None


def test_export_and_import_a_save_slot(runtime: Runtime, client: RuntimeClient) -> None:
    client.apply_memory_tool("AINpc", {"action": "append", "content": "met the player"}, scope=ALICE, actor="npc7")
    client.append_chat_message("AINpc", "user", "hello", scope=ALICE, actor="npc7")
    client.save_summary("AINpc", "greeting", scope=ALICE, actor="npc7")
    snapshot = client.export_snapshot(ALICE, role_ids=["AINpc"], actors=["npc7"])
    assert [(r.role_id, r.actor) for r in snapshot.roles] == [("AINpc", "npc7")]
    slot2 = AgentMemoryScope(tenant_id="t", user_id="alice", session_id="slot2")
    assert client.import_snapshot(snapshot, target_scope=slot2) == 1
    copied = client.load_state("AINpc", scope=slot2, actor="npc7")
    assert copied.state is not None and copied.state.memory == "met the player"
    assert [m.content for m in client.get_chat_history("AINpc", scope=slot2, actor="npc7")] == ["hello"]
    assert client.load_summary("AINpc", scope=slot2, actor="npc7") == "greeting"
    # No roles named: every role the runtime's policy knows (AINpc is built in).
    assert [r.role_id for r in client.export_snapshot(slot2, actors=["npc7"]).roles] == ["AINpc"]


def test_role_policy_rpcs(client: RuntimeClient) -> None:
    roles = {c.role_id: c for c in client.list_roles()}
    assert {"Creator", "PlainChat", "Programmer"} <= set(roles) and not roles["PlainChat"].use_memory_tool
    stored = client.configure_role(RoleMemoryConfig("Blacksmith", max_memory_chars=40, temperature=0.3))
    assert stored.role_id == "Blacksmith" and stored.max_memory_chars == 40 and stored.temperature == 0.3
    assert client.get_role_config("Blacksmith") == stored
    assert client.get_role_config("NeverConfigured") == RoleMemoryConfig("NeverConfigured")
    # The configured limit is the one the memory tool enforces.
    with pytest.raises(LimitExceededError) as refused:
        client.apply_memory_tool("Blacksmith", {"action": "write", "content": "x" * 41})
    assert "over the limit of 40 chars" in str(refused.value)


def test_health_needs_no_token(runtime: Runtime, transport: str) -> None:
    with runtime.client(transport, token="not-the-token-at-all") as anonymous:
        health = anonymous.health()
    assert health.ready and not health.model_ready and health.version


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_client_covers_the_same_calls(runtime: Runtime, transport: str) -> None:
    async def scenario() -> None:
        async with AsyncRuntimeClient(runtime.url(transport), token=runtime.token) as client:
            results = await asyncio.gather(*(
                client.apply_memory_tool("Builder", {"action": "append", "content": f"fact {i}"}, scope=ALICE)
                for i in range(10)))
            assert all(r.success for r in results)
            assert sorted(r.version for r in results) == list(range(1, 11))
            versions = await client.list_versions("Builder", scope=ALICE)
            assert len(versions) == 10
            assert (await client.health()).ready
            assert (await client.get_role_config("Builder")).role_id == "Builder"

    asyncio.run(scenario())
    assert sorted(disk_state(runtime, "Builder", ALICE).memory.splitlines()) == sorted(f"fact {i}" for i in range(10))
