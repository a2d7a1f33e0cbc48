"""The hosted engine's pure parts: slot affinity, what is read from llama-server's log, the watchdog's rules,
and the checks on saved slot states (real files in tmp; nothing here starts a server)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pyruntime.model.client.parked_states import ParkedStates
from pyruntime.model.client.slots import (
    ANONYMOUS,
    SlotAffinity,
    SlotUse,
    conversation_id,
    kept_fraction,
    prompt_fingerprint,
)
from pyruntime.model.hosting.server_log import (
    STDERR_LINES,
    EngineLog,
    cache_state,
    gpu_failure,
    gpu_missing_in_build,
    offloaded_layers,
)
from pyruntime.model.hosting.slot_store import SlotStateStore
from pyruntime.model.hosting.supervisor import SlotProgress, WatchdogSettings, next_backoff

SYSTEM = {"role": "system", "content": "You are Bram, the blacksmith of Eldham. " * 5}


def chat(*lines: str) -> list[dict[str, str]]:
    return [SYSTEM] + [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def take(slots: SlotAffinity, conversation: str | None, messages: list[dict[str, str]]) -> SlotUse:
    """The slot a request gets (fails the test when every slot is busy)."""
    use = slots.acquire(conversation, messages)
    assert use is not None, "every slot is busy"
    return use


def test_a_conversation_keeps_its_slot_and_a_new_one_takes_the_least_recently_used():
    slots = SlotAffinity(2)
    a, b, c = (conversation_id(k) for k in ("Bram/p1", "Elda/p1", "Tom/p1"))
    first = take(slots, a, chat("hi"))
    slots.release(first)
    second = take(slots, b, chat("hello"))
    slots.release(second)
    assert first.slot != second.slot
    again = take(slots, a, chat("hi", "Hello!", "a sword?"))
    slots.release(again)
    assert again.slot == first.slot and not again.erase_first  # the same conversation, only appended
    third = take(slots, c, chat("hey"))  # two slots, three NPCs: the coldest (b's) is taken
    slots.release(third)
    assert third.slot == second.slot and slots.slot_of(b) is None and slots.slot_of(a) == first.slot


def test_a_busy_slot_is_not_given_to_another_conversation():
    slots = SlotAffinity(2)
    a, b, c = (conversation_id(k) for k in ("a", "b", "c"))
    busy = take(slots, a, chat("x"))  # still running
    idle = take(slots, b, chat("y"))
    slots.release(idle)
    newcomer = take(slots, c, chat("z"))
    assert newcomer.slot == idle.slot != busy.slot
    assert slots.in_flight == 2


def test_a_prompt_that_drops_most_of_the_slots_state_erases_it_first():
    # A compaction replaces the head: llama-server would copy the old state into its host cache, where no
    # request would ever find it again. It is dropped instead.
    slots = SlotAffinity(1)
    a = conversation_id("Bram/p1")
    long_history = chat(*[f"line {i} " * 30 for i in range(8)])
    slots.release(take(slots, a, long_history))
    compacted = [SYSTEM, {"role": "system", "content": "Summary: they haggled."}, {"role": "user", "content": "hi"}]
    use = take(slots, a, compacted)
    assert use.erase_first
    slots.release(use)
    slots.release(follow := take(slots, a, compacted + [{"role": "assistant", "content": "Hm?"}]))
    assert not follow.erase_first


def test_requests_without_a_conversation_share_one_slot():
    slots = SlotAffinity(3)
    one = take(slots, None, [{"role": "system", "content": "writer " * 50}, {"role": "user", "content": "a"}])
    slots.release(one)
    two = take(slots, None, [{"role": "system", "content": "writer " * 50}, {"role": "user", "content": "b"}])
    slots.release(two)
    assert one.slot == two.slot and one.conversation == ANONYMOUS and not two.erase_first


def test_a_slot_changes_hands_with_its_state_parked_and_the_newcomer_brings_back_only_its_own():
    slots = SlotAffinity(1)
    a, b = conversation_id("Bram/p1"), conversation_id("Bram/p2")  # two players, the same NPC and prompt
    first = take(slots, a, chat("hi"))
    assert first.arrived and first.park is None and not first.restore  # an empty slot: nothing to reuse
    slots.release(first)
    twin = take(slots, b, chat("hi"))  # byte-identical prompt: still b's slot starts afresh, a's state is parked
    assert twin.arrived and twin.park == a and not twin.restore and slots.is_parked(a)
    slots.release(twin)
    slots.release(take(slots, b, chat("hi", *[f"line {i} " * 30 for i in range(8)])))
    back = take(slots, a, chat("hi", "Hello!", "a sword?"))
    assert back.park == b and back.restore and not slots.is_parked(a)  # its own parked state, restored
    slots.release(back)
    folded = take(slots, b, [SYSTEM, {"role": "system", "content": "Summary. " * 80},
                               {"role": "user", "content": "x"}])
    assert folded.arrived and not folded.restore  # what it parked keeps less than half of the new prompt: dropped


def test_a_newcomer_waits_while_every_slot_is_busy_and_a_deleted_conversation_leaves_its_slots():
    slots = SlotAffinity(1)
    a, b = conversation_id("a"), conversation_id("b")
    running = slots.acquire(a, chat("x"))
    assert running is not None and slots.acquire(b, chat("y")) is None  # a busy slot never changes hands
    slots.release(running)
    failed = slots.acquire(a, chat("x", "y", "z"))
    assert failed is not None
    slots.forget(failed.slot)  # a failed request: the slot is nobody's, but its last request was a's
    slots.release(failed)
    assert slots.forget_conversation(a) == [failed.slot] and slots.forget_conversation(a) == []


def test_parked_states_stay_within_their_budget_and_only_their_own_files_are_removed(tmp_path: Path):
    a, b, c = (conversation_id(k) for k in "abc")
    parked = ParkedStates(tmp_path, 250)
    for conversation in (a, b):
        (tmp_path / parked.prepare(conversation)).write_bytes(b"x" * 100)
        assert parked.record(conversation, 100) == []
    (tmp_path / parked.prepare(c)).write_bytes(b"x" * 100)
    assert parked.record(c, 100) == [a]  # the oldest makes room
    assert not (tmp_path / f"{a}.parked").exists() and parked.entries == 2 and parked.used_bytes == 200
    assert parked.claim(b) == f"{b}.parked" and parked.claim(b) is None  # claimed: out of the budget
    (tmp_path / f"{a}.slot").write_bytes(b"restart-warm state")
    (tmp_path / "notes.txt").write_text("the game's")
    parked.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{a}.slot", "notes.txt"])
    with pytest.raises(ValueError):
        parked.file_name("../escape")


def test_kept_fraction_counts_the_characters_before_the_first_difference():
    old = prompt_fingerprint(chat("a" * 100, "b" * 100))
    assert kept_fraction(old, prompt_fingerprint(chat("a" * 100, "b" * 100, "c"))) == 1.0
    assert kept_fraction(old, prompt_fingerprint(chat("z" * 100))) < 0.5
    # Within a message too: what llama-server keeps ends at the first token that differs, not at the message.
    assert 0.75 < kept_fraction(old, prompt_fingerprint(chat("a" * 100, "b" * 90 + "c" * 10))) < 1.0
    assert kept_fraction((), prompt_fingerprint(chat("x"))) == 1.0
    assert conversation_id("x") == conversation_id("x") != conversation_id("y") and "x" not in conversation_id("x")


def test_a_fold_that_appends_to_the_summary_keeps_the_slots_state():
    # The state up to the summary's new lines is what the fold's prewarm reuses: erasing it (as when only whole
    # messages counted, the system prompt alone) made every fold evaluate the whole prompt again.
    slots = SlotAffinity(1)
    a = conversation_id("Bram/p1")
    summary = "## Conversation Summary\n" + "".join(f"- player said thing {i} about the road\n" for i in range(20))
    before = [SYSTEM, {"role": "system", "content": summary}, *chat("x" * 60, "y" * 60, "z" * 60)[1:]]
    slots.release(take(slots, a, before))
    folded = [SYSTEM, {"role": "system", "content": summary + "- player said x\n- smith said y\n"},
              {"role": "user", "content": "z" * 60}]
    use = take(slots, a, folded)
    assert not use.erase_first
    slots.release(use)


def test_what_is_read_from_llama_servers_log():
    line = "srv     update:  - cache state: 3 prompts, 61.250 MiB (limits: 256.000 MiB, 8192 tokens, 11000 est)"
    state = cache_state(line)
    assert state is not None and state.entries == 3
    assert state.used_bytes == int(61.25 * 2**20) and state.limit_bytes == 256 * 2**20
    assert cache_state("srv  log_server_r: request: POST /v1/chat/completions 200") is None
    assert offloaded_layers("load_tensors: offloaded 31/31 layers to GPU") == (31, 31)
    assert gpu_missing_in_build("warning: no usable GPU found, --gpu-layers option will be ignored")
    assert "memory" in str(gpu_failure("ggml_backend_cuda_buffer_type_alloc_buffer: cudaMalloc failed: out of memory"))
    assert "driver" in str(gpu_failure("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected"))
    assert gpu_failure("main: server is listening on engine.sock") is None


def test_an_engine_log_keeps_the_facts_and_the_last_lines_and_forgets_them_for_a_new_child():
    log = EngineLog(256 << 20)
    assert log.cache.limit_bytes == 256 << 20 and log.last_words() == "no output"
    log.feed("load_tensors: offloaded 20/31 layers to GPU")
    log.feed("srv     update:  - cache state: 2 prompts, 8.000 MiB (limits: 256.000 MiB, 8192 tokens, 11000 est)")
    log.feed("ggml_backend_cuda_buffer_type_alloc_buffer: cudaMalloc failed: out of memory")
    log.feed("main: exiting")
    assert log.offloaded == (20, 31) and log.cache.entries == 2 and log.cache.used_bytes == 8 << 20
    assert log.gpu_failure == "not enough GPU memory for the requested layers" and not log.no_gpu_backend
    # The cache line is one per request: it is not kept in the tail; an error line is the child's last words.
    assert not any("cache state" in line for line in log.recent())
    assert "cudaMalloc failed" in log.last_words()
    for i in range(STDERR_LINES + 5):
        log.feed(f"line {i}")
    assert len(log.recent()) == STDERR_LINES and log.recent()[-1] == f"line {STDERR_LINES + 4}"
    log.reset(128 << 20)
    assert log.recent() == [] and log.offloaded is None and log.gpu_failure is None
    assert log.cache.limit_bytes == 128 << 20 and log.cache.entries == 0


def test_the_watchdog_sees_a_slot_that_makes_no_progress_and_backs_off_when_starts_fail():
    progress = SlotProgress()
    busy: list[dict[str, Any]] = [{"id": 0, "is_processing": True, "id_task": 7, "n_prompt_tokens_processed": 10,
                                   "next_token": [{"n_decoded": 3}]}, {"id": 1, "is_processing": False}]
    assert progress.update(busy, now=100.0) == 0.0
    assert progress.update(busy, now=130.0) == 30.0  # the same counters for 30 s
    moved = [dict(busy[0], next_token=[{"n_decoded": 4}])]
    assert progress.update(moved, now=131.0) == 0.0  # one more token: progress
    assert progress.update([], now=500.0) == 0.0  # nothing busy: nothing stuck
    settings = WatchdogSettings(first_backoff_s=1, max_backoff_s=8)
    waits: list[float | None] = [None]
    for _ in range(5):
        waits.append(next_backoff(waits[-1], settings))
    assert waits[1:] == [1, 2, 4, 8, 8]
    with pytest.raises(ValueError):
        WatchdogSettings(first_backoff_s=5, max_backoff_s=1)


def _saved(store: SlotStateStore, conversation: str, payload: bytes) -> None:
    name = store.prepare(conversation)
    (store.folder / name).write_bytes(payload)  # what llama-server's slot save writes


def test_only_state_files_the_store_recorded_are_restored(tmp_path: Path):
    store = SlotStateStore(tmp_path / "cache", "identity-1")
    a, b = conversation_id("a"), conversation_id("b")
    _saved(store, a, b"state of a")
    _saved(store, b, b"state of b")
    assert [e.conversation for e in store.record([b, a])] == [b, a]  # most recent first
    assert [e.conversation for e in store.restorable(4)] == [b, a]
    assert [e.conversation for e in store.restorable(1)] == [b]
    assert (store.folder / store.file_name(a)).exists() is False  # past the limit: removed
    # Another process replaces b's file: it no longer matches what was recorded and is not loaded.
    (store.folder / store.file_name(b)).write_bytes(b"planted")
    assert store.restorable(4) == []
    assert not (store.folder / store.file_name(b)).exists()


def test_a_link_in_place_of_a_state_is_never_followed(tmp_path: Path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"secret")
    store = SlotStateStore(tmp_path / "cache", "identity-1")
    a = conversation_id("a")
    _saved(store, a, b"state of a")
    store.record([a])
    target = store.folder / store.file_name(a)
    target.unlink()
    os.symlink(outside, target)
    assert store.restorable(4) == []
    assert outside.read_bytes() == b"secret"
    os.symlink(outside, store.folder / store.file_name(conversation_id("c")))
    store.prepare(conversation_id("c"))  # before a save: the link is removed, the file behind it untouched
    assert not (store.folder / store.file_name(conversation_id("c"))).is_symlink() and outside.exists()


def test_states_of_another_model_or_engine_are_not_loaded_and_foreign_files_are_left_alone(tmp_path: Path):
    folder = tmp_path / "cache"
    first = SlotStateStore(folder, "identity-1")
    a = conversation_id("a")
    _saved(first, a, b"state")
    first.record([a])
    (folder / "tail-anchors.json").write_text("{}")
    (folder / "notes.txt").write_text("mine")
    assert SlotStateStore(folder, "identity-2").restorable(4) == []
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "slots.json", "tail-anchors.json"]
    (folder / "slots.json").write_text("{not json")
    assert SlotStateStore(folder, "identity-1").restorable(4) == []
    with pytest.raises(ValueError):
        first.file_name("../escape")
