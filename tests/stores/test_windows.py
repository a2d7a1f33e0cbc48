"""Windows-valid saves: device names, case-only collisions, renames over open files, open-file deletes, MAX_PATH.

Windows itself is not available here: names and lengths are checked as pure functions and on real
files; a rename or delete failing with PermissionError (another handle has the file open) cannot be
provoked on Linux, so a test double raises it (the real rename path is covered by every other test).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError, PersistenceError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import EMPTY_SCOPE
from pyruntime.service.status import StatusCode, status_for
from pyruntime.stores import fileio
from pyruntime.stores.file_layout import (
    HISTORY_SUFFIX,
    MEMORY_SUFFIX,
    KeyCollisionError,
    PathTooLongError,
    check_windows_path_length,
    file_stem,
    fnv1a32_utf16,
    is_windows_device_name,
)
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore
from pyruntime.stores.identity_index import IDENTITIES_DIR, IdentityIndex
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from tests.support.loads import loaded


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def files(root: Path) -> dict[str, bytes]:
    """Every data file (lock files aside) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.parts}


def view(root: Path) -> ScopedAgentMemoryStore:
    index = IdentityIndex(root)
    return ScopedAgentMemoryStore(FileAgentMemoryStore(root, identities=index),
                                  FileConversationSummaryStore(root, identities=index), EMPTY_SCOPE)


# -- device names ------------------------------------------------------------------------------


DEVICE_KEYS = ["CON", "con", "Con", "PRN", "AUX", "nul", "NUL.json", "con.txt", "COM1", "com9", "LPT1", "lpt9",
               "COM0", "COM\u00b9", "LPT\u00b3", "CONIN$", "conout$", "AUX .x", "nul.a.b", "CON:x."]


@pytest.mark.parametrize("key", DEVICE_KEYS)
def test_device_names_are_escaped_to_ordinary_stable_file_names(key):
    stem = file_stem(key)
    assert stem == file_stem(key)  # stable
    assert stem.endswith(f"_{fnv1a32_utf16(key):08x}")  # the layout's one escape: `_<fnv8>`
    for suffix in (MEMORY_SUFFIX, HISTORY_SUFFIX):
        assert not is_windows_device_name(stem + suffix)


def test_device_names_differing_in_case_get_different_stems():
    stems = {file_stem(k) for k in ["CON", "con", "Con", "cOn"]}
    assert len(stems) == 4


@pytest.mark.parametrize("key", ["Teacher", "PlainChat", "SmartChat", "BlacksmithNPC", "CONsole", "Connor", "COM10",
                                 "LPT", "nullable", "aux_x", "console.log", "scope-v1-" + "ab" * 32])
def test_ordinary_ids_keep_their_names(key):
    assert file_stem(key) == key


@pytest.mark.parametrize("key", ["Mr.", "x..", "a. ", "b ", "Ms. ."])
def test_no_file_name_ends_in_a_dot_or_space(key):
    # Windows strips trailing dots and spaces from a name; every name here ends with its suffix.
    stem = file_stem(key)
    for name in (stem + MEMORY_SUFFIX, stem + HISTORY_SUFFIX):
        assert not name.endswith((".", " "))


def test_a_device_named_role_is_saved_in_an_ordinary_file(root):
    store = FileAgentMemoryStore(root)
    for key in ["CON", "nul.x"]:
        store.save(key, AgentMemoryState(memory=f"memory of {key}"))
        store.append_chat_message(key, "user", "hi")
    names = sorted(p.name for p in (root / "AgentMemory").iterdir())
    assert names == sorted([file_stem("CON") + MEMORY_SUFFIX, file_stem("CON") + HISTORY_SUFFIX,
                            file_stem("nul.x") + MEMORY_SUFFIX, file_stem("nul.x") + HISTORY_SUFFIX])
    assert not any(is_windows_device_name(n) for n in names)
    reopened = FileAgentMemoryStore(root)
    assert loaded(reopened.try_load("nul.x")).memory == "memory of nul.x"
    assert [m.content for m in reopened.get_chat_history("CON")] == ["hi"]


def test_a_device_named_save_written_before_the_escape_is_moved_to_its_new_name(root):
    # Outside Windows `Con.json` could be written; after the escape the same key must still find it.
    memory, summaries = root / "AgentMemory", root / "ConversationSummaries"
    memory.mkdir(parents=True)
    summaries.mkdir()
    store = FileAgentMemoryStore(root)
    (memory / "Con.json").write_bytes(b'{"lastSystemPrompt":"","memory":"old memory","chatHistoryJson":"",'
                                      b'"transcriptEntriesJson":"","versionsJson":"","systemPromptMemorySnapshot":"",'
                                      b'"systemPromptMemoryVersion":0,"maxMemoryVersions":30}')
    (memory / "Con.history.jsonl").write_bytes(b'{"k":0,"r":"user","c":"old line","t":1700000000,"o":1,"m":true}\n')
    (summaries / "Con.json").write_bytes(b'{"Summary":"old summary"}')

    assert loaded(store.try_load("Con")).memory == "old memory"
    assert [m.content for m in store.get_chat_history("Con")] == ["old line"]
    assert FileConversationSummaryStore(root).load_summary("Con") == "old summary"
    stem = file_stem("Con")
    assert sorted(p.name for p in memory.iterdir()) == sorted([stem + MEMORY_SUFFIX, stem + HISTORY_SUFFIX])
    assert [p.name for p in summaries.iterdir()] == [stem + MEMORY_SUFFIX]
    store.append_chat_message("Con", "user", "new line")
    assert [m.content for m in FileAgentMemoryStore(root).get_chat_history("Con")] == ["old line", "new line"]


# -- ids differing only in case ---------------------------------------------------------------


def simulate_case_insensitive(root: Path, written: str, other: str) -> None:
    """What NTFS/APFS show for `other`'s index file: the file of `written`, whose name differs only in case."""
    folder = root / IDENTITIES_DIR
    shutil.copyfile(folder / (file_stem(written) + MEMORY_SUFFIX), folder / (file_stem(other) + MEMORY_SUFFIX))
    for name in ("AgentMemory", "ConversationSummaries"):
        for path in (root / name).glob(file_stem(written) + ".*"):
            shutil.copyfile(path, path.with_name(file_stem(other) + path.name[len(file_stem(written)):]))


def test_an_id_differing_only_in_case_is_refused_and_changes_nothing(root):
    teacher = view(root)
    teacher.save("Teacher", AgentMemoryState(memory="Teacher's memory"))
    teacher.append_chat_message("Teacher", "user", "hello")
    teacher.save_summary("Teacher", "summary")
    simulate_case_insensitive(root, "Teacher", "teacher")
    before = files(root)

    other = view(root)  # a fresh process: nothing cached
    for call in (lambda: other.try_load("teacher"), lambda: other.save("teacher", AgentMemoryState(memory="x")),
                 lambda: other.append_chat_message("teacher", "user", "x"), lambda: other.get_chat_history("teacher"),
                 lambda: other.load_summary("teacher"), lambda: other.save_summary("teacher", "x")):
        with pytest.raises(KeyCollisionError, match="differs only in case") as info:
            call()
        assert status_for(info.value).code == StatusCode.INVALID_ARGUMENT
        assert "teacher" not in str(info.value).lower()  # the message names no id
    assert files(root) == before
    assert loaded(other.try_load("Teacher")).memory == "Teacher's memory"  # the original is untouched and usable


def test_ids_differing_in_case_coexist_where_the_file_system_tells_them_apart(root):
    store = view(root)
    store.save("Teacher", AgentMemoryState(memory="upper"))
    store.save("teacher", AgentMemoryState(memory="lower"))
    fresh = view(root)
    assert loaded(fresh.try_load("Teacher")).memory == "upper"
    assert loaded(fresh.try_load("teacher")).memory == "lower"


# -- a rename or delete over a file another handle keeps open (Windows) -----------------------


@pytest.fixture
def windows_retries(monkeypatch):
    monkeypatch.setattr(fileio, "IS_WINDOWS", True)
    monkeypatch.setattr(fileio, "SHARING_RETRY_DELAYS", (0.001, 0.002, 0.004, 0.008, 0.016, 0.032))


def failing(monkeypatch, name: str, times: int) -> list[int]:
    """Make os.<name> raise PermissionError (a sharing violation) `times` times, then work; returns the call count."""
    real = getattr(os, name)
    calls = [0]

    def double(*args, **kwargs):
        calls[0] += 1
        if calls[0] <= times:
            raise PermissionError(errno.EACCES, "The process cannot access the file")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, double)
    return calls


def test_a_rename_over_an_open_file_is_retried_until_it_works(root, monkeypatch, windows_retries):
    store = FileAgentMemoryStore(root)
    store.save("Teacher", AgentMemoryState(memory="old"))
    calls = failing(monkeypatch, "replace", 3)
    store.save("Teacher", AgentMemoryState(memory="new"))
    assert calls[0] == 4
    assert loaded(FileAgentMemoryStore(root).try_load("Teacher")).memory == "new"


def test_a_rename_that_stays_refused_is_unavailable_and_keeps_the_previous_version(root, monkeypatch,
                                                                                   windows_retries):
    store = FileAgentMemoryStore(root)
    store.save("Teacher", AgentMemoryState(memory="old"))
    before = files(root)
    calls = failing(monkeypatch, "replace", 1000)
    with pytest.raises(PersistenceError, match="another program may keep it open") as info:
        store.save("Teacher", AgentMemoryState(memory="new"))
    assert calls[0] == len(fileio.SHARING_RETRY_DELAYS) + 1  # bounded
    status = status_for(info.value)
    assert status.code == StatusCode.UNAVAILABLE and "another program may keep it open" in status.message
    monkeypatch.undo()
    assert files(root) == before  # old version, no temp file left
    assert loaded(FileAgentMemoryStore(root).try_load("Teacher")).memory == "old"


def test_a_delete_of_an_open_file_is_retried(root, monkeypatch, windows_retries):
    store = FileAgentMemoryStore(root)
    store.append_chat_message("Teacher", "user", "hi")
    calls = failing(monkeypatch, "unlink", 2)
    store.clear_chat_history("Teacher")
    assert calls[0] == 3
    assert not store.history_path("Teacher").exists()


def test_elsewhere_a_permission_error_is_not_retried(root, monkeypatch):
    monkeypatch.setattr(fileio, "IS_WINDOWS", False)
    store = FileAgentMemoryStore(root)
    calls = failing(monkeypatch, "replace", 1000)
    with pytest.raises(PersistenceError):
        store.save("Teacher", AgentMemoryState(memory="x"))
    assert calls[0] == 1


def test_a_failed_first_append_closes_the_file_before_deleting_it(root, monkeypatch):
    # Windows cannot delete a file this process still has open: the order must be close, then unlink.
    events: list[str] = []
    real_close, real_unlink, real_fsync = os.close, os.unlink, os.fsync
    history = FileAgentMemoryStore(root).history_path("Teacher")

    def fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):  # the history file's fsync; folders still sync
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    def close(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):  # a file's descriptor, not a folder's
            events.append("close")
        return real_close(fd)

    def unlink(path, *args, **kwargs):
        if Path(path).name == history.name:  # by name relative to the folder's descriptor, or by path
            events.append("unlink")
        return real_unlink(path, *args, **kwargs)

    store = FileAgentMemoryStore(root)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "close", close)
    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(PersistenceError):
        store.append_chat_message("Teacher", "user", "hi")
    monkeypatch.undo()
    assert "unlink" in events and events.index("close") < events.index("unlink")
    assert not history.exists()


# -- MAX_PATH ---------------------------------------------------------------------------------


def test_windows_paths_up_to_259_characters_pass_and_longer_ones_are_refused_clearly():
    folder = "C:\\Users\\player\\AppData\\LocalLow\\Studio\\Game\\CoreAI\\AgentMemory\\"
    check_windows_path_length(folder + "x" * (259 - len(folder)))
    with pytest.raises(PathTooLongError, match="260 characters, beyond Windows' limit of 259") as info:
        check_windows_path_length(folder + "x" * (260 - len(folder)))
    assert isinstance(info.value, InvalidArgumentError)
    assert "Users" not in str(info.value)  # no path (personal data) in the message
    # A short name in a deep folder: its temp file `.<8 random>.tmp` must fit too.
    deep = "C:\\" + "d" * (259 - 3 - 13) + "\\"
    check_windows_path_length(deep[:-1] + "a")
    with pytest.raises(PathTooLongError):
        check_windows_path_length(deep + "a.json")


def test_a_save_beyond_max_path_is_refused_up_front_on_windows(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio, "IS_WINDOWS", True)
    depth = 270 - len(str(tmp_path))
    root = tmp_path / ("d" * max(1, depth // 2)) / ("e" * max(1, depth - depth // 2)) / "CoreAI"
    store = FileAgentMemoryStore(root)
    with pytest.raises(PathTooLongError) as info:
        store.save("Teacher", AgentMemoryState(memory="x"))
    assert status_for(info.value).code == StatusCode.INVALID_ARGUMENT
    assert not (root / "AgentMemory").exists() or not any((root / "AgentMemory").iterdir())
    monkeypatch.setattr(fileio, "IS_WINDOWS", False)  # Linux itself allows the path
    store.save("Teacher", AgentMemoryState(memory="x"))
    assert loaded(store.try_load("Teacher")).memory == "x"
