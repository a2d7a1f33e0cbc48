"""One resumable, verified download into a file: HTTP ranges, a sha256 check, an atomic move.

The bytes go to `<partial_dir>/<name>.partial` first. An interrupted download keeps that file and the
next call asks for the rest (`Range: bytes=N-`); a server that ignores ranges gets the whole file again.
Only a complete file whose size and sha256 match (and that `validate` accepts) is moved onto `dest`,
with `os.replace`: `dest` is never half-written. A wrong checksum, a truncated body or a file that fails
validation deletes the partial file and raises DownloadError with the reason. Transport only: no
knowledge of models (the cache decides names and folders).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import filelock
import httpx

from pyruntime.errors import CoreAIError

PARTIAL_SUFFIX = ".partial"
DEFAULT_TIMEOUT_S = 30.0  # connect and per-read: a server that sends nothing for this long has stalled
_HASH_BLOCK = 1 << 20


class DownloadError(CoreAIError):
    """A download failed; the message says why and what to do. `resumable`: the partial file was kept."""

    def __init__(self, message: str, *, resumable: bool = False) -> None:
        super().__init__(message)
        self.resumable = resumable


@dataclass(frozen=True)
class DownloadProgress:
    """How far a download is: bytes in the file so far (resumed ones included) of `total` (None: unknown)."""

    received: int
    total: int | None
    resumed_from: int = 0

    @property
    def fraction(self) -> float | None:
        """0..1, or None when the total is unknown."""
        return min(1.0, self.received / self.total) if self.total else None


ProgressCallback = Callable[[DownloadProgress], None]
Validator = Callable[[Path], None]  # raises (any CoreAIError) when the finished file is unusable


def public_url(url: str) -> str:
    """`url` without its query and credentials, for messages (signed URLs carry tokens there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def partial_path(dest: Path, partial_dir: Path | None = None) -> Path:
    """Where the bytes of `dest` collect until they are verified."""
    return (partial_dir or dest.parent) / (dest.name + PARTIAL_SUFFIX)


def download(url: str, dest: Path, *, sha256: str | None = None, size: int | None = None,
             progress: ProgressCallback | None = None, validate: Validator | None = None,
             partial_dir: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Download `url` to `dest` (resuming a partial file), check it, move it in place; returns its sha256 (hex)."""
    dest = Path(dest)
    partial = partial_path(dest, partial_dir)
    partial.parent.mkdir(parents=True, exist_ok=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(partial) + ".lock")
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise DownloadError(f"another download of {dest.name} is running (wait for it, or stop it)") from None
    try:
        with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(timeout_s)) as client:
            digest = _fetch(client, url, partial, size=size, progress=progress)
        _verify(partial, digest, sha256=sha256, size=size, validate=validate, url=url)
        _move_into_place(partial, dest)
        return digest
    finally:
        lock.release()


def _fetch(client: httpx.Client, url: str, partial: Path, *, size: int | None,
           progress: ProgressCallback | None) -> str:
    """Complete `partial` from the server; returns the sha256 of the whole file."""
    offset = partial.stat().st_size if partial.exists() else 0
    if size is not None and offset > size:
        offset = _restart(partial)
    for _attempt in range(2):  # a second pass only after the server refused or ignored the range
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        try:
            with client.stream("GET", url, headers=headers) as response:
                if response.status_code == 416 and offset:
                    if size is None or offset == size:
                        return _hash_file(partial)  # nothing left to fetch: the partial file is whole
                    offset = _restart(partial)
                    continue
                _check_status(response, url, partial)
                start = _start_of(response, offset)
                if start != offset:  # the server ignored the range (200) or answered another one: start over
                    offset = _restart(partial)
                    if start != 0:
                        continue
                total = _total_of(response, offset)
                if size is not None and total is not None and total != size:
                    partial.unlink(missing_ok=True)
                    raise DownloadError(f"{public_url(url)} is {total} bytes, but {size} were expected: "
                                        "not the file this entry names; nothing was kept")
                return _append(response, partial, offset, size if size is not None else total, progress, url)
        except httpx.TimeoutException:
            raise DownloadError(_interrupted(partial, url, "the server stopped sending"), resumable=True) from None
        except httpx.TransportError as exc:
            raise DownloadError(_interrupted(partial, url, f"the connection failed ({type(exc).__name__})"),
                                resumable=True) from None
    raise DownloadError(f"{public_url(url)} answered no usable range twice; try again later")


def _append(response: httpx.Response, partial: Path, offset: int, total: int | None,
            progress: ProgressCallback | None, url: str) -> str:
    hasher = hashlib.sha256()
    if offset:
        _hash_into(hasher, partial)
    received = offset
    if progress is not None:
        progress(DownloadProgress(received, total, offset))
    with partial.open("ab") as f:
        try:
            for chunk in response.iter_bytes():  # as they arrive: progress moves on a slow line too
                f.write(chunk)
                hasher.update(chunk)
                received += len(chunk)
                if progress is not None:
                    progress(DownloadProgress(received, total, offset))
        finally:
            _sync(f)
    if total is not None and received < total:
        raise DownloadError(_interrupted(partial, url, "the server closed the connection early"), resumable=True)
    return hasher.hexdigest()


def _verify(partial: Path, digest: str, *, sha256: str | None, size: int | None, validate: Validator | None,
            url: str) -> None:
    actual = partial.stat().st_size
    if size is not None and actual != size:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"the download of {public_url(url)} is truncated or padded: {actual} bytes where {size} "
                            "were expected; it was deleted, run the command again")
    if sha256 is not None and digest != sha256.lower():
        partial.unlink(missing_ok=True)
        raise DownloadError(f"checksum mismatch for {public_url(url)}: expected sha256 {sha256.lower()}, got {digest}; "
                            "the file was deleted (the server sent another or a corrupt file)")
    if validate is not None:
        try:
            validate(partial)
        except CoreAIError as exc:
            partial.unlink(missing_ok=True)
            raise DownloadError(f"{public_url(url)} is not usable: {exc}; the file was deleted") from None


def _check_status(response: httpx.Response, url: str, partial: Path) -> None:
    if response.status_code < 400:
        return
    if response.status_code == 404:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"{public_url(url)} was not found (HTTP 404): check the name or URL")
    if response.status_code in (401, 403):
        raise DownloadError(f"{public_url(url)} refused the download (HTTP {response.status_code}): the file may "
                            "need a login or licence acceptance on its site; download it there and use --model PATH")
    raise DownloadError(f"{public_url(url)} answered HTTP {response.status_code}; try again later",
                        resumable=partial.exists())


def _start_of(response: httpx.Response, offset: int) -> int:
    """The first byte the response carries: 0 for a 200, the Content-Range start for a 206."""
    if response.status_code != 206:
        return 0
    value = response.headers.get("content-range", "")
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return -1  # unreadable: treated as a range we did not ask for


def _total_of(response: httpx.Response, offset: int) -> int | None:
    """The whole file's size as the server states it (Content-Range total, or offset + Content-Length)."""
    if response.status_code == 206:
        total = response.headers.get("content-range", "").rpartition("/")[2]
        if total.isdigit():
            return int(total)
    length = response.headers.get("content-length", "")
    if length.isdigit() and "content-encoding" not in response.headers:
        return offset + int(length)
    return None


def _restart(partial: Path) -> int:
    partial.unlink(missing_ok=True)
    return 0


def _interrupted(partial: Path, url: str, why: str) -> str:
    have = partial.stat().st_size if partial.exists() else 0
    return (f"the download of {public_url(url)} was interrupted: {why} after {have} bytes; "
            "run the same command again to resume where it stopped")


def _hash_file(path: Path) -> str:
    hasher = hashlib.sha256()
    _hash_into(hasher, path)
    return hasher.hexdigest()


def _hash_into(hasher: hashlib._Hash, path: Path) -> None:
    with path.open("rb") as f:
        for block in _blocks(f):
            hasher.update(block)


def _blocks(f: IO[bytes]) -> Iterator[bytes]:
    while block := f.read(_HASH_BLOCK):
        yield block


def _sync(f: IO[bytes]) -> None:
    f.flush()
    with contextlib.suppress(OSError):
        os.fsync(f.fileno())


def _move_into_place(partial: Path, dest: Path) -> None:
    os.replace(partial, dest)
    if os.name != "nt":  # the rename itself survives a crash only once the folder is synced
        with contextlib.suppress(OSError):
            fd = os.open(dest.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
