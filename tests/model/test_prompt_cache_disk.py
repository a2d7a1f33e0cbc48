"""The prompt cache on disk (issue 13): a restarted tiny llama.cpp server finds an NPC's prompt warm, and corrupt,
truncated or foreign state files are removed without ever reaching llama.cpp."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.model.llama_server import LlamaServerConfig
from pyruntime.model.prompt_store import PromptStateStore, model_identity
from pyruntime.model.types import Usage
from tests.model.test_prompt_cache import stream_usage
from tests.support.fixtures import start_llama_server

BRAM = [{"role": "system", "content": "You are Bram. " + " ".join(f"Bram remembers event {i}." for i in range(12))},
        {"role": "user", "content": "Hello!"}]
LATER = [*BRAM, {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Bye"}]


def _session(model: Path, folder: Path, *conversations: list[dict[str, str]]) -> list[Usage]:
    """A fresh server with the disk cache: one request per conversation, then a graceful stop."""
    server = start_llama_server(model, prompt_cache_mb=16, prompt_cache_dir=folder, n_threads=1)
    try:
        return [asyncio.run(stream_usage(server.base_url, c)) for c in conversations]
    finally:
        server.stop()


def _state_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.state"))


def test_a_restarted_server_finds_the_npcs_prompt_on_disk(tiny_model_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "prompt-cache"
    [first] = _session(tiny_model_path, folder, BRAM)
    assert first.cached_tokens == 0 and len(_state_files(folder)) == 1
    [again] = _session(tiny_model_path, folder, LATER)  # a new process: only the disk can have kept it
    assert again.cached_tokens >= first.prompt_tokens - 1
    # Issue 13's target: no more than 1.5x what a warm server evaluates (the lines new since the last turn).
    warm = again.prompt_tokens - first.prompt_tokens
    assert 0 < again.prompt_tokens - again.cached_tokens <= 1.5 * warm
    [cold] = _session(tiny_model_path, tmp_path / "elsewhere", LATER)  # the same turn without the disk copy
    assert cold.cached_tokens == 0


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign"])
def test_a_damaged_state_file_is_removed_and_the_turn_runs_cold(tiny_model_path: Path, tmp_path: Path,
                                                                damage: str) -> None:
    folder = tmp_path / "prompt-cache"
    _session(tiny_model_path, folder, BRAM)
    [path] = _state_files(folder)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF  # inside the llama.cpp state: only the checksum can tell
    elif damage == "truncate":
        del data[len(data) // 2:]
    else:
        data[12:44] = bytes(32)  # another model's identity
    path.write_bytes(bytes(data))
    [again] = _session(tiny_model_path, folder, LATER)
    assert again.cached_tokens == 0 and again.prompt_tokens > 0  # answered, from an empty KV cache
    assert not path.exists() and len(_state_files(folder)) == 1  # removed; this turn's state saved instead


def test_store_round_trip_index_order_and_what_it_never_removes(tiny_model_path: Path, tmp_path: Path) -> None:
    identity = model_identity(tiny_model_path, 2048, "0.3.36")
    assert identity != model_identity(tiny_model_path, 1024, "0.3.36") != model_identity(tiny_model_path, 2048, "x")
    other = PromptStateStore(tmp_path, model_identity(tiny_model_path, 1024, "0.3.36"))
    other.write((5, 6), np.array([5, 6]), np.ones((1, 4)), 2, b"old", 1)
    (tmp_path / "notes.txt").write_text("the user's file")
    (other.folder / "keep.me").write_text("not ours")
    store = PromptStateStore(tmp_path, identity)
    store.write((1, 2, 3), np.array([1, 2, 3]), np.full((1, 4), 0.5), 3, b"kv-bytes", 7)
    store.write((9,), np.array([9]), np.zeros((1, 4)), 1, b"x" * 10, 2)
    (store.folder / f"{'0' * 40}.state.99.tmp").write_bytes(b"half")  # a write cut short
    index = store.index()
    assert [(e.key, e.llama_state_size) for e in index] == [((1, 2, 3), 8), ((9,), 10)]
    assert not list(store.folder.glob("*.tmp"))
    assert other.folder.exists() and (tmp_path / "notes.txt").exists()  # a folder with foreign files is kept
    state = store.read(index[0].path, (1, 2, 3))
    assert state is not None and state.llama_state == b"kv-bytes" and state.n_tokens == 3 and state.seed == 7
    assert state.scores.shape == (1, 4) and state.input_ids.tolist() == [1, 2, 3]
    assert store.read(index[0].path, (1, 2)) is None and not index[0].path.exists()  # not the key it claims
    store.remove((9,))
    assert store.index() == []
    (other.folder / "keep.me").unlink()
    PromptStateStore(tmp_path, identity).index()
    assert not other.folder.exists()  # only our files in it: another model's states, removed


def test_a_cache_folder_needs_a_budget(tiny_model_path: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="budget"):
        LlamaServerConfig(model_path=tiny_model_path, alias="tiny", prompt_cache_dir=tmp_path)
    config = LlamaServerConfig(model_path=tiny_model_path, alias="tiny", prompt_cache_mb=4, prompt_cache_dir=tmp_path)
    assert LlamaServerConfig.from_json(config.to_json()) == config


def test_the_disk_holds_what_the_cache_holds_and_a_new_cache_loads_it_on_demand(tmp_path: Path) -> None:
    from llama_cpp.llama import LlamaState

    from pyruntime.model.prompt_cache import NpcPromptCache

    def state(tokens: tuple[int, ...], size: int) -> LlamaState:
        return LlamaState(np.array(tokens, dtype=np.intc), np.ones((512, 8), dtype=np.single), len(tokens),
                          bytes([len(tokens)]) * size, size, 0)

    store = PromptStateStore(tmp_path, bytes(range(32)))
    cache = NpcPromptCache(capacity_bytes=1000, store=store)
    cache[(1, 2, 3)] = state((1, 2, 3), 400)
    cache[(7, 8)] = state((7, 8), 400)
    cache[(1, 2, 3, 4)] = state((1, 2, 3, 4), 400)  # drops its own prefix (1, 2, 3)
    cache[(9,)] = state((9,), 400)  # over budget: (7, 8) goes, least recently used
    cache.flush()
    assert sorted(e.key for e in store.index()) == [(1, 2, 3, 4), (9,)]
    assert cache.used_bytes == 800

    restarted = NpcPromptCache(capacity_bytes=1000, store=store)
    assert restarted.used_bytes == 800 and restarted.entries == 2  # indexed, nothing loaded yet
    loaded = restarted[(1, 2, 3, 4, 5)]
    assert loaded.llama_state == bytes([4]) * 400 and loaded.scores.shape == (1, 8) and loaded.n_tokens == 4
    path = store.path_of((9,))
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 0xFF  # its checksum no longer matches
    path.write_bytes(bytes(damaged))
    with pytest.raises(KeyError):
        restarted[(9, 10)]  # the only entry with that prefix was corrupt: a miss, and the file is gone
    assert not path.exists() and restarted.entries == 1 and restarted.used_bytes == 400

    smaller = NpcPromptCache(capacity_bytes=500, store=store)  # a lower budget than the files hold
    assert smaller.used_bytes <= 500
