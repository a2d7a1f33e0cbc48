"""A model `serve` downloads by name before it loads it: what and where (`ModelPull`), and its progress for Health
(`PullStatus`)."""

from __future__ import annotations

from dataclasses import dataclass

from coreai.v1 import orchestrator_pb2
from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.download import DownloadError, DownloadProgress


@dataclass(frozen=True)
class ModelPull:
    """A named model `serve` must download before it can load it: what, and into which cache."""

    request: PullRequest
    cache: ModelCache


class PullStatus:
    """The progress of serve's model download, read by Health (and by the readiness's `state`/`reason`)."""

    state = "loading"

    def __init__(self, name: str, total: int | None = None) -> None:
        self.name = name
        self.cancelled = False
        self._latest = DownloadProgress(0, total)

    def update(self, progress: DownloadProgress) -> None:
        """The download's progress callback; stops the download once serve is stopping."""
        if self.cancelled:
            raise DownloadError("the download was stopped (serve is stopping); it resumes at the next start",
                                resumable=True)
        self._latest = progress

    @property
    def reason(self) -> str:
        """What Health says meanwhile."""
        p, fraction = self._latest, self._latest.fraction
        done = (f"{fraction * 100:.0f}% of {p.total / 1e6:,.0f} MB" if fraction is not None and p.total is not None
                else f"{p.received / 1e6:,.0f} MB")
        return f"downloading model {self.name}: {done}"

    def message(self) -> orchestrator_pb2.ModelDownload:
        """The Health field."""
        return orchestrator_pb2.ModelDownload(model=self.name, received_bytes=self._latest.received,
                                              total_bytes=self._latest.total or 0)
