"""`coreai-runtime models pull` against a real HTTP server on loopback: progress, resume after a cut, servers that
ignore ranges, stall, answer 404 or send the wrong bytes; and what is left in the cache each time (nothing
half-written).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.download import DownloadError, DownloadProgress
from tests.support.file_server import FileServer, Served


def _leftovers(models_dir: Path) -> list[str]:
    """Every file left in the cache (lock files included: a pull, ended however, leaves none)."""
    return sorted(str(p.relative_to(models_dir)) for p in models_dir.rglob("*") if p.is_file() or p.is_symlink())


def test_a_pull_shows_progress_verifies_and_lands_in_the_cache(server: FileServer, models_dir: Path, gguf_bytes: bytes,
                                                               gguf_sha256: str, cli) -> None:
    code, out, err = cli("models", "pull", server.url("/tiny.gguf"), "--sha256", gguf_sha256,
                          "--name", "npc-model", "--models-dir", str(models_dir))
    assert code == 0, err
    assert Path(out.strip()) == models_dir / "npc-model.gguf"
    assert (models_dir / "npc-model.gguf").read_bytes() == gguf_bytes
    assert "npc-model: [" in err and "100.0%" in err  # the progress bar, on stderr
    manifest = json.loads((models_dir / "npc-model.json").read_text())
    assert manifest["sha256"] == gguf_sha256 and manifest["size_bytes"] == len(gguf_bytes)
    assert _leftovers(models_dir) == ["npc-model.gguf", "npc-model.json"]

    code, out, _ = cli("models", "path", "npc-model", "--models-dir", str(models_dir))
    assert code == 0 and Path(out.strip()) == models_dir / "npc-model.gguf"
    code, out, _ = cli("models", "list", "--json", "--models-dir", str(models_dir))
    rows = {row["name"]: row for row in map(json.loads, out.splitlines())}
    assert rows["npc-model"]["pulled"] is True and rows["npc-model"]["sha256"] == gguf_sha256
    assert rows["smollm2-135m"]["pulled"] is False  # the catalogue is listed too


def test_progress_events_count_up_to_the_size(server: FileServer, models_dir: Path, gguf_bytes: bytes,
                                              gguf_sha256: str) -> None:
    seen: list[DownloadProgress] = []
    ModelCache(models_dir).pull(PullRequest.of(server.url("/tiny.gguf"), sha256=gguf_sha256), progress=seen.append)
    assert seen[0].received == 0 and seen[-1].received == len(gguf_bytes)
    assert all(p.total == len(gguf_bytes) for p in seen)
    assert [p.received for p in seen] == sorted(p.received for p in seen) and len(seen) > 2


def test_an_interrupted_pull_resumes_with_a_range_request(server: FileServer, models_dir: Path, gguf_bytes: bytes,
                                                          gguf_sha256: str, cli) -> None:
    cut = len(gguf_bytes) // 3
    server.files["/cut.gguf"] = Served(gguf_bytes, cut_after=cut)
    args = ("models", "pull", server.url("/cut.gguf"), "--sha256", gguf_sha256, "--models-dir", str(models_dir))
    code, _, err = cli(*args)
    assert code == 1
    assert "interrupted" in err and "run the same command again to resume" in err
    # kept for the resume, outside the cache, with what they are (the URL's digest, the length)
    assert _leftovers(models_dir) == [".partial/cut.gguf.partial", ".partial/cut.gguf.partial.json"]
    assert (models_dir / ".partial" / "cut.gguf.partial").stat().st_size == cut
    assert cli("models", "path", "cut", "--models-dir", str(models_dir))[0] == 1  # not usable yet

    code, _, err = cli(*args)
    assert code == 0, err
    assert "resuming at" in err
    assert [r.range for r in server.requests] == [None, f"bytes={cut}-"]  # only the rest was fetched
    assert hashlib.sha256((models_dir / "cut.gguf").read_bytes()).hexdigest() == gguf_sha256
    assert _leftovers(models_dir) == ["cut.gguf", "cut.json"]


def test_a_server_that_ignores_ranges_sends_the_whole_file_again(server: FileServer, models_dir: Path,
                                                                 gguf_bytes: bytes, gguf_sha256: str) -> None:
    server.files["/noranges.gguf"] = Served(gguf_bytes, ranges=False, cut_after=len(gguf_bytes) // 2)
    cache = ModelCache(models_dir)
    request = PullRequest.of(server.url("/noranges.gguf"), sha256=gguf_sha256)
    with pytest.raises(DownloadError) as cut:
        cache.pull(request)
    assert cut.value.resumable
    model = cache.pull(request)
    assert model.sha256 == gguf_sha256 and model.path.read_bytes() == gguf_bytes


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(server: FileServer, models_dir: Path, cli) -> None:
    code, _, err = cli("models", "pull", server.url("/tiny.gguf"), "--sha256", "0" * 64,
                        "--models-dir", str(models_dir))
    assert code == 1
    assert "checksum mismatch" in err and "expected sha256 " + "0" * 64 in err
    assert _leftovers(models_dir) == []


def test_a_missing_file_is_a_clear_404(server: FileServer, models_dir: Path, cli) -> None:
    code, _, err = cli("models", "pull", server.url("/gone.gguf"), "--models-dir", str(models_dir))
    assert code == 1
    assert "/gone.gguf was not found (HTTP 404)" in err
    assert _leftovers(models_dir) == []


def test_a_file_that_is_not_gguf_is_refused(server: FileServer, models_dir: Path, cli) -> None:
    server.files["/page.gguf"] = Served(b"<html>log in to download</html>" * 100)
    code, _, err = cli("models", "pull", server.url("/page.gguf"), "--models-dir", str(models_dir))
    assert code == 1
    assert "not usable" in err and "not a GGUF file" in err
    assert _leftovers(models_dir) == []


def test_a_truncated_file_is_refused_when_the_size_is_known(server: FileServer, models_dir: Path,
                                                            gguf_bytes: bytes) -> None:
    server.files["/short.gguf"] = Served(gguf_bytes[: len(gguf_bytes) - 1000])  # a whole response, of a short file
    request = PullRequest("short", server.url("/short.gguf"), None, len(gguf_bytes), "catalogue")
    with pytest.raises(DownloadError, match="bytes, but .* were expected"):
        ModelCache(models_dir).pull(request)
    assert _leftovers(models_dir) == []


def test_a_server_that_closes_early_leaves_a_resumable_partial(server: FileServer, models_dir: Path,
                                                               gguf_bytes: bytes, gguf_sha256: str) -> None:
    # Content-Length promises the whole file, the body stops short: never taken for a complete file.
    server.files["/lying.gguf"] = Served(gguf_bytes[:5000], claimed_length=len(gguf_bytes))
    with pytest.raises(DownloadError) as error:
        ModelCache(models_dir).pull(PullRequest.of(server.url("/lying.gguf"), sha256=gguf_sha256))
    assert error.value.resumable
    assert _leftovers(models_dir) == [".partial/lying.gguf.partial", ".partial/lying.gguf.partial.json"]


def test_a_slow_server_still_completes(server: FileServer, models_dir: Path, gguf_bytes: bytes,
                                       gguf_sha256: str) -> None:
    server.files["/slow.gguf"] = Served(gguf_bytes, chunk=64 * 1024, delay_s=0.05)
    seen: list[DownloadProgress] = []
    model = ModelCache(models_dir).pull(PullRequest.of(server.url("/slow.gguf"), sha256=gguf_sha256),
                                        progress=seen.append, timeout_s=5)
    assert model.sha256 == gguf_sha256 and len(seen) >= len(gguf_bytes) // (64 * 1024)


def test_a_stalled_server_times_out_and_the_pull_resumes_later(server: FileServer, models_dir: Path,
                                                               gguf_bytes: bytes, gguf_sha256: str) -> None:
    server.files["/stall.gguf"] = Served(gguf_bytes, stall_s=3.0)
    cache = ModelCache(models_dir)
    request = PullRequest.of(server.url("/stall.gguf"), sha256=gguf_sha256)
    with pytest.raises(DownloadError, match="the server stopped sending") as stalled:
        cache.pull(request, timeout_s=0.5)
    assert stalled.value.resumable
    kept = (models_dir / ".partial" / "stall.gguf.partial").stat().st_size
    assert 0 < kept < len(gguf_bytes)
    server.files["/stall.gguf"].stall_s = 0
    assert cache.pull(request, timeout_s=5).sha256 == gguf_sha256
    assert server.requests[-1].range == f"bytes={kept}-"


def test_remove_deletes_the_model_and_its_manifest(server: FileServer, models_dir: Path, gguf_sha256: str,
                                                   cli) -> None:
    ModelCache(models_dir).pull(PullRequest.of(server.url("/tiny.gguf"), sha256=gguf_sha256, name="gone-soon"))
    assert cli("models", "remove", "gone-soon", "--models-dir", str(models_dir))[0] == 0
    assert _leftovers(models_dir) == []
    code, _, err = cli("models", "path", "gone-soon", "--models-dir", str(models_dir))
    assert code == 1 and "models pull gone-soon" in err


def test_a_pulled_file_changed_on_disk_no_longer_counts_as_pulled(server: FileServer, models_dir: Path,
                                                                  gguf_sha256: str) -> None:
    cache = ModelCache(models_dir)
    model = cache.pull(PullRequest.of(server.url("/tiny.gguf"), sha256=gguf_sha256))
    with model.path.open("r+b") as f:
        f.truncate(1000)  # a copy cut short by a full disk or another tool
    assert cache.get(model.name) is None
    assert cache.pull(PullRequest.of(server.url("/tiny.gguf"), sha256=gguf_sha256)).path.stat().st_size > 1000


def test_bad_input_is_a_usage_error(models_dir: Path, cli) -> None:
    assert cli("models", "pull", "no-such-model", "--models-dir", str(models_dir))[0] == 1
    code, _, err = cli("models", "pull", "https://example.invalid/x.gguf", "--sha256", "xyz",
                        "--models-dir", str(models_dir))
    assert code == 2 and "--sha256 must be 64 hexadecimal digits" in err
    code, _, err = cli("models", "path", "../etc/passwd", "--models-dir", str(models_dir))
    assert code == 2 and "not a path" in err
