"""NPCs in parallel slots, their parked states and restart-warm slots, on the real llama-server (tiny model).

Through the runtime's own client (`LlamaServerProcess.client_options`): each conversation keeps its slot,
a conversation that lost its slot comes back from its own parked state (`model/client/parked_states.py`), a
state superseded by a compaction is dropped instead of parked, and the slots saved at a graceful stop are
restored at the next start, only when they pass the store's checks.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.client.http import OpenAICompatClient
from pyruntime.model.client.slots import conversation_id
from pyruntime.model.client.types import Usage, UsageDelta
from pyruntime.model.hosting.llama_server import LlamaServerConfig
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.support.fixtures import start_llama_server

BRAM, ELDA = conversation_id("Bram/player-1"), conversation_id("Elda/player-1")


def npc(name: str, *turns: str) -> list[dict[str, str]]:
    lines = " ".join(f"{name} remembers event number {i} of the village." for i in range(12))
    messages = [{"role": "system", "content": f"You are {name}. {lines}"}, {"role": "user", "content": "Hello!"}]
    for turn in turns:
        messages += [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": turn}]
    return messages


async def _turn(client: OpenAICompatClient, conversation: str, messages: list[dict[str, str]]) -> Usage:
    async with client.stream_chat(messages, max_tokens=4, temperature=0.0, conversation=conversation) as stream:
        *_, usage = [d.usage async for d in stream if isinstance(d, UsageDelta)]  # the final counts come last
    return usage


def turns(server: LlamaServerProcess, *calls: tuple[str, list[dict[str, str]]]) -> list[Usage]:
    """The calls one after the other through one client, as the orchestrator makes them."""
    async def go() -> list[Usage]:
        client = OpenAICompatClient(**server.client_options())
        try:
            return [await _turn(client, conversation, messages) for conversation, messages in calls]
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_two_npcs_keep_their_own_slots_and_never_evaluate_each_others_prompt(tiny_model_path: Path) -> None:
    server = start_llama_server(tiny_model_path, slots=2, prompt_cache_mb=0)
    try:
        first, _, again = turns(server, (BRAM, npc("Bram")), (ELDA, npc("Elda")), (BRAM, npc("Bram", "Bye")))
        assert server.slots.slot_of(BRAM) != server.slots.slot_of(ELDA)
    finally:
        server.stop()
    assert again.cached_tokens >= first.prompt_tokens - 1  # Bram's slot still held his prompt: no cache needed


@pytest.mark.parametrize("cache_mb", [0, 64])
def test_an_npc_that_lost_its_slot_comes_back_warm_only_with_room_to_park_it(tiny_model_path: Path,
                                                                           cache_mb: int) -> None:
    server = start_llama_server(tiny_model_path, slots=1, prompt_cache_mb=cache_mb)
    try:
        first, _, again = turns(server, (BRAM, npc("Bram")), (ELDA, npc("Elda")), (BRAM, npc("Bram", "Bye")))
        entries = server.cache.entries
    finally:
        server.stop()
    if cache_mb:
        assert again.cached_tokens >= first.prompt_tokens - 1  # Bram's parked state came back
        assert entries >= 1  # Elda's state was parked in turn
    else:
        assert again.cached_tokens < first.prompt_tokens // 2  # Elda's turn replaced it (one slot, no cache)


def test_a_state_superseded_by_a_compaction_never_reaches_the_cache_a_cold_npcs_does(tiny_model_path: Path) -> None:
    server = start_llama_server(tiny_model_path, slots=1, prompt_cache_mb=64)
    long_talk = npc("Bram", *(f"Tell me about event {i} again, slowly and in detail." for i in range(6)))
    compacted = [long_talk[0], {"role": "system", "content": "Summary: they talked about events."},
                 {"role": "user", "content": "And now?"}]
    try:
        turns(server, (BRAM, long_talk), (BRAM, compacted))
        after_compaction = server.cache.entries
        turns(server, (ELDA, npc("Elda")))  # Elda needs the slot: Bram is cold now, his live state is kept
        after_eviction = server.cache.entries
    finally:
        server.stop()
    assert after_compaction == 0  # the pre-compaction state was dropped, not copied into the cache
    assert after_eviction == 1


def test_a_superseded_state_is_erased_even_without_a_disk_prompt_cache(tiny_model_path: Path) -> None:
    # llama-server caches a slot's state when a new prompt keeps less than half of it, and refuses to erase a slot
    # (501) unless it was started with a slot save path: the runtime gives it a private one.
    server = start_llama_server(tiny_model_path, slots=1, prompt_cache_mb=64)
    talk = [{"role": "system", "content": "You are Bram."}] + npc("Bram", *(f"Tell me about event {i}." for i in
                                                                             range(12)))[1:]
    compacted = [talk[0], {"role": "system", "content": "Summary: they talked."}, {"role": "user", "content": "And?"}]
    try:
        turns(server, (BRAM, talk), (BRAM, compacted))
        entries = server.cache.entries
    finally:
        server.stop()
    assert entries == 0


def test_a_negative_cache_size_is_refused(tiny_model_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="prompt_cache_mb"):
        LlamaServerConfig(model_path=tiny_model_path, alias="tiny", prompt_cache_mb=-1)


def _session(model: Path, folder: Path, *calls: tuple[str, list[dict[str, str]]]) -> list[Usage]:
    server = start_llama_server(model, slots=2, prompt_cache_dir=folder)
    try:
        return turns(server, *calls)
    finally:
        server.stop()  # a graceful stop saves the slots


def test_a_restarted_engine_finds_the_npcs_states_in_their_slots(tiny_model_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    [bram, elda] = _session(tiny_model_path, folder, (BRAM, npc("Bram")), (ELDA, npc("Elda")))
    assert sorted(p.name for p in folder.glob("*.slot")) == sorted(f"{c}.slot" for c in (BRAM, ELDA))
    again = _session(tiny_model_path, folder, (BRAM, npc("Bram", "Bye")), (ELDA, npc("Elda", "Bye")))
    assert again[0].cached_tokens >= bram.prompt_tokens - 1 and again[1].cached_tokens >= elda.prompt_tokens - 1


@pytest.mark.parametrize("damage", ["flipped", "truncated", "replaced", "link"])
def test_a_state_file_that_is_not_what_was_saved_is_not_loaded(tiny_model_path: Path, tmp_path: Path,
                                                               damage: str) -> None:
    folder = tmp_path / "cache"
    _session(tiny_model_path, folder, (BRAM, npc("Bram")))
    path = folder / f"{BRAM}.slot"
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "replaced":  # another process's file under the name: even a well-formed one
        path.write_bytes(bytes(data))
        other = tmp_path / "other"
        _session(tiny_model_path, other, (BRAM, npc("Bram", "a different talk")))
        path.write_bytes((other / f"{BRAM}.slot").read_bytes())
    else:
        outside = tmp_path / "outside.bin"
        outside.write_bytes(bytes(data))
        path.unlink()
        path.symlink_to(outside)
    [again] = _session(tiny_model_path, folder, (BRAM, npc("Bram", "Bye")))
    assert again.cached_tokens == 0 and again.prompt_tokens > 0  # answered, from an empty slot
    assert path.exists() and not path.is_symlink()  # this session's state saved in its place
