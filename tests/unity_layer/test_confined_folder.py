"""The downloads' confined folders (CoreAI.Hosting's ConfinedFolder) against a hostile local process: links, FIFOs and
folders planted at the names the package writes. Both kinds run here: the descriptor one Linux and macOS use (openat,
O_NOFOLLOW, fstat, flock through P/Invoke) and the by-path one Windows uses (Mono reports a link as a reparse point, as
Windows does). The struct layouts the P/Invokes decode are checked against Python's own os.stat / os.statvfs, and the
lock files against the runtime's (pyruntime/catalog/lockfile.py): the two exclude each other."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from pyruntime.catalog import lockfile
from pyruntime.stores import confined
from tests.support.lock_hammer import start_hammers
from tests.support.tree import changes, tree

pytestmark = pytest.mark.usefixtures("scenarios")

VICTIM = b"a file of the player's, outside the folder\n" * 50
KINDS = [pytest.param(False, id="descriptor"), pytest.param(True, id="by-path")]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "elsewhere" / "victim.bin"
    path.write_bytes(VICTIM)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "partial"
    path.mkdir()
    return path


def probe():
    from CoreAI.Tests.UnityLayer import FolderProbe

    return FolderProbe


def test_the_decoded_fstat_and_free_space_are_the_kernels(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 12345)
    device, inode, mode, size = probe().Fstat(str(path))
    st = os.stat(path)
    assert (device, inode, mode, size) == (st.st_dev, st.st_ino, st.st_mode, 12345)
    os.mkdir(tmp_path / "d")
    assert stat.S_ISDIR(probe().Fstat(str(tmp_path / "d"))[2])
    vfs = os.statvfs(tmp_path)
    free = probe().FreeBytes(str(tmp_path), False)
    assert abs(free - vfs.f_bavail * vfs.f_frsize) < 64 * 1024 * 1024  # other writers share the disk
    assert probe().FreeBytes(str(tmp_path), True) == -1  # by path, only Windows says: not checked elsewhere


def test_before_glibc_2_33_fstat_is_reached_through_its_versioned_entry(tmp_path: Path) -> None:
    # Older glibc (Ubuntu 20.04's 2.31, which Unity supports) exports no fstat symbol: __fxstat64 stands in, and
    # glibc still exports it, so the fallback runs here too.
    from tests.support.internals import clr_type

    field = clr_type("CoreAI.Launcher.LinuxLibc", "CoreAI.Hosting").GetField("oldGlibc", _private_static())
    path = tmp_path / "f.bin"
    path.write_bytes(b"y" * 777)
    field.SetValue(None, True)
    try:
        device, inode, mode, size = probe().Fstat(str(path))
    finally:
        field.SetValue(None, False)
    st = os.stat(path)
    assert (device, inode, mode, size) == (st.st_dev, st.st_ino, st.st_mode, 777)


def _private_static():
    from System.Reflection import BindingFlags

    return BindingFlags.NonPublic | BindingFlags.Static


@pytest.mark.parametrize("by_path", KINDS)
def test_a_planted_link_is_removed_never_written_through(tmp_path: Path, folder: Path, victim: Path,
                                                         by_path: bool) -> None:
    for name in ("append", "atomic", "lock", "moved"):
        (folder / name).symlink_to(victim)
    before = tree(tmp_path)
    assert probe().Look(str(folder), "append", by_path) == "Other"
    assert probe().ReadSmall(str(folder), "append", 1 << 20, by_path) is None  # never read through
    probe().Append(str(folder), "append", b"downloaded", by_path)
    probe().WriteAtomically(str(folder), "atomic", b"record", by_path)
    probe().TryLock(str(folder), "lock", by_path).Dispose()
    (folder / "source").write_bytes(b"model")
    probe().Move(str(folder), "source", str(folder), "moved", by_path)
    assert victim.read_bytes() == VICTIM
    assert (folder / "append").read_bytes() == b"downloaded" and (folder / "atomic").read_bytes() == b"record"
    assert (folder / "moved").read_bytes() == b"model"
    assert changes(before, tree(tmp_path)) == {
        "added": [], "removed": ["partial/lock"], "changed": ["partial/append", "partial/atomic", "partial/moved"]}
    assert not any(p.is_symlink() for p in folder.iterdir())


@pytest.mark.parametrize("by_path", KINDS)
def test_a_link_to_a_missing_file_is_removed_too(tmp_path: Path, folder: Path, by_path: bool) -> None:
    (folder / "append").symlink_to(tmp_path / "elsewhere" / "created.bin")  # O_CREAT through it would make the file
    probe().Append(str(folder), "append", b"downloaded", by_path)
    assert not (tmp_path / "elsewhere").exists() and (folder / "append").read_bytes() == b"downloaded"


@pytest.mark.parametrize("by_path", KINDS)
def test_deleting_a_link_leaves_its_target(folder: Path, victim: Path, by_path: bool) -> None:
    (folder / "x").symlink_to(victim)
    assert probe().Delete(str(folder), "x", by_path) is True
    assert probe().Delete(str(folder), "x", by_path) is False
    assert victim.read_bytes() == VICTIM and not (folder / "x").exists()


@pytest.mark.parametrize("by_path", KINDS)
def test_a_link_in_place_of_an_owned_folder_is_replaced_by_a_folder(tmp_path: Path, victim: Path,
                                                                     by_path: bool) -> None:
    owned = tmp_path / ".partial"
    owned.symlink_to(victim.parent, target_is_directory=True)
    probe().OpenFolder(str(owned), True, by_path)
    assert owned.is_dir() and not owned.is_symlink() and sorted(os.listdir(victim.parent)) == ["victim.bin"]
    trusted = tmp_path / "models"
    trusted.symlink_to(victim.parent, target_is_directory=True)  # the user's own link: followed
    probe().OpenFolder(str(trusted), False, by_path)
    assert trusted.is_symlink()


@pytest.mark.parametrize("by_path", KINDS)
def test_a_folder_in_the_way_is_named_and_left(folder: Path, by_path: bool) -> None:
    from System.IO import IOException

    (folder / "npc.gguf.partial").mkdir()
    with pytest.raises(IOException, match="a folder is where npc.gguf.partial belongs"):
        probe().Append(str(folder), "npc.gguf.partial", b"x", by_path)
    assert (folder / "npc.gguf.partial").is_dir()


def test_a_fifo_is_removed_without_being_opened(folder: Path) -> None:
    for name in ("append", "lock", "read"):
        os.mkfifo(folder / name)  # opened for writing or reading, each would block the download forever
    assert probe().Look(str(folder), "read", False) == "Other"
    assert probe().ReadSmall(str(folder), "read", 4096, False) is None
    probe().Append(str(folder), "append", b"downloaded", False)
    probe().TryLock(str(folder), "lock", False).Dispose()
    assert (folder / "append").read_bytes() == b"downloaded" and not (folder / "lock").exists()
    assert stat.S_ISFIFO(os.lstat(folder / "read").st_mode)  # only looked at


def test_a_read_only_file_in_the_way_is_replaced_on_windows(folder: Path) -> None:
    # Windows refuses to write or delete a read-only file (the descriptor kind meets it as EACCES, which a root test
    # process never sees).
    for name in ("append", "lock"):
        (folder / name).write_bytes(b"planted")
        (folder / name).chmod(0o444)  # Mono reports it as FileAttributes.ReadOnly
    probe().Append(str(folder), "append", b"downloaded", True)
    probe().TryLock(str(folder), "lock", True).Dispose()
    assert (folder / "append").read_bytes() == b"downloaded" and not (folder / "lock").exists()


def test_a_socket_in_the_way_is_removed(folder: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as planted:
        planted.bind(str(folder / "append"))  # opening it answers ENXIO
        assert probe().Look(str(folder), "append", False) == "Other"
        probe().Append(str(folder), "append", b"downloaded", False)
    assert (folder / "append").read_bytes() == b"downloaded"


def test_a_read_stops_at_its_limit(folder: Path) -> None:
    (folder / "record").write_bytes(b"{}" * 3000)
    assert probe().ReadSmall(str(folder), "record", 4096, False) is None
    assert bytes(probe().ReadSmall(str(folder), "record", 6000, False)) == b"{}" * 3000


def test_the_lock_excludes_the_runtimes_and_is_deleted_by_its_holder(folder: Path) -> None:
    held = probe().TryLock(str(folder), "npc.gguf.partial.lock", False)
    assert held is not None and (folder / "npc.gguf.partial.lock").exists()
    assert probe().TryLock(str(folder), "npc.gguf.partial.lock", False) is None  # a second download of the same file
    with confined.open_folder(folder, None) as opened, pytest.raises(lockfile.LockBusy):
        with lockfile.held(opened, "npc.gguf.partial.lock"):
            pass
    held.Dispose()
    assert not (folder / "npc.gguf.partial.lock").exists()
    with confined.open_folder(folder, None) as opened, lockfile.held(opened, "npc.gguf.partial.lock"):
        assert probe().TryLock(str(folder), "npc.gguf.partial.lock", False) is None  # the runtime's pull holds it
    assert not (folder / "npc.gguf.partial.lock").exists()
    probe().TryLock(str(folder), "npc.gguf.partial.lock", False).Dispose()
    assert os.listdir(folder) == []


def test_the_package_and_the_runtime_taking_one_lock_file_lose_no_update(folder: Path) -> None:
    # Two runtime processes and the package take, delete and retake one lock file as fast as they can; a lost update
    # shows two holders at once (a lock on a file its holder had already deleted, taken for real).
    counter = folder.parent / "counter"
    counter.write_text("0")
    rounds = 300
    workers = start_hammers(folder, counter, rounds, 2)
    deadline = time.monotonic() + 60
    while int(counter.read_text() or 0) < 20:  # both runtimes are hammering (an empty read: a write in progress)
        assert time.monotonic() < deadline
        time.sleep(0.005)
    package = probe().HammerAsync(str(folder), "x.lock", str(counter), rounds // 2)
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    assert package.Wait(120_000)
    assert int(counter.read_text()) == 2 * rounds + rounds // 2
    assert package.Result > 0  # it did meet the others holding it
    assert os.listdir(folder) == []
