"""A real HTTP/1.1 file server on loopback for download tests: ranges, cuts, slowness, 404s, lies.

Each served path has a `Served` that says how it misbehaves; every request is recorded (path and Range
header) so a test can check that a resume asked for the rest only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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


@dataclass
class Request:
    """What one request asked for."""

    path: str
    range: str | None


@dataclass
class FileServer:
    """Serves `files` (path -> Served) on 127.0.0.1 at a free port until `close()`."""

    files: dict[str, Served] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.requests.append(Request(self.path, self.headers.get("Range")))
                served = server.files.get(self.path.split("?")[0])
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
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        """The URL of a served path."""
        return self.base_url + path

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def _send(self, handler: BaseHTTPRequestHandler, served: Served) -> None:
        data = served.data
        start = 0
        requested = handler.headers.get("Range")
        if requested and served.ranges and requested.startswith("bytes="):
            first = requested[len("bytes="):].split("-")[0]
            start = int(first) if first.isdigit() else 0
            if start >= len(data):
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        body = data[start:]
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
                if served.stall_s and not stalled:
                    stalled = True
                    time.sleep(served.stall_s)
        except (BrokenPipeError, ConnectionResetError):
            return
        if limit < len(body) or length > len(body):
            handler.close_connection = True  # the client sees a body shorter than Content-Length
