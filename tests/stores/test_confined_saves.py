"""Issue 22: saves stay inside the data folder. Links, FIFOs, devices and oversized files in place of saves
are refused with a clear error, without blocking, and without reading or writing one byte outside the folder;
an unreadable history is kept aside, never overwritten. Real files, bounded: every call that could block runs in
a thread joined with a deadline."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pyruntime.errors import LimitExceededError, MemoryUnreadableError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, confined, open_stores
from pyruntime.stores.base import LoadStatus, chat_row
from pyruntime.stores.confined import SaveLimits
from pyruntime.stores.file_layout import encode_history_rows, parse_history
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore
from pyruntime.stores.identity_index import IdentityIndex
from tests.support.hostile_files import SECRET, make_outside, outside_state, plant

KEY = "Teacher"
DEADLINE_S = 20.0  # a call that blocks on a FIFO never returns; a refused one returns at once


@pytest.fixture(params=["dir_fd", "by_path"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with folders walked by descriptor (POSIX) and with the by-path checks (Windows' way)."""
    if request.param == "by_path":
        monkeypatch.setattr(confined, "USE_DIR_FD", False)
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path, walk: str) -> Path:
    return tmp_path / "data" / "CoreAI"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return make_outside(tmp_path)


def within(call: Callable[[], Any]) -> Any:
    """call() in a thread, which must end within DEADLINE_S (a FIFO opened for reading blocks forever)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the call blocked"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def refused(call: Callable[[], Any], *words: str) -> str:
    """The MemoryUnreadableError message of call (ended in time), which names each of words."""
    with pytest.raises(MemoryUnreadableError) as info:
        within(call)
    message = str(info.value)
    for word in words:
        assert word in message
    assert "outside secret" not in message and "elsewhere" not in message
    return message


KINDS = ["link", "dangling-link", "fifo", "device", "socket"]
WORDS = {"link": "link", "dangling-link": "link", "fifo": "FIFO", "device": "", "socket": "socket"}


# -- memory documents -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_memory_document_that_is_not_a_regular_file_is_refused_unopened(root, outside, kind):
    store = FileAgentMemoryStore(root)
    store.append_chat_message("Other", "user", "fine")
    plant(store.memory_path(KEY), kind, outside)
    before = outside_state(outside)
    loaded = within(lambda: store.try_load(KEY))
    assert loaded.status is LoadStatus.FAILED and WORDS[kind] in loaded.reason
    assert "outside secret" not in loaded.reason
    refused(lambda: store.mutate(KEY, lambda s: s.evolve(memory="x")), WORDS[kind])
    assert outside_state(outside) == before
    assert [m.content for m in within(lambda: store.get_chat_history("Other"))] == ["fine"]
    # Clear removes the entry itself (never its target); then the save works again.
    within(lambda: store.clear(KEY))
    assert not os.path.lexists(store.memory_path(KEY))
    assert store.mutate(KEY, lambda s: s.evolve(memory="fresh")).memory == "fresh"
    assert outside_state(outside) == before


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_save_replaces_a_hostile_entry_without_writing_through_it(root, outside, kind):
    store = FileAgentMemoryStore(root)
    plant(store.memory_path(KEY), kind, outside)
    before = outside_state(outside)
    within(lambda: store.save(KEY, AgentMemoryState(memory="healed")))
    assert stat.S_ISREG(os.lstat(store.memory_path(KEY)).st_mode)
    assert store.try_load(KEY).state.memory == "healed"
    assert outside_state(outside) == before


def test_a_linked_save_folder_is_refused_and_nothing_is_created_outside(root, outside):
    root.mkdir(parents=True)
    (root / "AgentMemory").symlink_to(outside, target_is_directory=True)
    (outside / "Teacher.json").write_bytes(SECRET)
    before = outside_state(outside)
    store = FileAgentMemoryStore(root)
    assert "link" in store.try_load(KEY).reason
    refused(lambda: store.append_chat_message(KEY, "user", "hi"), "link")
    refused(lambda: store.save(KEY, AgentMemoryState(memory="x")), "link")
    refused(lambda: store.get_chat_history(KEY), "link")
    assert outside_state(outside) == before


def test_an_oversized_memory_document_is_refused_from_its_size_never_read(root):
    store = FileAgentMemoryStore(root)
    path = store.memory_path(KEY)
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        f.truncate(10 * 1024**3)  # a sparse 10 GB file: reading it whole would exhaust memory
    loaded = within(lambda: store.try_load(KEY))
    assert loaded.status is LoadStatus.FAILED and "over its limit" in loaded.reason
    refused(lambda: store.mutate(KEY, lambda s: s.evolve(memory="x")), "over its limit")
    assert path.stat().st_size == 10 * 1024**3  # left alone


def test_a_write_over_the_limit_is_refused_and_the_save_stays_readable(root):
    limits = SaveLimits(memory_document=4096)
    store = FileAgentMemoryStore(root, limits=limits)
    store.mutate(KEY, lambda s: s.evolve(memory="small"))
    before = store.memory_path(KEY).read_bytes()
    with pytest.raises(LimitExceededError, match="over its limit of 4096 bytes"):
        store.mutate(KEY, lambda s: s.evolve(memory="y" * 5000))
    with pytest.raises(LimitExceededError):
        store.save(KEY, AgentMemoryState(memory="y" * 5000))
    assert store.memory_path(KEY).read_bytes() == before
    assert store.try_load(KEY).state.memory == "small"


# -- chat history ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_history_file_that_is_not_a_regular_file_is_refused_and_never_written_through(root, outside, kind):
    (outside / "victim.json").write_bytes(encode_history_rows([chat_row("user", "outside secret")]))
    store = FileAgentMemoryStore(root)
    plant(store.history_path(KEY), kind, outside)
    before = outside_state(outside)
    refused(lambda: store.get_chat_history(KEY), WORDS[kind])
    refused(lambda: store.get_transcript(KEY), WORDS[kind])
    refused(lambda: store.append_chat_message(KEY, "user", "player line"), WORDS[kind])
    assert outside_state(outside) == before  # nothing appended, the dangling link's target not created
    within(lambda: store.clear_chat_history(KEY))  # removes the entry, not its target
    store.append_chat_message(KEY, "user", "works again")
    assert [m.content for m in store.get_chat_history(KEY)] == ["works again"]
    assert outside_state(outside) == before


def test_an_oversized_history_is_refused_and_an_append_never_makes_one(root):
    limits = SaveLimits(history=4096)
    store = FileAgentMemoryStore(root, limits=limits, transcript_cap=10_000, chat_cap=10_000)
    with pytest.raises(LimitExceededError, match="over its limit"):
        store.append_chat_message(KEY, "user", "x" * 5000)
    assert not store.history_path(KEY).exists()
    for i in range(30):
        store.append_chat_message(KEY, "user", f"line {i} " + "x" * 60)
    with pytest.raises(LimitExceededError):
        for i in range(30, 200):
            store.append_chat_message(KEY, "user", f"line {i} " + "x" * 60)
    assert store.history_path(KEY).stat().st_size <= 4096
    assert len(FileAgentMemoryStore(root, limits=limits).get_chat_history(KEY)) >= 30
    with store.history_path(KEY).open("ab") as f:
        f.write(b"z" * 5000)
    refused(lambda: FileAgentMemoryStore(root, limits=limits).get_chat_history(KEY), "over its limit")


def test_a_full_history_trims_old_rows_to_stay_under_its_limit(root):
    # Rows that have left both windows go first: the limit only refuses what the windows still hold.
    limits = SaveLimits(history=8192)
    store = FileAgentMemoryStore(root, limits=limits, chat_cap=20, transcript_cap=20)
    for i in range(300):
        store.append_chat_message(KEY, "user", f"line {i} " + "x" * 100)
    assert store.history_path(KEY).stat().st_size <= 8192
    assert [m.content.split()[1] for m in store.get_chat_history(KEY)] == [str(i) for i in range(280, 300)]


def history_bytes(*rows: bytes) -> bytes:
    return b"".join(rows)


GOOD_1 = encode_history_rows([chat_row("user", "I am Alex")])
GOOD_2 = encode_history_rows([chat_row("assistant", "Hello Alex")])
BAD = b'{"k":0,"r":"user","c":"my sword is call\xff\xfe broken\n'


def test_a_history_with_unreadable_lines_is_kept_aside_before_it_is_rewritten(root):
    store = FileAgentMemoryStore(root)
    path = store.history_path(KEY)
    path.parent.mkdir(parents=True)
    original = GOOD_1 + BAD + GOOD_2
    path.write_bytes(original)
    assert [m.content for m in store.get_chat_history(KEY)] == ["I am Alex", "Hello Alex"]
    status = store.history_status(KEY)
    assert status.unreadable_lines == 1 and status.quarantine_file == ""
    store.append_chat_message(KEY, "user", "new line")
    status = store.history_status(KEY)
    assert status.quarantine_file.startswith("Quarantine/Teacher.") and status.quarantine_file.endswith(".history.jsonl")
    assert (root / status.quarantine_file).read_bytes() == original  # every byte the player wrote
    assert status.unreadable_lines == 0
    rows = parse_history(path.read_bytes())
    assert rows.skipped == 0 and [r.content for r in rows.rows] == ["I am Alex", "Hello Alex", "new line"]
    # The kept copy is no save: it is not listed, exported or read as one.
    assert store.identities.stored_stems(["AgentMemory", "ConversationSummaries"]) == {"Teacher"}


def test_a_history_of_garbage_bytes_is_kept_not_replaced_by_the_next_append(root):
    # The case: bytes that are not JSON lines read as an empty history, and the next append rewrote
    # the file with just the new row.
    store = FileAgentMemoryStore(root)
    path = store.history_path(KEY)
    path.parent.mkdir(parents=True)
    garbage = bytes(range(256)) * 4 + b"\n" + b"\x00" * 100
    path.write_bytes(garbage)
    assert store.get_chat_history(KEY) == []
    assert store.history_status(KEY).unreadable_lines >= 1
    store.append_chat_message(KEY, "user", "after")
    kept = root / store.history_status(KEY).quarantine_file
    assert kept.read_bytes() == garbage
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history(KEY)] == ["after"]


def test_a_second_damage_gets_its_own_copy(root):
    store = FileAgentMemoryStore(root)
    path = store.history_path(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(GOOD_1 + BAD)
    store.append_chat_message(KEY, "user", "a")
    with path.open("ab") as f:
        f.write(b"second damage\n")
    other = FileAgentMemoryStore(root)
    other.append_chat_message(KEY, "user", "b")
    kept = sorted(p.name for p in (root / "Quarantine").iterdir())
    assert len(kept) == 2
    assert [m.content for m in other.get_chat_history(KEY)] == ["I am Alex", "a", "b"]


# -- summaries, the identity index, the lock folder ---------------------------------------------


@pytest.mark.parametrize("kind", ["link", "fifo", "device"])
def test_a_summary_that_is_not_a_regular_file_is_refused(root, outside, kind):
    summaries = FileConversationSummaryStore(root)
    plant(summaries.summary_path(KEY), kind, outside)
    before = outside_state(outside)
    refused(lambda: summaries.load_summary(KEY), WORDS[kind])
    within(lambda: summaries.save_summary(KEY, "new"))  # replaces the entry itself
    assert summaries.load_summary(KEY) == "new"
    assert outside_state(outside) == before


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_identity_index_files_that_are_not_regular_files_never_block_or_leak(root, outside, kind):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    alex = AgentMemoryScope(user_id="alex")
    bundle.scoped(alex).append_chat_message("Guard", "user", "hi")
    plant(root / "Identities" / "Teacher.json", kind, outside)
    before = outside_state(outside)
    found = within(lambda: IdentityIndex(root).identities())
    assert [identity.role_id for identity in found.values()] == ["Guard"]
    within(lambda: FileAgentMemoryStore(root).append_chat_message(KEY, "user", "x"))
    assert outside_state(outside) == before


def test_a_linked_lock_folder_is_refused_and_no_lock_file_appears_outside(root, outside):
    root.mkdir(parents=True)
    (root / ".locks").symlink_to(outside, target_is_directory=True)
    before = outside_state(outside)
    store = FileAgentMemoryStore(root)
    refused(lambda: store.append_chat_message(KEY, "user", "hi"), "link")
    assert outside_state(outside) == before and not (outside / "AgentMemory").exists()


def test_a_lock_file_that_is_a_link_is_refused(root, outside):
    store = FileAgentMemoryStore(root)
    store.append_chat_message(KEY, "user", "hi")
    lock = next((root / ".locks" / "AgentMemory").iterdir())
    lock.unlink()
    lock.symlink_to(outside / "victim.json")
    before = outside_state(outside)
    refused(lambda: FileAgentMemoryStore(root).append_chat_message(KEY, "user", "again"), "lock")
    assert outside_state(outside) == before


def test_many_fifos_each_fail_at_once(root):
    store = FileAgentMemoryStore(root)
    folder = store.folder
    folder.mkdir(parents=True)
    for i in range(18):
        os.mkfifo(folder / f"Npc{i}.json")
        os.mkfifo(folder / f"Npc{i}.history.jsonl")
    for i in range(18):
        assert within(lambda: store.try_load(f"Npc{i}")).status is LoadStatus.FAILED
        refused(lambda: store.get_chat_history(f"Npc{i}"), "FIFO")


def test_an_export_never_lists_a_folder_behind_a_link(root, outside):
    # Only names outside would be read, but an export must not count them as saves of the scope.
    root.mkdir(parents=True)
    (outside / "Stranger.json").write_bytes(SECRET)
    (root / "AgentMemory").symlink_to(outside, target_is_directory=True)
    from pyruntime.stores import export_scope_snapshot

    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    with pytest.raises(MemoryUnreadableError, match="'AgentMemory' is a link"):
        export_scope_snapshot(bundle, AgentMemoryScope(), None, None)
