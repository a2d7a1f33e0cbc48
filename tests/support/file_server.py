"""A real HTTP/1.1 file server on loopback for download tests: ranges, cuts, slowness, 404s, lies, endless bodies,
redirects and validators (ETag / Last-Modified, If-Range).

Each served path has a `Served` that says how it misbehaves; every request is recorded (path, Range and
If-Range headers) and every body's bytes counted, so a test can check that a resume asked for the rest only
and that a body was not read.
"""

from __future__ import annotations

import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Served:
    """One file and how the server treats requests for it."""

    data: bytes
    ranges: bool = True  # False: ignore Range headers (always 200 with the whole file)
    cut_after: int | None = None  # close the connection after this many bytes of the file, on the next request
    cuts: int = 1  # how many requests are cut that way
    chunk: int = 16 * 1024
    delay_s: float = 0.0  # sleep before each chunk (a slow server)
    stall_s: float = 0.0  # sleep this long once, after the first chunk (a server that stops sending)
    status: int = 200
    claimed_length: int | None = None  # a Content-Length that differs from the data (a lying server)
    etag: str | None = None  # sent as ETag; an If-Range that differs gets the whole file (200)
    last_modified: str | None = None  # sent as Last-Modified; compared with If-Range the same way
    if_range: bool = True  # False: If-Range is ignored (the range is served whatever the file is now)
    endless: bool = False  # the data repeated forever, with no Content-Length (until the client hangs up)
    redirect: str | None = None  # answer 302 to this Location (its body: endless when `endless`)
    sent: int = 0  # body bytes written so far (all requests)


SERVER_CHANGES = ("etag", "last-modified", "length", "etag, If-Range ignored")
"""How a file may change on the server between a cut download and its resume (`changed_on_server`)."""


def other_model(gguf: bytes) -> bytes:
    """Another valid GGUF of the same length (different weights at the end): a splice of the two would pass."""
    return gguf[:-4096] + bytes(b ^ 0x5A for b in gguf[-4096:])


def changed_on_server(gguf: bytes, change: str) -> tuple[Served, Served, bytes]:
    """(the file cut halfway, the file the server has since, its bytes) for one of `SERVER_CHANGES`: a new
    ETag (If-Range honoured or ignored), a newer Last-Modified, or no validators and another length."""
    first = Served(gguf, cut_after=len(gguf) // 2)
    new = other_model(gguf)
    if change.startswith("etag"):
        first.etag = '"v1"'
        return first, Served(new, etag='"v2"', if_range=change == "etag"), new
    if change == "last-modified":
        first.last_modified = "Mon, 01 Dec 2026 10:00:00 GMT"
        return first, Served(new, last_modified="Sat, 05 Dec 2026 10:00:00 GMT"), new
    new = new + b"\0" * 1000  # no validators at all: only the length tells the files apart
    return first, Served(new), new


@dataclass
class Request:
    """What one request asked for."""

    path: str
    range: str | None
    if_range: str | None = None


@dataclass
class FileServer:
    """Serves `files` (path -> Served) on 127.0.0.1 at a free port until `close()`."""

    files: dict[str, Served] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    tls: tuple[Path, Path] | None = None  # (certificate, key): serve https

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(Request(self.path, self.headers.get("Range"), self.headers.get("If-Range")))
                served = server.files.get(self.path.split("?")[0])
                if served is not None and served.redirect is not None:
                    server._redirect(self, served)
                    return
                if served is not None and served.endless:
                    server._send_endless(self, served, 200)
                    return
                if served is None or served.status == 404:
                    self._plain(404, b"not found")
                    return
                if served.status != 200:
                    self._plain(served.status, b"error")
                    return
                server._send(self, served)

            def _plain(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT` (https with `tls`)."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        """The URL of a served path."""
        return self.base_url + path

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def _redirect(self, handler: BaseHTTPRequestHandler, served: Served) -> None:
        assert served.redirect is not None
        if served.endless:
            self._send_endless(handler, served, 302)
            return
        handler.send_response(302)
        handler.send_header("Location", served.redirect)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _send_endless(self, handler: BaseHTTPRequestHandler, served: Served, status: int) -> None:
        handler.send_response(status)
        if served.redirect is not None:
            handler.send_header("Location", served.redirect)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Connection", "close")  # no length: the body ends when the connection does
        handler.end_headers()
        handler.close_connection = True
        piece = (served.data or b"\0") * max(1, served.chunk // max(1, len(served.data)))
        try:
            while True:
                handler.wfile.write(piece)
                served.sent += len(piece)
                if served.delay_s:
                    time.sleep(served.delay_s)
        except (BrokenPipeError, ConnectionResetError):
            return

    @staticmethod
    def _validators(handler: BaseHTTPRequestHandler, served: Served) -> None:
        if served.etag is not None:
            handler.send_header("ETag", served.etag)
        if served.last_modified is not None:
            handler.send_header("Last-Modified", served.last_modified)

    @staticmethod
    def _range_applies(handler: BaseHTTPRequestHandler, served: Served) -> bool:
        """RFC 9110 If-Range: the range only when the validator still names the file."""
        condition = handler.headers.get("If-Range")
        return condition is None or not served.if_range or condition in (served.etag, served.last_modified)

    def _send(self, handler: BaseHTTPRequestHandler, served: Served) -> None:
        data = served.data
        start = 0
        requested = handler.headers.get("Range")
        if requested and served.ranges and requested.startswith("bytes=") and self._range_applies(handler, served):
            first = requested[len("bytes="):].split("-")[0]
            start = int(first) if first.isdigit() else 0
            if start >= len(data):
                handler.send_response(416)
                self._validators(handler, served)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        body = data[start:]
        self._validators(handler, served)
        handler.send_header("Accept-Ranges", "bytes" if served.ranges else "none")
        length = served.claimed_length - start if served.claimed_length is not None else len(body)
        handler.send_header("Content-Length", str(length))
        handler.send_header("Content-Type", "application/octet-stream")
        handler.end_headers()
        limit = len(body)
        if served.cut_after is not None and served.cuts > 0:
            served.cuts -= 1
            limit = max(0, served.cut_after - start)
        sent = 0
        stalled = False
        try:
            while sent < limit:
                if served.delay_s:
                    time.sleep(served.delay_s)
                piece = body[sent:min(limit, sent + served.chunk)]
                handler.wfile.write(piece)
                handler.wfile.flush()
                sent += len(piece)
                served.sent += len(piece)
                if served.stall_s and not stalled:
                    stalled = True
                    time.sleep(served.stall_s)
        except (BrokenPipeError, ConnectionResetError):
            return
        if limit < len(body) or length > len(body):
            handler.close_connection = True  # the client sees a body shorter than Content-Length


# -- the pulled-model cache a download leaves (Python `models pull` and C# `ModelStore` share its layout) ---------

PARTIAL = "models/.partial/npc.gguf.partial"
"""The bytes of a download of the model named npc, while it runs or after it stopped (relative to the test's tmp)."""
RECORD = PARTIAL + ".json"
"""What says which file those bytes are (url, validators), so a resume can trust them."""
LOCK = PARTIAL + ".lock"
PULLED = ["models/npc.gguf", "models/npc.json"]
"""What a finished pull leaves: the model and its record."""
FOLDERS = ["models", "models/.partial"]
VICTIM = b"a file of the player's, outside the cache\n" * 100
"""The bytes of a file beside the cache that no pull may write (`make_outside_cache`)."""


def make_outside_cache(tmp_path: Path) -> Path:
    """A folder beside the cache holding `victim.bin` (VICTIM), which no pull may write."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "victim.bin").write_bytes(VICTIM)
    return folder
