"""Deleting means deleted: ForgetPlayer and ClearChatHistory leave nothing of the conversation on disk or in the engine.

Serve's runtime hosts the tiny model in llama-server (two slots, parked states and restart-warm states in the data
folder, as serve runs it for file saves); two players talk to two NPCs each over gRPC and Connect, every line and
memory carrying a canary of its conversation; the runtime restarts once (the slots' states saved to disk and
restored). Then a deletion, and the whole data folder is searched for the conversation's text (UTF-8 and UTF-16),
its storage keys, its digests (and their first 16 hex digits) and the token ids of its text as llama.cpp writes
them in a state file; the engine's `/slots` (with its debug text on) is searched too. The other player's data is
the control: it is found by the same search, so the search can see what it looks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coreai.v1 import orchestrator_pb2
from pyruntime.client import RuntimeClient
from pyruntime.model.client.slots import conversation_id
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope, storage_key
from tests.isolation.runtime_harness import Served, files_under, serve

TENANT = "realm-1"
NPCS = ("Smith", "Guard")
ROLES = tuple(RoleMemoryConfig(npc, persist_chat_history=True) for npc in NPCS)  # their chats saved to disk


def canary(user: str, npc: str) -> str:
    """The conversation's tag, in its lines and memory: letters the tiny model tokenizes one by one."""
    return f"QZX{user.upper()}{npc.upper()}Q"


def scope(user: str) -> AgentMemoryScope:
    return AgentMemoryScope(tenant_id=TENANT, user_id=user)


def talk(client: RuntimeClient, user: str, rounds: int, first: int = 0) -> None:
    for number in range(first, first + rounds):
        for npc in NPCS:
            # A statement about the player: the memory writer's pass reads the line too (the shared writer slot).
            response = client.run_task(f"Line {number}: my name is {canary(user, npc)}.", role_id=npc,
                                       scope=scope(user), wait_memory_write=True)
            assert response.status == orchestrator_pb2.TURN_STATUS_OK, response.error


def needles(served: Served, user: str, npc: str) -> dict[str, bytes]:
    """What of one conversation may not remain: its text, key, digest and its text's token ids."""
    tag = canary(user, npc)
    key = storage_key(npc, scope(user))
    digest = conversation_id(key)
    return {"text": tag.encode(), "text (UTF-16)": tag.encode("utf-16-le"), "storage key": key.encode(),
            "digest": digest.encode(), "digest prefix": digest[:16].encode(),
            "token ids": served.engine.token_bytes(tag)}


def found(served: Served, wanted: dict[str, bytes]) -> list[str]:
    """Where any of `wanted` is: files under the data folder and the engine's private folder, and `/slots`."""
    places = []
    folders = [served.data_dir]
    if served.engine._private is not None:
        folders.append(served.engine._private)
    for folder in folders:
        for path, data in files_under(folder):
            places += [f"{path.relative_to(folder)}: {what}" for what, needle in wanted.items() if needle in data]
    for slot, text in enumerate(served.engine.slot_texts()):
        places += [f"/slots[{slot}]: {what}" for what, needle in wanted.items() if needle.decode("latin-1") in text]
    return places


@pytest.fixture
def played(tiny_model_path: Path, tmp_path: Path) -> Iterator[Served]:
    """Alice and Bob, two NPCs each, over both transports, with one restart of runtime and engine in between."""
    data = tmp_path / "data"
    first = serve(tiny_model_path, data, roles=ROLES, slots=2, prompt_cache_mb=64)
    try:
        with first.client("grpc") as alice, first.client("connect") as bob:
            for user, client in (("alice", alice), ("bob", bob)):
                for npc in NPCS:
                    client.apply_memory_tool(npc, {"action": "append", "content": f"Code word {canary(user, npc)}"},
                                             scope=scope(user))
            for user, client in (("alice", alice), ("bob", bob)):
                talk(client, user, 2)
    finally:
        first.stop()  # a graceful stop: the held slots' states are saved to the data folder
    served = serve(tiny_model_path, data, roles=ROLES, slots=2, prompt_cache_mb=64)
    try:
        with served.client("grpc") as alice, served.client("connect") as bob:
            talk(alice, "alice", 1, first=2)
            talk(bob, "bob", 1, first=2)  # four conversations on two slots: some states are parked
        yield served
    finally:
        served.stop()


def test_forgetting_a_player_leaves_nothing_of_their_conversations_on_disk_or_in_the_engine(played: Served) -> None:
    alice = {f"{npc} {what}": needle for npc in NPCS for what, needle in needles(played, "alice", npc).items()}
    before = found(played, alice)
    # The search sees her everywhere she was: saves, engine states on disk (token ids), the engine's slots.
    assert any("text" in p and "AgentMemory" in p for p in before), before
    assert any("token ids" in p and "runtime" in p for p in before), before
    with played.client("grpc") as client:
        forgotten = client.forget_player(AgentMemoryScope(tenant_id=TENANT, user_id="alice"))
        assert forgotten.saves_erased == len(NPCS) and forgotten.unattributed_saves == 0
        assert not found(played, alice), "left after ForgetPlayer"
        again = client.run_task("Hello again.", role_id=NPCS[0], scope=scope("alice"))  # she comes back: afresh
    assert again.status == orchestrator_pb2.TURN_STATUS_OK
    assert again.usage.cached_prompt_tokens == 0  # nothing of her conversation was left in the engine to reuse
    bob = {f"{npc} {what}": needle for npc in NPCS for what, needle in needles(played, "bob", npc).items()}
    assert any("text" in p and "AgentMemory" in p for p in found(played, bob))  # the control: Bob is all there


def test_clearing_a_chat_history_takes_its_lines_out_of_the_engine_too(played: Served) -> None:
    npc = NPCS[1]
    lines = {"line": f"my name is {canary('bob', npc)}".encode(),
             "line (UTF-16)": f"my name is {canary('bob', npc)}".encode("utf-16-le")}
    assert any("AgentMemory" in p for p in found(played, lines))
    with played.client("connect") as client:
        client.clear_chat_history(npc, scope=scope("bob"))
        memory = client.load_state(npc, scope=scope("bob"))
    assert not found(played, lines), "left after ClearChatHistory"
    digest = conversation_id(storage_key(npc, scope("bob")))
    assert not any(digest.encode() in data for _, data in files_under(played.data_dir / "CoreAI" / "runtime"))
    assert memory.state is not None and canary("bob", npc) in memory.state.memory  # the memory stays
