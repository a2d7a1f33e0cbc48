"""Issue 9 on the file stores: stuck lock holders, lock files from reads, bounded per-key state, hostile saves,
disk full and read-only at the write call, the identity index and session-only rows in snapshots."""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyruntime.errors import (
    DISK_FULL_MESSAGE,
    DiskFullError,
    InvalidArgumentError,
    MemoryUnreadableError,
    PersistenceError,
    StoreLockedError,
    UnsafeKeyError,
)
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.memory.tool import MemoryTool
from pyruntime.scopes import MAX_ROLE_ID_BYTES, AgentMemoryScope, normalize_role_id, storage_key
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    LoadStatus,
    StoreBundle,
    export_scope_snapshot,
    fileio,
    import_scope_snapshot,
    open_stores,
)
from pyruntime.stores.file_store import MAX_WAITERS_PER_KEY, FileAgentMemoryStore, FileConversationSummaryStore
from pyruntime.stores.snapshot import UnattributedSavesError
from tests.support.lock_holder import hold_lock_in_another_process, release

ALEX = AgentMemoryScope(user_id="alex")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


@dataclass
class Persistent:
    """A persistent store of one kind: `open()` it again as another process would; `forget()` its identity index."""

    open: Callable[[], StoreBundle]
    forget: Callable[[], None]


@pytest.fixture(params=["files", "postgres"])
def persistent(request: pytest.FixtureRequest, root: Path) -> Persistent:
    """The file stores under root, or a fresh PostgreSQL database: exports must behave the same on both."""
    if request.param == "files":
        def forget_files() -> None:
            for path in (root / "Identities").iterdir():  # saves written before the index existed
                path.unlink()

        return Persistent(lambda: open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent), forget_files)
    import psycopg

    url = request.getfixturevalue("postgres_url")

    def open_database() -> StoreBundle:
        bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=url)
        request.addfinalizer(bundle.close)
        return bundle

    def forget_rows() -> None:
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM coreai_identities")

    return Persistent(open_database, forget_rows)


def data_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".locks" not in p.parts}


# -- a stuck lock holder ------------------------------------------------------------------------


def test_a_stuck_holder_fails_only_its_own_save_and_the_others_go_on(root):
    store = FileAgentMemoryStore(root, lock_timeout=0.5)
    store.save("Stuck", AgentMemoryState(memory="before"))
    proc = hold_lock_in_another_process(store, "Stuck")
    try:
        outcomes: list[object] = []

        def stuck_call() -> None:
            try:
                store.mutate("Stuck", lambda s: s.evolve(memory="after"))
                outcomes.append("written")
            except StoreLockedError as exc:
                outcomes.append(str(exc))

        threads = [threading.Thread(target=stuck_call) for _ in range(3 * MAX_WAITERS_PER_KEY)]
        for t in threads:
            t.start()
        # Meanwhile every other save works.
        for i in range(20):
            store.append_chat_message(f"Other{i}", "user", "hi")
        for t in threads:
            t.join(timeout=60)
        assert len(outcomes) == len(threads) and "written" not in outcomes
        assert any("locked by another process" in str(o) for o in outcomes)
        assert all("locked by another process" in str(o) or "busy" in str(o) for o in outcomes)
        assert store.try_load("Stuck").state.memory == "before"  # reads take no file lock
    finally:
        release(proc)
    assert store.mutate("Stuck", lambda s: s.evolve(memory="after")).memory == "after"  # free again
    assert [len(store.get_chat_history(f"Other{i}")) for i in range(20)] == [1] * 20


def test_memory_tool_reports_a_locked_save_as_a_failure_without_changing_it(root):
    store = FileAgentMemoryStore(root, lock_timeout=0.3)
    MemoryTool(store, "Stuck").execute({"action": "write", "content": "kept"})
    proc = hold_lock_in_another_process(store, "Stuck")
    try:
        result = MemoryTool(store, "Stuck").execute({"action": "append", "content": "lost?"})
    finally:
        release(proc)
    assert not result.success and "StoreLockedError" in result.error
    assert store.try_load("Stuck").state.memory == "kept"


# -- lock files and per-key state -----------------------------------------------------------------


def test_reads_leave_no_lock_files(root):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    for i in range(300):
        view = bundle.scoped(AgentMemoryScope(user_id=f"p{i}"))
        assert view.try_load("Teacher").status is LoadStatus.NOT_FOUND
        assert view.get_chat_history("Teacher") == [] and view.get_transcript("Teacher") == []
        assert view.load_summary("Teacher") is None
    assert not (root / ".locks").exists() or not any((root / ".locks").rglob("*.lock"))
    bundle.scoped(ALEX).append_chat_message("Teacher", "user", "hi")  # a write takes (and keeps) one
    assert len(list((root / ".locks").rglob("*.lock"))) == 1


def test_per_key_state_is_bounded(root):
    store = FileAgentMemoryStore(root, max_cached_keys=50)
    summaries = FileConversationSummaryStore(root, max_cached_keys=50)
    for i in range(400):
        store.append_chat_message(f"player{i}", "user", "hi")
        store.get_chat_history(f"player{i}")
        summaries.load_summary(f"player{i}")
    assert store.cached_keys <= 50 and summaries.cached_keys <= 50
    assert [m.content for m in store.get_chat_history("player0")] == ["hi"]  # evicted state is read back


def test_session_only_rows_keep_their_key_state(root):
    store = FileAgentMemoryStore(root, max_cached_keys=5)
    store.append_chat_message("Volatile", "user", "only here", persist=False)
    for i in range(50):
        store.append_chat_message(f"p{i}", "user", "hi")
    assert [m.content for m in store.get_chat_history("Volatile")] == ["only here"]


# -- hostile and corrupt saves ----------------------------------------------------------------------


@pytest.mark.parametrize("document", [
    b'{"memory":"x","systemPromptMemoryVersion":NaN}',
    b'{"memory":"x","maxMemoryVersions":Infinity}',
    b'{"memory":"x","maxMemoryVersions":-Infinity}',
    b'{"memory":"x","systemPromptMemoryVersion":1e999}',
    b'{"memory":"x","systemPromptMemoryVersion":4294967296}',
    b'{"memory":"x","versionsJson":"[{\\"Version\\":1,\\"Timestamp\\":1e999}]"}',
    b'{"memory":"x","versionsJson":"[{\\"Version\\":99999999999,\\"ContentAfter\\":\\"x\\"}]"}',
    b'{"memory":"x","unknownField":NaN}',
], ids=["nan", "inf", "-inf", "1e999", "int-over-32-bits", "version-timestamp-1e999", "version-over-32-bits",
        "nan-in-unknown-field"])
def test_non_finite_or_out_of_range_numbers_make_a_save_consistently_unreadable(root, document):
    store = FileAgentMemoryStore(root)
    path = store.memory_path("Teacher")
    path.parent.mkdir(parents=True)
    path.write_bytes(document)
    loaded = store.try_load("Teacher")
    assert loaded.status is LoadStatus.FAILED and "x" not in (loaded.reason or "").split()
    result = MemoryTool(store, "Teacher").execute({"action": "append", "content": "new"})
    assert not result.success and "could not be read" in result.error
    with pytest.raises(MemoryUnreadableError):
        store.mutate("Teacher", lambda s: s.evolve(memory="y"))
    assert path.read_bytes() == document  # never rewritten


def test_a_state_the_file_could_not_hold_is_refused_before_writing(root):
    store = FileAgentMemoryStore(root)
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        store.save("Teacher", AgentMemoryState(system_prompt_memory_version=2**31))
    assert not store.memory_path("Teacher").exists()


def test_a_folder_in_place_of_a_save_is_unreadable_not_unavailable(root):
    store = FileAgentMemoryStore(root)
    summaries = FileConversationSummaryStore(root)
    store.memory_path("Teacher").mkdir(parents=True)
    store.history_path("Teacher").mkdir()
    summaries.summary_path("Teacher").mkdir(parents=True)
    assert store.try_load("Teacher").status is LoadStatus.FAILED
    for call in (lambda: store.mutate("Teacher", lambda s: s.evolve(memory="x")),
                 lambda: store.save("Teacher", AgentMemoryState(memory="x")),
                 lambda: store.get_chat_history("Teacher"),
                 lambda: store.append_chat_message("Teacher", "user", "x"),
                 lambda: summaries.load_summary("Teacher")):
        with pytest.raises(MemoryUnreadableError, match="folder"):
            call()
    assert store.memory_path("Teacher").is_dir() and store.history_path("Teacher").is_dir()


def test_an_unreadable_summary_is_reported_as_unreadable_not_as_none(root):
    summaries = FileConversationSummaryStore(root)
    path = summaries.summary_path("Teacher")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"Summary": "half')
    with pytest.raises(MemoryUnreadableError, match="summary"):
        summaries.load_summary("Teacher")
    assert path.read_bytes() == b'{"Summary": "half'


# -- role ids that cannot be stored -------------------------------------------------------------


@pytest.mark.parametrize("role", ["..", ".", "...", "x" * (MAX_ROLE_ID_BYTES + 1), "é" * 65,
                                  "a" * 237, "a" * 241])
def test_role_ids_that_cannot_be_stored_are_refused_up_front(root, role):
    with pytest.raises(InvalidArgumentError):
        normalize_role_id(role)
    with pytest.raises(InvalidArgumentError):
        storage_key(role, ALEX)
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    with pytest.raises(InvalidArgumentError):
        bundle.scoped().append_chat_message(role, "user", "x")
    assert not root.exists() or data_files(root) == {}


def test_the_longest_role_id_round_trips_in_every_file(root):
    role = "a<" * (MAX_ROLE_ID_BYTES // 2)  # replaced characters add the hash suffix: the longest stem
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    view = bundle.scoped()
    MemoryTool(bundle.memory, view.key(role)).execute({"action": "write", "content": "ok"})
    for i in range(40):  # enough rows to force a history rewrite (its temp file)
        view.append_chat_message(role, "user", f"m{i}")
    view.save_summary(role, "s")
    assert view.try_load(role).state.memory == "ok" and view.load_summary(role) == "s"
    assert len(view.get_chat_history(role)) == 40


@pytest.mark.parametrize("key", ["Teacher\u200b", "\u202eGuard", "Old\u00a0Guard", "Cafe\u0301"])
def test_a_bare_key_with_a_look_alike_character_names_no_file(root, key):
    store = FileAgentMemoryStore(root)
    with pytest.raises(InvalidArgumentError, match="key"):
        store.append_chat_message(key, "user", "x")
    with pytest.raises(InvalidArgumentError, match="key"):
        store.mutate(key, lambda s: s.evolve(memory="x"))
    assert not root.exists() or not any(root.rglob("*.json*"))


def test_a_dots_only_key_stays_refused_by_the_store(root):
    with pytest.raises(UnsafeKeyError):
        FileAgentMemoryStore(root).append_chat_message("..", "user", "x")


# -- disk full and read-only, at the write call -------------------------------------------------


def _fail_half_way(code: int):
    real = fileio._write_all

    def write(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(code, "injected")

    return write


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT])
def test_disk_full_or_read_only_keeps_the_previous_version_and_leaves_nothing_half_written(root, monkeypatch, code):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    view = bundle.scoped(ALEX)
    key = view.key("Teacher")
    MemoryTool(bundle.memory, key).execute({"action": "write", "content": "v1"})
    view.append_chat_message("Teacher", "user", "hi")
    view.save_summary("Teacher", "sum")
    before = data_files(root)
    monkeypatch.setattr(fileio, "_write_all", _fail_half_way(code))
    result = MemoryTool(bundle.memory, key).execute({"action": "append", "content": "v2"})
    full = code in (errno.ENOSPC, errno.EDQUOT)
    assert not result.success and (result.error == DISK_FULL_MESSAGE if full else "could not be saved" in result.error)
    for call in (lambda: view.append_chat_message("Teacher", "user", "lost"),
                 lambda: view.save_summary("Teacher", "new"),
                 lambda: view.save("Teacher", AgentMemoryState(memory="new"))):
        with pytest.raises(PersistenceError) as info:
            call()
        assert isinstance(info.value, DiskFullError) is full and (str(info.value) == DISK_FULL_MESSAGE) is full
    assert data_files(root) == before  # nothing half-written, no temp file left
    monkeypatch.undo()
    assert view.try_load("Teacher").state.memory == "v1"
    assert [m.content for m in view.get_chat_history("Teacher")] == ["hi"]


def test_read_only_folder_at_temp_file_creation(root, monkeypatch):
    store = FileAgentMemoryStore(root)
    store.save("Teacher", AgentMemoryState(memory="v1"))

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "injected: read-only file system")

    monkeypatch.setattr(fileio, "_temp_file", read_only)
    with pytest.raises(PersistenceError, match="temporary file"):
        store.save("Teacher", AgentMemoryState(memory="v2"))
    monkeypatch.undo()
    assert store.try_load("Teacher").state.memory == "v1"


# -- exports: the identity index and session-only rows -----------------------------------------


def test_export_finds_every_role_and_actor_with_saves_in_the_scope(persistent):
    bundle = persistent.open()
    bundle.scoped(ALEX).append_chat_message("BlacksmithNPC", "user", "Likes axes")
    bundle.scoped(ALEX, "npc_7").save_summary("Guard", "met alex")
    MemoryTool(bundle.memory, bundle.scoped(ALEX).key("Teacher")).execute({"action": "write", "content": "fact"})
    bundle.scoped(AgentMemoryScope(user_id="bob")).append_chat_message("BlacksmithNPC", "user", "bob's")
    bundle.scoped(ALEX).try_load("NeverWritten")  # a lookup indexes nothing

    fresh = persistent.open()  # another process, later
    snapshot = export_scope_snapshot(fresh, ALEX, None, None)
    assert sorted((r.role_id, r.actor) for r in snapshot.roles) == [
        ("BlacksmithNPC", None), ("Guard", "npc_7"), ("Teacher", None)]
    only_npc = export_scope_snapshot(fresh, ALEX, None, ["npc_7"])
    assert [(r.role_id, r.actor) for r in only_npc.roles] == [("Guard", "npc_7")]


def test_export_fails_naming_how_many_saves_it_cannot_attribute(persistent):
    bundle = persistent.open()
    bundle.scoped(ALEX).append_chat_message("Mystery", "user", "x")
    bundle.scoped(ALEX, "npc").append_chat_message("Other", "user", "y")
    bundle.scoped(ALEX).append_chat_message("Teacher", "user", "z")
    persistent.forget()  # saves written before the index existed
    fresh = persistent.open()
    with pytest.raises(UnattributedSavesError, match="^2 save"):  # Teacher is a policy role: attributed
        export_scope_snapshot(fresh, ALEX, None, None, candidate_roles=["Teacher"])
    named = export_scope_snapshot(fresh, ALEX, ["Mystery"], [None])  # naming them indexes them
    assert [r.role_id for r in named.roles] == ["Mystery"]
    export_scope_snapshot(fresh, ALEX, ["Other"], ["npc"])
    found = export_scope_snapshot(fresh, ALEX, None, None, candidate_roles=["Teacher"])
    assert sorted(r.role_id for r in found.roles) == ["Mystery", "Other", "Teacher"]


def test_empty_scope_export_reads_bare_role_files_without_the_index(persistent):
    bundle = persistent.open()
    bundle.scoped().append_chat_message("BlacksmithNPC", "user", "x")
    persistent.forget()
    snapshot = export_scope_snapshot(persistent.open(), AgentMemoryScope(), None, None)
    assert [r.role_id for r in snapshot.roles] == ["BlacksmithNPC"]


@pytest.mark.parametrize("mode", list(AgentMemoryPersistenceMode))
def test_session_only_chat_is_never_exported_nor_imported_into_a_file(root, mode):
    bundle = open_stores(mode, root.parent)
    view = bundle.scoped(ALEX)
    view.append_chat_message("Teacher", "user", "kept")
    view.append_chat_message("Teacher", "user", "secret session-only", persist=False)
    view.append_chat_message("Teacher", "assistant", "kept too")
    snapshot = export_scope_snapshot(bundle, ALEX, None, None)
    assert [r.content for r in snapshot.roles[0].history] == ["kept", "kept too"]
    assert "secret" not in snapshot.to_json()
    target = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent / "other")
    import_scope_snapshot(target, snapshot)
    assert [m.content for m in target.scoped(ALEX).get_chat_history("Teacher")] == ["kept", "kept too"]
    assert all(b"secret" not in data for data in data_files(root.parent).values())
    if mode is AgentMemoryPersistenceMode.PERSISTENT:  # still there for this process
        assert "secret session-only" in [m.content for m in view.get_chat_history("Teacher")]


def test_identity_index_files_hold_the_identity(root):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    bundle.scoped(ALEX, "npc_1").append_chat_message("Guard", "user", "x")
    (index_file,) = (root / "Identities").iterdir()
    data = json.loads(index_file.read_text(encoding="utf-8"))
    assert data == {"key": storage_key("Guard", ALEX, "npc_1"), "role": "Guard", "tenant": "", "user": "alex",
                    "session": "", "topic": "", "actor": "npc_1"}


# -- bulk import -----------------------------------------------------------------------------------


def test_a_large_import_writes_every_role_and_fsyncs_each_folder_once(root, monkeypatch):
    from pyruntime.stores import RoleSnapshot, ScopeSnapshot, TranscriptEntry, TranscriptKind

    synced: list[Path] = []
    real = fileio._fsync_dir_now
    monkeypatch.setattr(fileio, "_fsync_dir_now", lambda folder: (synced.append(folder), real(folder)))
    roles = [RoleSnapshot(f"Role{i}", "npc" if i % 2 else None, AgentMemoryState(memory=f"fact {i}"),
                          [TranscriptEntry(TranscriptKind.USER, "user", f"hi {i}", timestamp=5, is_chat_message=True)],
                          f"summary {i}") for i in range(60)]
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    assert import_scope_snapshot(bundle, ScopeSnapshot(ALEX, roles, 1)) == 60
    assert len(synced) == len(set(synced)) <= 4  # AgentMemory, ConversationSummaries, Identities (once each)
    fresh = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    for i in range(60):
        view = fresh.scoped(ALEX, "npc" if i % 2 else None)
        assert view.try_load(f"Role{i}").state.memory == f"fact {i}"
        assert [m.content for m in view.get_chat_history(f"Role{i}")] == [f"hi {i}"]
        assert view.load_summary(f"Role{i}") == f"summary {i}"
    assert len(export_scope_snapshot(fresh, ALEX, None, None).roles) == 60


def test_a_failing_bulk_import_raises(root, monkeypatch):
    from pyruntime.stores import RoleSnapshot, ScopeSnapshot

    roles = [RoleSnapshot(f"Role{i}", None, AgentMemoryState(memory=f"fact {i}")) for i in range(20)]
    monkeypatch.setattr(fileio, "_write_all", _fail_half_way(errno.ENOSPC))
    with pytest.raises(PersistenceError):
        import_scope_snapshot(open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent),
                              ScopeSnapshot(ALEX, roles, 1))
    assert not any(p.name.endswith(".tmp") for p in root.rglob("*"))


def test_an_unindexed_bare_file_whose_role_id_was_replaced_is_not_guessed(root):
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    bundle.scoped().append_chat_message("Smith<1>", "user", "x")  # stem `Smith_1__<fnv8>`
    for path in (root / "Identities").iterdir():
        path.unlink()
    fresh = open_stores(AgentMemoryPersistenceMode.PERSISTENT, root.parent)
    with pytest.raises(UnattributedSavesError, match="^1 save"):
        export_scope_snapshot(fresh, AgentMemoryScope(), None, None)
    assert [r.role_id for r in export_scope_snapshot(fresh, AgentMemoryScope(), ["Smith<1>"], None).roles] == [
        "Smith<1>"]
