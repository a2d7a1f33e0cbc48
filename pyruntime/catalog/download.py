"""One resumable, verified download into a file: HTTP ranges, bounded size and disk use, a sha256 check, an atomic
move.

The bytes collect in the cache's `.partial/` folder (`partial.PartialFiles`, which follows no link and holds
the download's lock). A download resumes only the same file: the same URL, and a server that still describes
it with the same length and ETag / Last-Modified (sent as `If-Range`, and checked on the answer); anything
else starts over, and bytes whose length the server never said are not kept at all. Bounded: a download
stops once it passes its size (the catalogue's, else `max_bytes`) and before it would leave less than
`keep_free` bytes on the disk. Redirects are followed up to `MAX_REDIRECTS`, only to http(s), never from
https down to http, and their bodies are never read. Only a complete file whose size and sha256 match (and
that `validate` accepts) is moved onto `dest` with one rename: `dest` is never half-written. Every failure
is a DownloadError that says why, whether the bytes so far were kept, and what to do. Transport only: no
knowledge of models (the cache decides names and folders).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from pyruntime.catalog import lockfile
from pyruntime.catalog.partial import PartialFiles, RemoteFile, url_digest
from pyruntime.errors import CoreAIError

DEFAULT_TIMEOUT_S = 30.0  # connect and per-read: a server that sends nothing for this long has stalled
DEFAULT_MAX_BYTES = 64 * 10**9  # a URL pull of unknown size stops here (the largest local GGUFs are ~40 GB)
DEFAULT_KEEP_FREE = 10**9  # a download never leaves less free on its disk (the game's saves still fit)
MAX_REDIRECTS = 10
DISK_CHECK_EVERY = 32 * 1024 * 1024  # bytes between two looks at the free disk space


class DownloadError(CoreAIError):
    """A download failed; the message says why and what to do. `resumable`: the bytes so far were kept."""

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


def public_url(url: str | httpx.URL) -> str:
    """`url` without its query and credentials, for messages (signed URLs carry tokens there)."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def size_text(n: int) -> str:
    """A byte count for people: `1.5 GB`, `12.0 MB`."""
    return f"{n / 1e9:,.1f} GB" if n >= 10**9 else f"{n / 1e6:,.1f} MB"


def download(url: str, dest: Path, *, sha256: str | None = None, size: int | None = None,
             progress: ProgressCallback | None = None, validate: Validator | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES,
             keep_free: int = DEFAULT_KEEP_FREE) -> str:
    """Download `url` to `dest` (resuming its partial file), check it, move it in place; returns its sha256 (hex)."""
    dest = Path(dest)
    try:
        with PartialFiles.locked(dest.parent, dest.name) as files:
            try:
                with httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False,
                                  event_hooks={"response": [_redirect_policy(url)]}) as client:
                    digest = _Fetch(client, url, files, size=size, max_bytes=max_bytes, keep_free=keep_free,
                                    progress=progress).run()
                _verify(files, digest, sha256=sha256, size=size, validate=validate, url=url)
            except BaseException as exc:
                # Kept only when the error says so (or the run was stopped) and the bytes can be resumed.
                keep = exc.resumable if isinstance(exc, DownloadError) else True
                if not keep or files.remote() is None:
                    files.discard()
                raise
            files.move_to(dest)
            return digest
    except lockfile.LockBusy:
        raise DownloadError(f"another download of {dest.name} is running (wait for it, or stop it)") from None


def _redirect_policy(url: str) -> Callable[[httpx.Response], None]:
    """A response hook: refuse a redirect to anything but http(s), or from https down to http, before it is built."""

    def check(response: httpx.Response) -> None:
        if not response.has_redirect_location:
            return
        try:
            target = response.url.join(response.headers["location"])
        except httpx.InvalidURL:
            raise DownloadError(f"{public_url(url)} answered with a redirect to an invalid URL") from None
        if target.scheme not in ("http", "https"):
            raise DownloadError(f"{public_url(url)} redirected to a {target.scheme}: URL; only http and https "
                                "downloads are followed (nothing was downloaded from it)")
        if response.url.scheme == "https" and target.scheme == "http":
            raise DownloadError(f"{public_url(url)} redirected from https to plain http ({public_url(target)}); "
                                "refused, since the file could be changed on the way")

    return check


class _Fetch:
    """Completes the partial file of one download from the server; `run()` returns the whole file's sha256."""

    def __init__(self, client: httpx.Client, url: str, files: PartialFiles, *, size: int | None, max_bytes: int,
                 keep_free: int, progress: ProgressCallback | None) -> None:
        self.client = client
        self.url = url
        self.files = files
        self.size = size
        self.limit = size if size is not None else max_bytes
        self.max_bytes = max_bytes
        self.keep_free = keep_free
        self.progress = progress

    def run(self) -> str:
        kept = self._resumable()
        offset = self.files.size() if kept is not None else 0
        if self.size is not None:
            self._check_disk(self.size - offset)
        for _attempt in range(2):  # a second pass only after the server refused the range or sent another file
            headers = {}
            if kept is not None and offset:
                headers["Range"] = f"bytes={offset}-"
                if (validator := kept.if_range()) is not None:
                    headers["If-Range"] = validator  # a changed file comes back whole (200), not spliced
            try:
                with self._get(headers) as response:
                    if response.status_code == 416 and kept is not None and offset:
                        if offset == kept.length:
                            return self._hash_kept()  # nothing left to fetch: the partial file is whole
                        kept, offset = self._start_over()
                        continue
                    self._check_status(response)
                    now = self._described(response, offset)
                    start = _start_of(response)
                    if offset and (start != offset or kept is None or now is None or not kept.continues(now)):
                        kept, offset = self._start_over()  # another file now, or another range than asked
                        if start != 0:
                            continue  # a part of something else: ask again for the whole
                    if offset == 0:
                        self.files.begin(now)
                    return self._append(response, offset, now.length if now is not None else None)
            except httpx.TimeoutException:
                raise self._interrupted("the server stopped sending") from None
            except httpx.TransportError as exc:
                raise self._interrupted(f"the connection failed ({type(exc).__name__})") from None
        raise DownloadError(f"{public_url(self.url)} answered no usable range twice; try again later",
                            resumable=self._kept())

    # -- the partial file ---------------------------------------------------------------------

    def _resumable(self) -> RemoteFile | None:
        """The record of the kept bytes when they can be continued from this URL; else they are discarded."""
        kept = self.files.remote()
        size = self.files.size()
        if (kept is None or size == 0 or kept.url_sha256 != url_digest(self.url) or size > kept.length
                or (self.size is not None and kept.length != self.size)):
            self.files.discard()  # bytes of another URL, or of nothing known, are never continued
            return None
        return kept

    def _start_over(self) -> tuple[None, int]:
        self.files.discard()
        return None, 0

    def _kept(self) -> bool:
        return self.files.size() > 0 and self.files.remote() is not None

    def _hash_kept(self) -> str:
        hasher = hashlib.sha256()
        self.files.hash_into(hasher)
        return hasher.hexdigest()

    def _append(self, response: httpx.Response, offset: int, total: int | None) -> str:
        if total is not None:
            if self.size is not None and total != self.size:
                raise DownloadError(f"{public_url(self.url)} is {total} bytes, but {self.size} were expected: not "
                                    "the file this entry names; nothing was kept")
            if total > self.limit:
                raise self._over_limit(total)
            self._check_disk(total - offset)
        hasher = hashlib.sha256()
        if offset:
            self.files.hash_into(hasher)
        received = offset
        self._report(received, total, offset)
        next_check = received + DISK_CHECK_EVERY
        try:
            with self.files.appending() as file:
                for chunk in response.iter_bytes():  # as they arrive: progress moves on a slow line too
                    if received + len(chunk) > self.limit:
                        raise self._over_limit(None)
                    file.write(chunk)
                    hasher.update(chunk)
                    received += len(chunk)
                    self._report(received, total, offset)
                    if received >= next_check:
                        self._check_disk(None)
                        next_check = received + DISK_CHECK_EVERY
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
                raise
            raise self._no_room("the disk is full") from None
        if total is not None and received < total:
            raise self._interrupted("the server closed the connection early")
        return hasher.hexdigest()

    def _report(self, received: int, total: int | None, offset: int) -> None:
        if self.progress is not None:
            self.progress(DownloadProgress(received, total, offset))

    # -- limits -------------------------------------------------------------------------------

    def _check_disk(self, more: int | None) -> None:
        """DownloadError when `more` bytes (None: nothing more known) would leave less than keep_free."""
        free = shutil.disk_usage(self.files.folder.path).free
        if free >= (more or 0) + self.keep_free:
            return
        wanted = f"{size_text(more)} more to download and " if more else ""
        raise self._no_room(f"not enough disk space: {wanted}{size_text(self.keep_free)} to keep free "
                            f"(--keep-free-gb), but {size_text(free)} free")

    def _no_room(self, why: str) -> DownloadError:
        resumable = self._kept()
        kept = (f"the {size_text(self.files.size())} downloaded so far are kept: free some space and run the same "
                "command again to resume") if resumable else "nothing was kept"
        return DownloadError(f"the download of {public_url(self.url)} stopped: {why}; {kept}", resumable=resumable)

    def _over_limit(self, total: int | None) -> DownloadError:
        url = public_url(self.url)
        if self.size is not None:
            return DownloadError(f"{url} sent more than the {self.size} bytes expected: not the file this entry "
                                 "names; nothing was kept")
        said = f"is {size_text(total)}" if total is not None else f"sent more than {size_text(self.limit)}"
        return DownloadError(f"{url} {said}, over the {size_text(self.max_bytes)} limit of a download (--max-gb); "
                             "nothing was kept (pass a larger --max-gb if the model really is that large)")

    # -- HTTP -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _get(self, headers: dict[str, str]) -> Iterator[httpx.Response]:
        """The answer to GET url, following redirects (never reading their bodies) and refusing loops."""
        request = self.client.build_request("GET", self.url, headers=headers)
        seen = {str(request.url)}
        for _ in range(MAX_REDIRECTS + 1):
            response = self.client.send(request, stream=True)
            if response.next_request is None:
                try:
                    yield response
                finally:
                    response.close()
                return
            response.close()
            request = response.next_request
            if str(request.url) in seen:
                raise DownloadError(f"{public_url(self.url)} redirects in a loop (back to {public_url(request.url)}); "
                                    "check the URL", resumable=self._kept())
            seen.add(str(request.url))
        raise DownloadError(f"{public_url(self.url)} redirected more than {MAX_REDIRECTS} times; check the URL",
                            resumable=self._kept())

    def _described(self, response: httpx.Response, offset: int) -> RemoteFile | None:
        """What the answer says of the whole file; None when it gives no length (such bytes are not resumable)."""
        total = _total_of(response, offset)
        if total is None:
            return None
        try:
            return RemoteFile.model_validate({
                "url_sha256": url_digest(self.url), "length": total, "etag": response.headers.get("etag"),
                "last_modified": response.headers.get("last-modified")})
        except ValidationError:  # a length or validator beyond reason: not resumable
            return None

    def _check_status(self, response: httpx.Response) -> None:
        code = response.status_code
        if code < 400:
            return
        url = public_url(self.url)
        if code == 404:
            self.files.discard()
            raise DownloadError(f"{url} was not found (HTTP 404): check the name or URL")
        if code in (401, 403):
            raise DownloadError(f"{url} refused the download (HTTP {code}): the file may need a login or licence "
                                "acceptance on its site; download it there and use --model PATH",
                                resumable=self._kept())
        raise DownloadError(f"{url} answered HTTP {code}; try again later", resumable=self._kept())

    def _interrupted(self, why: str) -> DownloadError:
        have = self.files.size()
        if self._kept():
            return DownloadError(f"the download of {public_url(self.url)} was interrupted: {why} after {have} bytes; "
                                 "run the same command again to resume where it stopped", resumable=True)
        return DownloadError(f"the download of {public_url(self.url)} was interrupted: {why}; the server gave no "
                             "length for the file, so nothing was kept: run the same command again to start over")


def _start_of(response: httpx.Response) -> int:
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
        return offset + int(length) if response.status_code == 206 else int(length)
    return None


def _verify(files: PartialFiles, digest: str, *, sha256: str | None, size: int | None, validate: Validator | None,
            url: str) -> None:
    actual = files.size()
    if size is not None and actual != size:
        raise DownloadError(f"the download of {public_url(url)} is truncated or padded: {actual} bytes where {size} "
                            "were expected; it was deleted, run the command again")
    if sha256 is not None and digest != sha256.lower():
        raise DownloadError(f"checksum mismatch for {public_url(url)}: expected sha256 {sha256.lower()}, got {digest}; "
                            "the file was deleted (the server sent another or a corrupt file)")
    if validate is not None:
        try:
            validate(files.path)
        except CoreAIError as exc:
            raise DownloadError(f"{public_url(url)} is not usable: {exc}; the file was deleted") from None
