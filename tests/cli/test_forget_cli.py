"""`coreai-runtime forget`: one player's every save erased from the files, with what an engine left of them there.

Without a runtime the command works on the files (the in-process transport, the same MemoryStore service): every
save of the tenant + user (all sessions, topics, roles and actors), the history copies quarantine kept, the identity
index entries and lock files, and the engine's states of those conversations left in the data folder (restart-warm
and parked states, the slot index's entries, the tail places). Another player's saves, and files that are not the
runtime's, stay.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from pyruntime.memory.state import AgentMemoryState
from pyruntime.model.client.slots import conversation_id
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.stores.engine_files import ENGINE_STATES_RELATIVE_PATH, PROMPT_CACHE_RELATIVE_PATH
from tests.cli.conftest import file_bundle

ALICE = [AgentMemoryScope("t", "alice", "s1"), AgentMemoryScope("t", "alice", "s2", "quest")]
BOB = AgentMemoryScope("t", "bob", "s1")


def _met(who: str, state: AgentMemoryState) -> AgentMemoryState:
    return state.evolve(memory=f"met {who}")


def seed(data_dir: Path) -> list[str]:
    """Saves of Alice (two sessions, a role with and one without an actor) and Bob; returns Alice's keys."""
    bundle = file_bundle(data_dir)
    keys = []
    for scope in [*ALICE, BOB]:
        for role, actor in (("Smith", None), ("Guard", "guard-7")):
            view = bundle.scoped(scope, actor)
            who = f"{scope.user_id}-{role}"
            view.append_chat_message(role, "user", f"I am {who}")
            view.save_summary(role, f"- {who} came by")
            view.mutate(role, partial(_met, who))
            if scope.user_id == "alice":
                keys.append(view.key(role))
    return keys


def engine_leftovers(data_dir: Path, keys: list[str]) -> None:
    """What a stopped or crashed runtime's engine leaves of conversations under the data folder."""
    digests = [conversation_id(k) for k in keys] + [conversation_id("Bob's conversation")]
    cache, states = data_dir / PROMPT_CACHE_RELATIVE_PATH, data_dir / ENGINE_STATES_RELATIVE_PATH
    for folder in (cache, states):
        folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for digest in digests:
        (cache / f"{digest}.slot").write_bytes(b"state " + digest.encode())
        (states / f"{digest}.parked").write_bytes(b"state " + digest.encode())
        entries.append({"conversation": digest, "file": f"{digest}.slot", "bytes": 1, "sha256": "0" * 64,
                        "saved_at": 1.0})
    (cache / "slots.json").write_text(json.dumps({"format": 1, "identity": "engine-x", "entries": entries}))
    rows = [[d, "sha256:" + "0" * 64, 1, [], 0] for d in digests]
    (cache / "tail-anchors.json").write_text(json.dumps({"format": 2, "anchors": rows}))


def test_forget_erases_every_save_of_the_player_and_the_engine_states_left_of_them(tmp_path: Path, cli) -> None:
    keys = seed(tmp_path)
    engine_leftovers(tmp_path, keys)
    quarantine = tmp_path / "CoreAI" / "Quarantine"
    quarantine.mkdir()
    aside = quarantine / f"{keys[0]}.20261206T120000Z.history.jsonl"
    aside.write_text('{"k":0,"r":"user","c":"I am alice-Smith"}\n')
    run = cli("forget", "--data-dir", tmp_path, "--tenant", "t", "--user", "alice")
    assert run.rc == 0, run.err
    assert run.json() == {"Success": True, "SavesErased": 4, "UnattributedSaves": 0}
    everything = b"".join(p.read_bytes() + str(p).encode() for p in tmp_path.rglob("*") if p.is_file())
    for key in keys:
        assert key.encode() not in everything and conversation_id(key)[:16].encode() not in everything
    assert b"alice" not in everything  # her ids, her lines, her summaries, her memory
    assert b"I am bob-Smith" in everything and b"met bob-Guard" in everything  # Bob's stay
    bob = conversation_id("Bob's conversation")
    index = json.loads((tmp_path / PROMPT_CACHE_RELATIVE_PATH / "slots.json").read_text())
    assert index["identity"] == "engine-x" and [e["conversation"] for e in index["entries"]] == [bob]
    assert (tmp_path / ENGINE_STATES_RELATIVE_PATH / f"{bob}.parked").exists()
    again = cli("forget", "--data-dir", tmp_path, "--tenant", "t", "--user", "alice")
    assert again.json()["SavesErased"] == 0  # nothing of her is left to find


def test_forget_counts_the_saves_it_cannot_attribute_and_needs_a_user(tmp_path: Path, cli) -> None:
    seed(tmp_path)
    legacy = tmp_path / "CoreAI" / "AgentMemory" / f"{storage_key('Smith', AgentMemoryScope('t', 'old'))}.json"
    legacy.write_bytes((tmp_path / "CoreAI" / "AgentMemory").glob("scope-v1-*.json").__next__().read_bytes())
    run = cli("forget", "--data-dir", tmp_path, "--tenant", "t", "--user", "alice")
    assert run.json()["UnattributedSaves"] == 1 and "cannot be attributed" in run.err
    assert legacy.exists()  # maybe anyone's: left alone, and said so
    blank = cli("forget", "--data-dir", tmp_path, "--user", "  ")
    assert blank.rc == 2 and blank.out == ""  # refused: nothing erased


def test_forget_narrowed_to_a_session_erases_that_save_slot_only(tmp_path: Path, cli) -> None:
    seed(tmp_path)
    run = cli("forget", "--data-dir", tmp_path, "--tenant", "t", "--user", "alice", "--session", "s2")
    assert run.rc == 0 and run.json()["SavesErased"] == 2
    bundle = file_bundle(tmp_path)
    assert bundle.scoped(ALICE[0]).try_load("Smith").state is not None  # session s1 stays
    assert bundle.scoped(ALICE[1]).try_load("Smith").state is None
