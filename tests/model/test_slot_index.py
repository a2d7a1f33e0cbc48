"""A planted prompt-cache index (`slots.json`) never stops `serve`: whatever a hostile local process writes there,
the runtime starts, hosts its model and says in one warning that the index was ignored (what is wrong, never what
it holds); the next stop that saves a slot writes a good index over it.

The planted index carries the right engine identity (a process that can write the folder can read the old index or
compute it), so every shape reaches the entries; the well-formed entry of a missing file proves it does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pyruntime.client import RuntimeClient
from pyruntime.model.hosting.gguf_info import read_gguf_info
from pyruntime.model.hosting.llama_server import effective_n_ctx, find_llama_server
from pyruntime.model.hosting.slot_store import INDEX_NAME, SlotStateStore, engine_identity
from pyruntime.net.auth import read_token_file
from pyruntime.stores.engine_files import PROMPT_CACHE_RELATIVE_PATH
from tests.model.test_serve_cli import own_copy, serve_with_model
from tests.unity_layer.processes import wait_for

CONVERSATION = "ab" * 32
WELL_FORMED = {"conversation": CONVERSATION, "file": f"{CONVERSATION}.slot", "bytes": 10, "sha256": "cd" * 32,
               "saved_at": 1.5}


def _entry(**raw: str) -> str:
    """One entry as JSON text, with some fields replaced by raw JSON (numbers json.dumps cannot write)."""
    fields = {name: json.dumps(value) for name, value in WELL_FORMED.items()} | raw
    return "{" + ", ".join(f'"{name}": {value}' for name, value in fields.items()) + "}"


def _index(identity: str, entries: str) -> bytes:
    return f'{{"format": 1, "identity": "{identity}", "entries": {entries}}}'.encode()


# name -> the planted file (the identity filled in); each one stopped serve from starting before.
HOSTILE = {
    "nested 200,000 deep": lambda identity: b"[" * 200_000,
    "entries a number": lambda identity: _index(identity, "5"),
    "entries true": lambda identity: _index(identity, "true"),
    "bytes 1e400": lambda identity: _index(identity, f"[{_entry(bytes='1e400')}]"),
    "saved_at of 400 digits": lambda identity: _index(identity, f"[{_entry(saved_at='9' * 400)}]"),
}
# ... and shapes that were skipped before and must still be.
ALSO_IGNORED = {
    "an entry that is a number": lambda identity: _index(identity, "[5]"),
    "bytes a string": lambda identity: _index(identity, f'[{_entry(bytes=json.dumps("10"))}]'),
    "saved_at NaN": lambda identity: _index(identity, f"[{_entry(saved_at='NaN')}]"),
    "not UTF-8": lambda identity: b"\xff\xfe\x00[{",
    "a file of another conversation":
        lambda identity: _index(identity, f'[{_entry(file=json.dumps("ef" * 32 + ".slot"))}]'),
}


def _identity(model: Path) -> str:
    """The identity serve computes for its engine (default context, the same llama-server binary)."""
    n_ctx = effective_n_ctx(None, read_gguf_info(model).context_length)
    return engine_identity(model, n_ctx, find_llama_server())


def _serve_with_planted_index(tmp_path: Path, model: Path, planted: bytes) -> str:
    """Start serve (its disk prompt cache on) with `planted` as the index; the log once the model answered."""
    copy = own_copy(tmp_path, model)
    folder = tmp_path / "data" / PROMPT_CACHE_RELATIVE_PATH
    folder.mkdir(parents=True)
    (folder / INDEX_NAME).write_bytes(planted.replace(b"{identity}", _identity(copy).encode()))
    serve, _ = serve_with_model(tmp_path, model, "--prompt-cache-dir")
    try:
        ready = serve.ready()
        token = read_token_file(Path(ready["token_file"]))
        with RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}", token=token, timeout=30) as client:
            wait_for(lambda: client.health().model_ready, 60, "the model to be ready")
    finally:
        code = serve.stop()
    assert code == 0, serve.err
    return serve.err


@pytest.mark.parametrize("name", HOSTILE)
def test_serve_starts_with_a_planted_index_and_says_it_was_ignored(tiny_model_path: Path, tmp_path: Path,
                                                                   name: str) -> None:
    err = _serve_with_planted_index(tmp_path, tiny_model_path, HOSTILE[name]("{identity}"))
    assert "Traceback" not in err
    [warning] = [line for line in err.splitlines() if "slot state" in line]
    assert f"the index {INDEX_NAME} is not one this runtime wrote" in warning
    assert CONVERSATION not in warning and "1e400" not in warning and "999" not in warning  # what, not the value


def test_a_well_formed_index_reaches_its_entries(tiny_model_path: Path, tmp_path: Path) -> None:
    # The control: the planted identity is the engine's, so the entry is checked (its file is missing).
    err = _serve_with_planted_index(tmp_path, tiny_model_path, _index("{identity}", f"[{_entry()}]"))
    assert "slot state: a file does not match what was saved; not loaded" in err
    assert "not one this runtime wrote" not in err


@pytest.mark.parametrize("name", [*HOSTILE, *ALSO_IGNORED])
def test_the_store_ignores_every_planted_index(tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture) -> None:
    store = SlotStateStore(tmp_path, "engine")
    (tmp_path / INDEX_NAME).write_bytes({**HOSTILE, **ALSO_IGNORED}[name]("engine"))
    (tmp_path / f"{CONVERSATION}.slot").write_bytes(b"0123456789")
    assert store.restorable(4) == []
    assert "is not one this runtime wrote" in caplog.text
    assert not (tmp_path / f"{CONVERSATION}.slot").exists()  # an unvouched file of ours is removed


@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "oversized"])
def test_an_index_that_is_not_a_small_regular_file_is_ignored(tmp_path: Path, kind: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    store = SlotStateStore(tmp_path / "cache", "engine")
    outside = tmp_path / "outside.json"
    outside.write_bytes(_index("engine", f"[{_entry()}]"))
    index = store.folder / INDEX_NAME
    if kind == "link":
        index.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(index)
    elif kind == "folder":
        index.mkdir()
    else:
        index.write_bytes(b" " * (2 << 20))
    assert store.restorable(4) == []  # never opened through the link, never blocked on the FIFO
    assert "the index" in caplog.text and "it is ignored" in caplog.text
    assert outside.read_bytes() == _index("engine", f"[{_entry()}]")
