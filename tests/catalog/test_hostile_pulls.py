"""`coreai-runtime models pull` and `models remove` against a hostile local process and a misbehaving server.

A hostile local process plants links (at the partial file, its lock, its record, the `.partial` folder) and
FIFOs; a server streams forever, claims absurd sizes, changes the file between two tries, redirects in a
loop, to file:// or from https down to http. Each test snapshots the whole tree (the cache and a folder
beside it) and checks what changed: outside the cache nothing, inside it only what a retry needs (the bytes
so far and their record), never a lock file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.download import DownloadError
from tests.support.file_server import (
    FOLDERS,
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
from tests.support.lock_hammer import start_hammers
from tests.support.tls import make_certificates
from tests.support.tree import changes, tree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the cache with a file no pull may write."""
    return make_outside_cache(tmp_path)


def pull(cli, models_dir: Path, url: str, *extra: str) -> tuple[int, str, str]:
    return cli("models", "pull", url, "--name", "npc", "--models-dir", str(models_dir), *extra)


# -- 3: links and special files planted in the cache ------------------------------------------------------


@pytest.mark.parametrize("planted", [PARTIAL, PARTIAL + ".lock", RECORD])
def test_a_link_planted_at_a_download_file_is_removed_and_its_target_untouched(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_sha256: str, cli,
        planted: str) -> None:
    (tmp_path / planted).parent.mkdir(parents=True)
    (tmp_path / planted).symlink_to(outside / "victim.bin")
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"), "--sha256", gguf_sha256)
    assert code == 0, err
    assert (outside / "victim.bin").read_bytes() == VICTIM
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [planted], "changed": []}


def test_a_link_at_the_partial_with_a_wrong_checksum_leaves_the_target_untouched(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, cli) -> None:
    (models_dir / ".partial").mkdir(parents=True)
    (tmp_path / PARTIAL).symlink_to(outside / "victim.bin")
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"), "--sha256", "0" * 64)
    assert code == 1 and "checksum mismatch" in err
    assert changes(before, tree(tmp_path)) == {"added": [], "removed": [PARTIAL], "changed": []}


def test_a_link_in_place_of_the_partial_folder_is_replaced_by_a_folder(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_sha256: str, cli) -> None:
    models_dir.mkdir()
    (models_dir / ".partial").symlink_to(outside, target_is_directory=True)
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"), "--sha256", gguf_sha256)
    assert code == 0, err
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [], "changed": ["models/.partial"]}
    assert (models_dir / ".partial").is_dir() and not (models_dir / ".partial").is_symlink()


def test_a_fifo_planted_at_the_partial_is_removed_without_being_opened(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_sha256: str, cli) -> None:
    (models_dir / ".partial").mkdir(parents=True)
    os.mkfifo(tmp_path / PARTIAL)  # opened for appending, it would block the pull forever
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"), "--sha256", gguf_sha256)
    assert code == 0, err
    assert changes(before, tree(tmp_path)) == {"added": PULLED, "removed": [PARTIAL], "changed": []}


def test_the_manifest_is_never_written_through_a_planted_link(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_sha256: str, cli) -> None:
    models_dir.mkdir()
    for name in ("npc.json", "npc.json.tmp"):  # the manifest, and the temp name it used to be written under
        (models_dir / name).symlink_to(outside / "victim.bin")
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"), "--sha256", gguf_sha256)
    assert code == 0, err
    assert (outside / "victim.bin").read_bytes() == VICTIM
    assert not (models_dir / "npc.json").is_symlink() and gguf_sha256 in (models_dir / "npc.json").read_text()


def test_models_list_skips_a_planted_fifo_or_link_manifest(tmp_path: Path, outside: Path, models_dir: Path,
                                                           cli) -> None:
    models_dir.mkdir()
    os.mkfifo(models_dir / "npc.json")  # read as a manifest, it would block `models list` forever
    (models_dir / "other.json").symlink_to(outside / "victim.bin")
    code, out, _ = cli("models", "list", "--json", "--models-dir", str(models_dir))
    assert code == 0 and '"pulled": true' not in out


# -- 4: size and disk bounds -----------------------------------------------------------------------------


def test_an_endless_body_stops_at_the_size_limit_and_nothing_is_kept(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli) -> None:
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/endless.gguf"), "--max-gb", "0.005")
    assert code == 1
    assert "/endless.gguf sent more than 5.0 MB, over the 5.0 MB limit of a download (--max-gb)" in err
    assert "nothing was kept" in err
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_claimed_size_over_the_default_limit_is_refused_before_a_byte_is_written(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli) -> None:
    server.files["/huge.gguf"] = Served(gguf_bytes, claimed_length=100 * 10**9)
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/huge.gguf"))
    assert code == 1 and "/huge.gguf is 100.0 GB, over the 64.0 GB limit of a download (--max-gb)" in err
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_file_larger_than_the_free_disk_is_refused_before_a_byte_is_written(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli) -> None:
    server.files["/vast.gguf"] = Served(gguf_bytes, claimed_length=10**15)
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/vast.gguf"), "--max-gb", "10000000")
    assert code == 1
    assert "not enough disk space: 1,000,000.0 GB more to download and 1.0 GB to keep free (--keep-free-gb)" in err
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_download_stops_before_the_disk_falls_below_what_is_kept_free(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli) -> None:
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)
    keep_free = shutil.disk_usage(tmp_path).free - 40 * 10**6  # 40 MB of room: the endless body fills it
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/endless.gguf"), "--keep-free-gb", str(keep_free / 1e9),
                        "--max-gb", "2")
    assert code == 1 and "stopped: not enough disk space" in err and "nothing was kept" in err
    assert server.files["/endless.gguf"].sent < 1024**3  # stopped long before the 2 GB cap
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_catalogue_download_stops_at_the_catalogue_size(server: FileServer, models_dir: Path,
                                                           gguf_bytes: bytes) -> None:
    server.files["/endless.gguf"] = Served(gguf_bytes, endless=True)  # no length: only the catalogue's size bounds it
    request = PullRequest("npc", server.url("/endless.gguf"), None, len(gguf_bytes), "catalogue")
    with pytest.raises(DownloadError, match=f"sent more than the {len(gguf_bytes)} bytes expected"):
        ModelCache(models_dir).pull(request)
    assert [p.name for p in models_dir.rglob("*")] == [".partial"]


# -- 5: a resume continues only the same file --------------------------------------------------------------


def test_a_pull_of_another_url_under_the_same_name_starts_over(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli) -> None:
    b_bytes = other_model(gguf_bytes)
    server.files["/a.gguf"] = Served(gguf_bytes, cut_after=len(gguf_bytes) // 2)
    server.files["/b.gguf"] = Served(b_bytes)
    assert pull(cli, models_dir, server.url("/a.gguf"))[0] == 1  # A cut halfway: its bytes kept for A's resume
    code, _, err = pull(cli, models_dir, server.url("/b.gguf"))
    assert code == 0, err
    assert (models_dir / "npc.gguf").read_bytes() == b_bytes  # B's bytes only, not A's first half + B's second
    assert [(r.path, r.range) for r in server.requests] == [("/a.gguf", None), ("/b.gguf", None)]
    assert (models_dir / "npc.json").read_text().count(hashlib.sha256(b_bytes).hexdigest()) == 1


@pytest.mark.parametrize("change", SERVER_CHANGES)
def test_a_file_changed_on_the_server_since_the_cut_is_downloaded_again(
        tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, cli,
        change: str) -> None:
    first, second, new = changed_on_server(gguf_bytes, change)
    server.files["/m.gguf"] = first
    assert pull(cli, models_dir, server.url("/m.gguf"))[0] == 1
    kept = tree(tmp_path)
    assert PARTIAL in kept and RECORD in kept
    server.files["/m.gguf"] = second
    code, _, err = pull(cli, models_dir, server.url("/m.gguf"))
    assert code == 0, err
    assert (models_dir / "npc.gguf").read_bytes() == new
    if change in ("etag", "last-modified"):  # asked with If-Range: the server sent the new file whole
        validator = '"v1"' if change == "etag" else "Mon, 01 Dec 2026 10:00:00 GMT"
        assert server.requests[1].if_range == validator and server.requests[1].range is not None
        assert len(server.requests) == 2
    else:  # the answer showed another file: asked again, for the whole of it
        assert server.requests[-1].range is None


def test_the_same_file_still_resumes_with_its_validator(tmp_path: Path, server: FileServer, models_dir: Path,
                                                        gguf_bytes: bytes, gguf_sha256: str, cli) -> None:
    cut = len(gguf_bytes) // 3
    server.files["/m.gguf"] = Served(gguf_bytes, cut_after=cut, etag='"v1"')
    assert pull(cli, models_dir, server.url("/m.gguf"))[0] == 1
    code, _, err = pull(cli, models_dir, server.url("/m.gguf"), "--sha256", gguf_sha256)
    assert code == 0 and "resuming at" in err
    assert (server.requests[-1].range, server.requests[-1].if_range) == (f"bytes={cut}-", '"v1"')


def test_bytes_without_a_record_are_not_resumed(tmp_path: Path, server: FileServer, models_dir: Path,
                                                gguf_bytes: bytes, cli) -> None:
    # Planted (or left by an older runtime): nothing says which file they are, so they are not trusted.
    (models_dir / ".partial").mkdir(parents=True)
    (tmp_path / PARTIAL).write_bytes(b"\xff" * 1000)
    code, _, err = pull(cli, models_dir, server.url("/tiny.gguf"))
    assert code == 0, err
    assert (models_dir / "npc.gguf").read_bytes() == gguf_bytes and server.requests[-1].range is None


# -- 6: lock files -------------------------------------------------------------------------------------------


def test_no_lock_file_is_left_by_any_pull_or_remove(tmp_path: Path, server: FileServer, models_dir: Path,
                                                    gguf_bytes: bytes, gguf_sha256: str, cli) -> None:
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=1000)
    for url, expected in [("/gone.gguf", 1), ("/tiny.gguf", 1), ("/cut.gguf", 1), ("/tiny.gguf", 0)]:
        sha = "0" * 64 if expected else gguf_sha256
        assert pull(cli, models_dir, server.url(url), "--sha256", sha)[0] == expected
        assert not [p for p in tree(tmp_path) if p.endswith(".lock")]
    assert cli("models", "remove", "npc", "--models-dir", str(models_dir))[0] == 0
    assert changes({}, tree(tmp_path))["added"] == FOLDERS


def test_remove_deletes_a_stopped_download_with_its_record(tmp_path: Path, server: FileServer, models_dir: Path,
                                                           gguf_bytes: bytes, cli) -> None:
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=1000)
    assert pull(cli, models_dir, server.url("/cut.gguf"))[0] == 1
    assert cli("models", "remove", "npc", "--models-dir", str(models_dir))[0] == 0
    assert changes({}, tree(tmp_path))["added"] == FOLDERS


def _as_in_a_terminal() -> None:
    # A command typed in a terminal gets Ctrl+C; one that inherits SIGINT ignored (a job a non-interactive shell
    # started in the background, as a CI runner may) never would, and Python then installs no Ctrl+C handler.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_pull(tmp_path: Path, url: str, models_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pyruntime.cli", "models", "pull", url, "--name", "npc", "--models-dir",
         str(models_dir), *extra], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)


def _wait_for_bytes(models_dir: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    partial = models_dir / ".partial" / "npc.gguf.partial"
    while not (partial.exists() and partial.stat().st_size > 0):
        assert process.poll() is None and time.monotonic() < deadline, "the pull never started writing"
        time.sleep(0.02)


def test_a_running_pull_keeps_its_lock_against_a_second_pull_and_a_remove(
        tmp_path: Path, server: FileServer, models_dir: Path, gguf_bytes: bytes, gguf_sha256: str, cli) -> None:
    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.05)
    running = _start_pull(tmp_path, server.url("/slow.gguf"), models_dir, "--sha256", gguf_sha256)
    _wait_for_bytes(models_dir, running)
    lock = models_dir / ".partial" / "npc.gguf.partial.lock"
    held = lock.stat()
    code, _, err = pull(cli, models_dir, server.url("/slow.gguf"))
    assert code == 1 and "another download of npc.gguf is running" in err
    code, _, err = cli("models", "remove", "npc", "--models-dir", str(models_dir))
    assert code == 1 and "a download of npc is running; stop it first (nothing was removed)" in err
    assert os.path.samestat(lock.stat(), held)  # neither took the lock file away from its holder
    _, stderr = running.communicate(timeout=60)
    assert running.returncode == 0, stderr
    assert (models_dir / "npc.gguf").read_bytes() == gguf_bytes and not lock.exists()


def test_deleting_the_lock_file_at_release_keeps_mutual_exclusion(tmp_path: Path) -> None:
    # Four processes take, delete and retake one lock file as fast as they can; a lost update shows two holders.
    counter = tmp_path / "counter"
    counter.write_text("0")
    rounds = 150
    workers = start_hammers(tmp_path, counter, rounds, 4)
    assert [w.wait(timeout=120) for w in workers] == [0] * 4
    assert int(counter.read_text()) == 4 * rounds
    assert not (tmp_path / "x.lock").exists()


# -- 7: clear errors ---------------------------------------------------------------------------------------


def test_a_redirect_loop_is_named(tmp_path: Path, outside: Path, server: FileServer, models_dir: Path, cli) -> None:
    server.files["/loop1.gguf"] = Served(b"", redirect="/loop2.gguf")
    server.files["/loop2.gguf"] = Served(b"", redirect="/loop1.gguf")
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/loop1.gguf"))
    assert code == 1 and "/loop1.gguf redirects in a loop (back to " in err and "unexpected" not in err
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_redirect_to_a_file_url_is_refused(tmp_path: Path, outside: Path, server: FileServer, models_dir: Path,
                                             cli) -> None:
    server.files["/sneaky.gguf"] = Served(b"", redirect="file:///etc/passwd")
    before = tree(tmp_path)
    code, _, err = pull(cli, models_dir, server.url("/sneaky.gguf"))
    assert code == 1
    assert "/sneaky.gguf redirected to a file: URL; only http and https downloads are followed" in err
    assert "resume" not in err and "interrupted" not in err
    assert changes(before, tree(tmp_path)) == {"added": FOLDERS, "removed": [], "changed": []}


def test_a_redirect_is_followed_without_reading_its_body(server: FileServer, models_dir: Path, gguf_bytes: bytes,
                                                         cli) -> None:
    server.files["/moved.gguf"] = Served(b"x" * 65536, redirect="/tiny.gguf", endless=True)
    code, _, err = pull(cli, models_dir, server.url("/moved.gguf"))
    assert code == 0, err
    assert (models_dir / "npc.gguf").read_bytes() == gguf_bytes
    assert server.files["/moved.gguf"].sent < 16 * 1024 * 1024  # the endless body was not read into memory


def test_a_redirect_from_https_down_to_http_is_refused(tmp_path: Path, server: FileServer, models_dir: Path,
                                                       gguf_bytes: bytes, cli, monkeypatch) -> None:
    certificates = make_certificates(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca_cert))
    secure = FileServer({"/tiny.gguf": Served(gguf_bytes),
                         "/down.gguf": Served(b"", redirect=server.url("/tiny.gguf"))},
                        tls=(certificates.server_cert, certificates.server_key))
    try:
        assert pull(cli, models_dir, secure.url("/tiny.gguf"))[0] == 0  # https itself is fine
        code, _, err = cli("models", "pull", secure.url("/down.gguf"), "--name", "down", "--models-dir",
                           str(models_dir))
    finally:
        secure.close()
    assert code == 1 and "redirected from https to plain http" in err
    assert not server.requests  # the plain-http server was never asked


def test_pull_errors_are_logged_under_the_models_logger(server: FileServer, models_dir: Path, cli, caplog) -> None:
    assert pull(cli, models_dir, server.url("/gone.gguf"))[0] == 1
    assert [r.name for r in caplog.records if r.levelname == "ERROR"] == ["pyruntime.cli.models"]


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "Ctrl+C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stopped_pull_says_so_in_one_line_and_resumes(tmp_path: Path, outside: Path, server: FileServer,
                                                        models_dir: Path, gguf_bytes: bytes, gguf_sha256: str,
                                                        sig: int, code: int, said: str) -> None:
    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=16 * 1024, delay_s=0.05)
    before = tree(tmp_path)
    running = _start_pull(tmp_path, server.url("/slow.gguf"), models_dir, "--sha256", gguf_sha256)
    _wait_for_bytes(models_dir, running)
    running.send_signal(sig)
    _, stderr = running.communicate(timeout=30)
    assert running.returncode == code, stderr
    assert "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if "ERROR" in line]
    assert f"pyruntime.cli.models: the pull of npc was stopped ({said}); the " in line
    assert "downloaded so far are kept: run the same command again to resume" in line
    assert changes(before, tree(tmp_path))["added"] == [*FOLDERS, PARTIAL, RECORD]  # no lock file
    kept = (tmp_path / PARTIAL).stat().st_size
    resumed = _start_pull(tmp_path, server.url("/slow.gguf"), models_dir, "--sha256", gguf_sha256)
    _, stderr = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, stderr
    assert server.requests[-1].range == f"bytes={kept}-"
    assert (models_dir / "npc.gguf").read_bytes() == gguf_bytes
