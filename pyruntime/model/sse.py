"""Server-sent events decoding (pure): lines in, event data out. Comments such as `: ping` are dropped."""

from __future__ import annotations


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

    def _dispatch(self) -> str | None:
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data = []
        return data
