"""The Unity package's model pulls (ModelStore, on FileDownloader: the editor's pulls, a player's first-launch
download) against a hostile local process and a misbehaving server, as the runtime's `models pull` is tested
(tests/catalog/test_hostile_pulls.py): links and FIFOs planted in the cache, endless bodies, absurd sizes, a file
changed between two tries, redirect loops, file: targets, https down to http. Each test snapshots the tree (the
cache and a folder beside it) and checks what changed: outside the cache nothing, inside it only what a retry needs
(the bytes so far and their record), never a lock file. The package and the runtime share the cache's layout, its
records and its lock files: each resumes what the other left, and neither runs while the other pulls the same model."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.download import DownloadError
from tests.support.file_server import (
    FOLDERS,
    LOCK,
    PARTIAL,
    PULLED,
    RECORD,
    SERVER_CHANGES,
    VICTIM,
    FileServer,
    Served,
    changed_on_server,
    make_outside_cache,
    other_model,
)
from tests.support.tls import make_certificates
from tests.support.tree import changes, tree

pytestmark = pytest.mark.usefixtures("assemblies")



@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the cache with a file no pull may write."""
    return make_outside_cache(tmp_path)


@pytest.fixture
def store(tmp_path: Path):
    from CoreAI.Downloads import ModelStore

    return ModelStore(str(tmp_path / "models"))


def start(store, url: str, sha: str | None = None, size: int = -1, *, pause=None, cancel=None):
    from System.Threading import CancellationToken

    return store.PullAsync("npc", url, sha, size, "url", None, cancel or CancellationToken(False),
                           pause or CancellationToken(False))


def settle(task, timeout: float = 60.0):
    """The task's DownloadException (None on success), once it ended (polling: .Result holds the GIL)."""
    deadline = time.monotonic() + timeout
    while not task.IsCompleted:
        assert time.monotonic() < deadline, "the pull did not end"
        time.sleep(0.01)
    return task.Exception.GetBaseException() if task.IsFaulted else None


def pull(store, url: str, sha: str | None = None, size: int = -1):
    return settle(start(store, url, sha, size))


def wait_for_bytes(tmp_path: Path, task) -> None:
    deadline = time.monotonic() + 30
    while not ((tmp_path / PARTIAL).exists() and (tmp_path / PARTIAL).stat().st_size > 0):
        assert not task.IsCompleted and time.monotonic() < deadline, "the pull never started writing"
        time.sleep(0.01)


# -- links and special files planted in the cache ------------------------------------------------------------------


@pytest.mark.parametrize("target", ["victim.bin", "missing.bin"])
@pytest.mark.parametrize("planted", [PARTIAL, LOCK, RECORD])
def test_a_link_planted_at_a_download_file_is_removed_and_its_target_untouched(
        tmp_path: Path, outside: Path, server: FileServer, store, gguf_bytes: bytes, planted: str, target: str) -> None:
    (tmp_path / planted).parent.mkdir(parents=True)
    (tmp_path / planted).symlink_to(outside / target)  # a missing target: opening through the link would create it
    before = tree(tmp_path)
    assert pull(store, server.url("/tiny.gguf"), hashlib.sha256(gguf_bytes).hexdigest()) is None
    assert (outside / "victim.bin").read_bytes() == VICTIM
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [planted], "changed": []}


def test_a_link_at_the_partial_with_a_wrong_checksum_leaves_the_target_untouched(
        tmp_path: Path, outside: Path, server: FileServer, store) -> None:
    (tmp_path / PARTIAL).parent.mkdir(parents=True)
    (tmp_path / PARTIAL).symlink_to(outside / "victim.bin")
    before = tree(tmp_path)
    error = pull(store, server.url("/tiny.gguf"), "0" * 64)
    assert "checksum mismatch" in error.Message
    assert changes(before, tree(tmp_path)) == {"added": [], "removed": [PARTIAL], "changed": []}


def test_a_link_in_place_of_the_partial_folder_is_replaced_by_a_folder(
        tmp_path: Path, outside: Path, server: FileServer, store) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / ".partial").symlink_to(outside, target_is_directory=True)
    before = tree(tmp_path)
    assert pull(store, server.url("/tiny.gguf")) is None
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [], "changed": ["models/.partial"]}
    assert (tmp_path / "models" / ".partial").is_dir() and not (tmp_path / "models" / ".partial").is_symlink()


def test_a_fifo_planted_at_the_partial_is_removed_without_being_opened(
        tmp_path: Path, outside: Path, server: FileServer, store) -> None:
    (tmp_path / PARTIAL).parent.mkdir(parents=True)
    os.mkfifo(tmp_path / PARTIAL)  # opened for appending, it would block the pull forever
    before = tree(tmp_path)
    assert settle(start(store, server.url("/tiny.gguf")), timeout=20) is None
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [PARTIAL], "changed": []}


def test_the_manifest_is_never_written_through_a_planted_link(tmp_path: Path, outside: Path, server: FileServer,
                                                              store, gguf_bytes: bytes) -> None:
    (tmp_path / "models").mkdir()
    for name in ("npc.json", "npc.json.tmp"):  # the manifest, and the temp name it used to be written under
        (tmp_path / "models" / name).symlink_to(outside / "victim.bin")
    assert pull(store, server.url("/tiny.gguf")) is None
    assert (outside / "victim.bin").read_bytes() == VICTIM
    manifest = tmp_path / "models" / "npc.json"
    assert not manifest.is_symlink() and hashlib.sha256(gguf_bytes).hexdigest() in manifest.read_text()
    assert ModelCache(tmp_path / "models").get("npc") is not None  # the runtime reads the manifest C# wrote


def test_a_fifo_or_link_manifest_counts_as_not_pulled(tmp_path: Path, outside: Path, store) -> None:
    models = tmp_path / "models"
    models.mkdir()
    os.mkfifo(models / "npc.json")  # read as a manifest, it would block the editor's Models window forever
    (models / "npc.gguf").write_bytes(b"x" * 10)
    (outside / "other.json").write_text('{"size_bytes": 10}')
    (models / "other.json").symlink_to(outside / "other.json")
    (models / "other.gguf").write_bytes(b"x" * 10)
    answers: list = []
    looking = threading.Thread(target=lambda: answers.append((store.IsPulled("npc"), list(store.Pulled()))),
                               daemon=True)
    looking.start()
    looking.join(20)
    assert answers == [(False, [])]


# -- size and disk bounds ------------------------------------------------------------------------------------------


def test_an_endless_body_stops_at_the_size_limit_and_nothing_is_kept(
        tmp_path: Path, outside: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    from CoreAI.Downloads import DownloadFailure

    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)
    store.MaxDownloadBytes = 5_000_000
    before = tree(tmp_path)
    error = pull(store, server.url("/endless.gguf"))
    assert error.Kind == DownloadFailure.TooLarge and not error.Resumable
    assert "/endless.gguf sent more than 5.0 MB, over the 5.0 MB limit of a download (MaxBytes); nothing was kept" \
        in error.Message
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_claimed_size_over_the_default_limit_is_refused_before_a_byte_is_written(
        tmp_path: Path, outside: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    server.files["/huge.gguf"] = Served(gguf_bytes, claimed_length=100 * 10**9)
    before = tree(tmp_path)
    error = pull(store, server.url("/huge.gguf"))
    assert "/huge.gguf is 100.0 GB, over the 64.0 GB limit of a download (MaxBytes)" in error.Message
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_file_larger_than_the_free_disk_is_refused_before_a_byte_is_written(
        tmp_path: Path, outside: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    from CoreAI.Downloads import DownloadFailure

    server.files["/vast.gguf"] = Served(gguf_bytes, claimed_length=10**15)
    store.MaxDownloadBytes = 10**16
    before = tree(tmp_path)
    error = pull(store, server.url("/vast.gguf"))
    assert error.Kind == DownloadFailure.NoDiskSpace
    assert "not enough disk space: 1,000,000.0 GB more to download and 1.0 GB to keep free (KeepFreeBytes)" \
        in error.Message
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_download_stops_before_the_disk_falls_below_what_is_kept_free(
        tmp_path: Path, outside: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)
    store.KeepFreeBytes = shutil.disk_usage(tmp_path).free - 40 * 10**6  # 40 MB of room: the endless body fills it
    store.MaxDownloadBytes = 2 * 10**9
    before = tree(tmp_path)
    error = pull(store, server.url("/endless.gguf"))
    assert "stopped: not enough disk space" in error.Message and "nothing was kept" in error.Message
    assert server.files["/endless.gguf"].sent < 1024**3  # stopped long before the 2 GB cap
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_catalogue_download_stops_at_the_catalogue_size(tmp_path: Path, server: FileServer, store,
                                                          gguf_bytes: bytes) -> None:
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)  # no length: only the catalogue's size bounds it
    error = pull(store, server.url("/endless.gguf"), None, len(gguf_bytes))
    assert f"sent more than the {len(gguf_bytes)} bytes expected" in error.Message
    assert server.files["/endless.gguf"].sent < 64 * 1024 * 1024
    assert changes({}, tree(tmp_path))["added"] == FOLDERS


# -- a resume continues only the same file -------------------------------------------------------------------------


def test_a_pull_of_another_url_under_the_same_name_starts_over(tmp_path: Path, server: FileServer, store,
                                                               gguf_bytes: bytes) -> None:
    b_bytes = other_model(gguf_bytes)
    server.files["/a.gguf"] = Served(gguf_bytes, cut_after=len(gguf_bytes) // 2)
    server.files["/b.gguf"] = Served(b_bytes)
    assert pull(store, server.url("/a.gguf")).Resumable  # A cut halfway: its bytes kept for A's resume
    assert pull(store, server.url("/b.gguf")) is None
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == b_bytes  # not A's first half + B's second
    assert [(r.path, r.range) for r in server.requests] == [("/a.gguf", None), ("/b.gguf", None)]


@pytest.mark.parametrize("change", SERVER_CHANGES)
def test_a_file_changed_on_the_server_since_the_cut_is_downloaded_again(tmp_path: Path, server: FileServer, store,
                                                                        gguf_bytes: bytes, change: str) -> None:
    first, second, new = changed_on_server(gguf_bytes, change)
    server.files["/m.gguf"] = first
    assert pull(store, server.url("/m.gguf")).Resumable
    kept = tree(tmp_path)
    assert PARTIAL in kept and RECORD in kept and LOCK not in kept
    server.files["/m.gguf"] = second
    assert pull(store, server.url("/m.gguf")) is None
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == new
    if change in ("etag", "last-modified"):  # asked with If-Range: the server sent the new file whole
        validator = '"v1"' if change == "etag" else "Mon, 01 Dec 2026 10:00:00 GMT"
        assert server.requests[1].if_range == validator and server.requests[1].range is not None
        assert len(server.requests) == 2
    else:  # the answer showed another file: asked again, for the whole of it
        assert server.requests[-1].range is None


def test_the_same_file_still_resumes_with_its_validator(tmp_path: Path, server: FileServer, store,
                                                        gguf_bytes: bytes) -> None:
    cut = len(gguf_bytes) // 3
    server.files["/m.gguf"] = Served(gguf_bytes, cut_after=cut, etag='"v1"')
    assert pull(store, server.url("/m.gguf")).Resumable
    assert pull(store, server.url("/m.gguf"), hashlib.sha256(gguf_bytes).hexdigest()) is None
    assert (server.requests[-1].range, server.requests[-1].if_range) == (f"bytes={cut}-", '"v1"')


def test_bytes_without_a_record_are_not_resumed(tmp_path: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    # Planted (or left by an older package): nothing says which file they are, so they are not trusted.
    (tmp_path / PARTIAL).parent.mkdir(parents=True)
    (tmp_path / PARTIAL).write_bytes(b"\xff" * 1000)
    assert pull(store, server.url("/tiny.gguf")) is None
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == gguf_bytes and server.requests[-1].range is None


@pytest.mark.parametrize("first", ["package", "runtime"])
def test_what_one_side_kept_the_other_resumes(tmp_path: Path, server: FileServer, store, gguf_bytes: bytes,
                                              first: str) -> None:
    cut = len(gguf_bytes) // 2
    server.files["/m.gguf"] = Served(gguf_bytes, cut_after=cut, etag='"v1"')
    url = server.url("/m.gguf")
    cache = ModelCache(tmp_path / "models")
    if first == "package":
        assert pull(store, url).Resumable
        cache.pull(PullRequest("npc", url, hashlib.sha256(gguf_bytes).hexdigest(), None, "url"))
    else:
        with pytest.raises(DownloadError, match="run the same command again to resume"):
            cache.pull(PullRequest("npc", url, None, None, "url"))
        assert pull(store, url, hashlib.sha256(gguf_bytes).hexdigest()) is None
    assert (server.requests[-1].range, server.requests[-1].if_range) == (f"bytes={cut}-", '"v1"')
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == gguf_bytes
    assert store.IsPulled("npc") and cache.get("npc") is not None


def test_a_paused_pull_keeps_its_record_and_one_without_a_length_keeps_nothing(tmp_path: Path, server: FileServer,
                                                                               store, gguf_bytes: bytes) -> None:
    from CoreAI.Downloads import DownloadFailure
    from System.Threading import CancellationTokenSource

    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=8 * 1024, delay_s=0.02, etag='"v1"')
    pause = CancellationTokenSource()
    task = start(store, server.url("/slow.gguf"), pause=pause.Token)
    wait_for_bytes(tmp_path, task)
    pause.Cancel()
    error = settle(task)
    assert error.Kind == DownloadFailure.Paused and error.Resumable and "resumes where it stopped" in error.Message
    assert sorted(p for p in tree(tmp_path) if p.startswith("models/.partial/")) == [PARTIAL, RECORD]
    assert pull(store, server.url("/slow.gguf")) is None
    assert server.requests[-1].if_range == '"v1"' and server.requests[-1].range is not None

    # No length: nothing could tell a resume.
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True, delay_s=0.01)
    pause = CancellationTokenSource()
    task = store.PullAsync("other", server.url("/endless.gguf"), None, -1, "url", None,
                           CancellationTokenSource().Token, pause.Token)
    deadline = time.monotonic() + 30
    while server.files["/endless.gguf"].sent < 256 * 1024:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pause.Cancel()
    error = settle(task)
    assert error.Kind == DownloadFailure.Paused and not error.Resumable and "starts over next time" in error.Message
    assert not [p for p in tree(tmp_path) if "other" in p]


# -- lock files ----------------------------------------------------------------------------------------------------


def test_no_lock_file_is_left_by_any_pull_or_remove(tmp_path: Path, server: FileServer, store,
                                                    gguf_bytes: bytes) -> None:
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=1000)
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    for path, failed in [("/gone.gguf", True), ("/tiny.gguf", True), ("/cut.gguf", True), ("/tiny.gguf", False)]:
        assert (pull(store, server.url(path), "0" * 64 if failed else sha) is not None) == failed
        assert not [p for p in tree(tmp_path) if p.endswith(".lock")]
    assert store.Remove("npc") is True
    assert changes({}, tree(tmp_path))["added"] == FOLDERS


def test_remove_deletes_a_stopped_download_with_its_record(tmp_path: Path, server: FileServer, store,
                                                           gguf_bytes: bytes) -> None:
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=1000)
    assert pull(store, server.url("/cut.gguf")).Resumable
    assert store.Remove("npc") is True
    assert changes({}, tree(tmp_path))["added"] == FOLDERS


def test_a_running_pull_keeps_its_lock_against_a_second_pull_a_remove_and_the_runtime(
        tmp_path: Path, server: FileServer, store, gguf_bytes: bytes) -> None:
    from CoreAI.Downloads import DownloadException, DownloadFailure

    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.05)
    running = start(store, server.url("/slow.gguf"), hashlib.sha256(gguf_bytes).hexdigest())
    wait_for_bytes(tmp_path, running)
    held = os.stat(tmp_path / LOCK)
    second = pull(store, server.url("/slow.gguf"))
    assert second.Kind == DownloadFailure.Busy and "another download of npc is running" in second.Message
    with pytest.raises(DownloadException, match=r"a download of npc is running; stop it first \(nothing was removed\)"):
        store.Remove("npc")
    with pytest.raises(DownloadError, match="another download of npc.gguf is running"):
        ModelCache(tmp_path / "models").pull(PullRequest("npc", server.url("/slow.gguf"), None, None, "url"))
    assert os.path.samestat(os.stat(tmp_path / LOCK), held)  # none took the lock file away from its holder
    assert settle(running) is None
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == gguf_bytes and not (tmp_path / LOCK).exists()


# -- redirects -------------------------------------------------------------------------------------------------------


def test_a_redirect_loop_is_named(tmp_path: Path, outside: Path, server: FileServer, store) -> None:
    from CoreAI.Downloads import DownloadFailure

    server.files["/loop1.gguf"] = Served(b"", redirect="/loop2.gguf")
    server.files["/loop2.gguf"] = Served(b"", redirect="/loop1.gguf")
    before = tree(tmp_path)
    error = pull(store, server.url("/loop1.gguf"))
    assert error.Kind == DownloadFailure.BadRedirect and "/loop1.gguf redirects in a loop (back to " in error.Message
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_too_many_redirects_are_named(server: FileServer, store) -> None:
    for i in range(12):
        server.files[f"/hop{i}.gguf"] = Served(b"", redirect=f"/hop{i + 1}.gguf")
    error = pull(store, server.url("/hop0.gguf"))
    assert "/hop0.gguf redirected more than 10 times; check the URL" in error.Message
    assert len(server.requests) == 11


def test_a_redirect_to_a_file_url_is_refused(tmp_path: Path, outside: Path, server: FileServer, store) -> None:
    from CoreAI.Downloads import DownloadFailure

    server.files["/sneaky.gguf"] = Served(b"", redirect="file:///etc/passwd")
    before = tree(tmp_path)
    error = pull(store, server.url("/sneaky.gguf"))
    assert error.Kind == DownloadFailure.BadRedirect and not error.Resumable
    assert "/sneaky.gguf redirected to a file: URL; only http and https downloads are followed" in error.Message
    assert "resume" not in error.Message and "interrupted" not in error.Message
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_redirect_is_followed_without_reading_its_body(tmp_path: Path, server: FileServer, store,
                                                         gguf_bytes: bytes) -> None:
    server.files["/moved.gguf"] = Served(b"x" * 65536, redirect="/tiny.gguf", endless=True)
    assert pull(store, server.url("/moved.gguf")) is None
    assert (tmp_path / "models" / "npc.gguf").read_bytes() == gguf_bytes
    assert server.files["/moved.gguf"].sent < 16 * 1024 * 1024  # the endless body was not read


def test_a_redirect_from_https_down_to_http_is_refused(tmp_path: Path, server: FileServer, store,
                                                       gguf_bytes: bytes) -> None:
    from CoreAI.Downloads import DownloadFailure
    from CoreAI.Runtime import TlsTrust
    from System.Net import ServicePointManager

    certificates = make_certificates(tmp_path / "tls")
    secure = FileServer({"/tiny.gguf": Served(gguf_bytes),
                         "/down.gguf": Served(b"", redirect=server.url("/tiny.gguf"))},
                        tls=(certificates.server_cert, certificates.server_key))
    previous = ServicePointManager.ServerCertificateValidationCallback
    ServicePointManager.ServerCertificateValidationCallback = TlsTrust.Pinned(
        TlsTrust.FromPem(certificates.ca_cert.read_text()))  # the test CA, for this test only
    try:
        assert pull(store, secure.url("/tiny.gguf")) is None  # https itself is fine
        error = settle(store.PullAsync("down", secure.url("/down.gguf"), None, -1, "url", None,
                                       *_tokens()))
    finally:
        ServicePointManager.ServerCertificateValidationCallback = previous
        secure.close()
    assert error.Kind == DownloadFailure.BadRedirect and "redirected from https to plain http" in error.Message
    assert not server.requests  # the plain-http server was never asked


def _tokens():
    from System.Threading import CancellationToken

    return CancellationToken(False), CancellationToken(False)


def test_a_runtime_fetch_cancelled_before_it_starts_says_so_and_leaves_nothing(tmp_path: Path,
                                                                               server: FileServer) -> None:
    from CoreAI.Downloads import DownloadFailure, RuntimeArchive
    from System.Threading import CancellationToken

    checksum = b"0" * 64 + b"  coreai-runtime-linux-x64.tar.gz\n"
    server.files["/r/coreai-runtime-linux-x64.tar.gz.sha256"] = Served(checksum)
    task = RuntimeArchive.FetchAsync(server.url("/r"), "linux", "x64", str(tmp_path / "CoreAIRuntime" / "Linux"), None,
                                     CancellationToken(True))
    error = settle(task)
    assert error.Kind == DownloadFailure.Cancelled, error.Message
    assert not (tmp_path / "CoreAIRuntime").exists() and not server.requests
