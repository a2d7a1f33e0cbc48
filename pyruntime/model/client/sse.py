"""Server-sent events decoding (pure): bytes in, lines out, event data out. Comments such as `: ping` are dropped."""

from __future__ import annotations


class SSELines:
    """Split the bytes of a stream, as they arrive, into lines (without their `\\r\\n`, `\\n` or `\\r`)."""

    def __init__(self) -> None:
        """Start with nothing pending."""
        self._pending = b""

    def feed(self, chunk: bytes) -> list[str]:
        """The lines completed by `chunk`; a line cut by the chunk's end waits for the next one."""
        pieces = (self._pending + chunk).splitlines(keepends=True)
        self._pending = b""
        # The last piece is pending when it has no end, or ends in `\r` that may be the first half of `\r\n`.
        if pieces and (not pieces[-1].endswith((b"\n", b"\r")) or pieces[-1].endswith(b"\r")):
            self._pending = pieces.pop()
        return [piece.rstrip(b"\r\n").decode("utf-8", errors="replace") for piece in pieces]

    def flush(self) -> list[str]:
        """At the end of the stream: the last line, if it had no end."""
        pending, self._pending = self._pending, b""
        return [pending.rstrip(b"\r\n").decode("utf-8", errors="replace")] if pending else []


class SSEDecoder:
    """Feed the lines of an SSE stream; get the `data` of each complete event."""

    def __init__(self) -> None:
        """Start with no pending event."""
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Take one line (without its newline); return an event's data when this line ends it."""
        line = line.rstrip("\r")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment / keep-alive ping
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        return None  # event/id/retry fields carry nothing we use

    def flush(self) -> str | None:
        """At end of stream: the data of an event left without its closing blank line."""
        return self._dispatch()

    def events(self, lines: list[str]) -> list[str]:
        """The data of each event that `lines` complete, in order."""
        return [data for data in map(self.feed, lines) if data is not None]

    def _dispatch(self) -> str | None:
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data = []
        return data
