"""A download progress bar on stderr: one redrawn line on a terminal, a line per 10 % (or 50 MB) elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from pyruntime.catalog.download import DownloadProgress

_REDRAW_S = 0.2
_MB = 1_000_000


def _mb(value: int) -> str:
    return f"{value / _MB:.1f} MB"


class ProgressBar:
    """Shows `DownloadProgress` updates for `label` (call it with each update, then `done()`)."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._last_draw = 0.0
        self._last_step = -1
        self._first: int | None = None
        self._latest: DownloadProgress | None = None

    def __call__(self, progress: DownloadProgress) -> None:
        if self._first is None:
            self._first = progress.received
            if progress.resumed_from:
                self._write_line(f"{self.label}: resuming at {_mb(progress.resumed_from)}")
        self._latest = progress
        now = time.monotonic()
        if self._tty:
            if now - self._last_draw >= _REDRAW_S:
                self._last_draw = now
                self.stream.write("\r" + self._text(progress, now) + "\x1b[K")
                self.stream.flush()
            return
        step = int(progress.fraction * 10) if progress.fraction is not None else progress.received // (50 * _MB)
        if step != self._last_step:
            self._last_step = step
            self._write_line(self._text(progress, now))

    def done(self) -> None:
        """End the bar (a final line with the whole size)."""
        if self._latest is None:
            return
        text = self._text(self._latest, time.monotonic())
        self.stream.write(("\r" + text + "\x1b[K\n") if self._tty else "")
        self.stream.flush()

    def _text(self, progress: DownloadProgress, now: float) -> str:
        elapsed = max(now - self._started, 1e-6)
        rate = (progress.received - (self._first or 0)) / elapsed
        if progress.fraction is None:
            return f"{self.label}: {_mb(progress.received)} ({_mb(int(rate))}/s)"
        width = 24
        filled = int(progress.fraction * width)
        bar = "#" * filled + "-" * (width - filled)
        return (f"{self.label}: [{bar}] {progress.fraction * 100:5.1f}% "
                f"{_mb(progress.received)} / {_mb(progress.total or 0)} ({_mb(int(rate))}/s)")

    def _write_line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
