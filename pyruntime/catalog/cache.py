"""The models cache: pulled GGUF files by name, in one folder (`<data-dir>/CoreAI/models` or `--models-dir`).

Layout: `<name>.gguf` (the model; its file name makes the hosted alias the name) and `<name>.json` (where it
came from and its sha256, written after the file is in place), partial downloads in `.partial/` (`partial`).
A model counts as pulled only when both exist and the file still has the recorded size. The Unity package
writes the same layout (CoreAI.Downloads.ModelStore), so a model pulled in the editor is one the runtime finds.
A manifest is read and written without following a link or opening anything but a regular file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from pyruntime.catalog import entries, lockfile, partial
from pyruntime.catalog.download import (
    DEFAULT_KEEP_FREE,
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT_S,
    DownloadError,
    ProgressCallback,
    download,
)
from pyruntime.catalog.partial import PartialFiles
from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError, NotFoundError
from pyruntime.model.hosting.gguf_info import read_gguf_info
from pyruntime.stores import fileio

MODELS_RELATIVE_PATH = Path("CoreAI") / "models"  # under a data dir (the game's persistentDataPath)
MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024


@dataclass(frozen=True)
class PulledModel:
    """A model in the cache and where it came from."""

    name: str
    path: Path
    sha256: str
    size_bytes: int
    url: str
    source: str  # "catalogue" | "url"
    pulled_at: int  # Unix seconds


@dataclass(frozen=True)
class PullRequest:
    """What to pull: a name for the cache, the URL, and the checks (None: not known beforehand)."""

    name: str
    url: str
    sha256: str | None
    size_bytes: int | None
    source: str

    @classmethod
    def of(cls, name_or_url: str, *, sha256: str | None = None, name: str | None = None) -> PullRequest:
        """A catalogue name, or an http(s) URL (named by `name` or its file name); `sha256` is required to match."""
        wanted_sha = entries.check_sha256(sha256) if sha256 is not None else None
        if name_or_url.startswith(("http://", "https://")):
            model_name = entries.check_name(name if name is not None else _name_from_url(name_or_url))
            return cls(model_name, name_or_url, wanted_sha, None, "url")
        entry = entries.find(name_or_url)
        if entry is None:
            known = ", ".join(e.name for e in entries.CATALOG)
            raise NotFoundError(f"no model called {name_or_url.strip()!r} in the catalogue (known: {known}); "
                                "pull a URL instead: coreai-runtime models pull https://…/model.gguf --sha256 …")
        if wanted_sha is not None and wanted_sha != entry.sha256:
            raise InvalidArgumentError(f"--sha256 differs from the catalogue's checksum of {entry.name}")
        model_name = entries.check_name(name) if name is not None else entry.name
        return cls(model_name, entry.url, entry.sha256, entry.size_bytes, "catalogue")


def models_dir(data_dir: Path) -> Path:
    """The cache folder under a data dir."""
    return Path(data_dir) / MODELS_RELATIVE_PATH


def validate_gguf(path: Path) -> None:
    """Raise InvalidArgumentError unless `path` has a readable GGUF header naming an architecture."""
    read_gguf_info(path)


class ModelCache:
    """The pulled models in `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def model_file(self, name: str) -> Path:
        """Where the model `name` lives (pulled or not)."""
        return self.root / f"{entries.check_name(name)}.gguf"

    def get(self, name: str) -> PulledModel | None:
        """The pulled model `name`, or None (not pulled, or its file no longer matches the manifest)."""
        name = entries.check_name(name)
        try:
            data = json.loads(fileio.read_bytes(self.root / f"{name}.json", root=self.root, limit=MAX_MANIFEST_BYTES,
                                                what="model manifest") or b"null")
            model = PulledModel(name=name, path=self.model_file(name), sha256=str(data["sha256"]),
                                size_bytes=int(data["size_bytes"]), url=str(data["url"]), source=str(data["source"]),
                                pulled_at=int(data["pulled_at"]))
            size = model.path.stat().st_size
        except (OSError, ValueError, KeyError, TypeError, MemoryUnreadableError):
            return None  # missing, a link or FIFO in its place, or not a manifest
        return model if size == model.size_bytes else None

    def path(self, name: str) -> Path:
        """The pulled model's file; NotFoundError saying how to pull it."""
        model = self.get(name)
        if model is None:
            raise NotFoundError(f"model {entries.check_name(name)!r} is not pulled into {self.root}; "
                                f"pull it with: coreai-runtime models pull {entries.check_name(name)}")
        return model.path

    def list(self) -> list[PulledModel]:
        """Every pulled model, by name."""
        if not self.root.is_dir():
            return []
        found = []
        for manifest in sorted(self.root.glob("*.json")):
            try:
                model = self.get(manifest.stem)
            except InvalidArgumentError:
                continue
            if model is not None:
                found.append(model)
        return found

    def pull(self, request: PullRequest, *, progress: ProgressCallback | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES,
             keep_free: int = DEFAULT_KEEP_FREE) -> PulledModel:
        """Download (or resume) `request` into the cache, checked; an already pulled, matching model is kept.

        A download of unknown size stops past max_bytes; none leaves less than keep_free bytes on the disk.
        """
        existing = self.get(request.name)
        if existing is not None and (request.sha256 is None or existing.sha256 == request.sha256):
            return existing
        dest = self.model_file(request.name)
        digest = download(request.url, dest, sha256=request.sha256, size=request.size_bytes, progress=progress,
                          validate=validate_gguf, timeout_s=timeout_s, max_bytes=max_bytes, keep_free=keep_free)
        model = PulledModel(name=request.name, path=dest, sha256=digest, size_bytes=dest.stat().st_size,
                            url=request.url, source=request.source, pulled_at=int(time.time()))
        self._write_manifest(model)
        return model

    def partial_bytes(self, name: str) -> int:
        """How many bytes of `name` a stopped download kept for its resume (0: none)."""
        try:
            entry = os.lstat(self.root / partial.FOLDER / (self.model_file(name).name + partial.PARTIAL_SUFFIX))
        except FileNotFoundError:
            return 0
        return entry.st_size if stat.S_ISREG(entry.st_mode) else 0

    def remove(self, name: str) -> bool:
        """Delete the model `name` (file, manifest, any partial download and its lock); False when there was nothing.

        A download of it that is running is not interrupted: DownloadError, nothing removed.
        """
        model = self.model_file(name)
        if not self.root.is_dir():
            return False
        try:
            with PartialFiles.locked(self.root, model.name) as files:
                removed = files.size() > 0 or files.remote() is not None
                files.discard()
                for path in (self.root / f"{model.stem}.json", model):
                    removed = fileio.remove(path, root=self.root) or removed
        except lockfile.LockBusy:
            raise DownloadError(f"a download of {model.stem} is running; stop it first (nothing was removed)") from None
        return removed

    def _write_manifest(self, model: PulledModel) -> None:
        data = asdict(model) | {"path": model.path.name, "version": MANIFEST_VERSION}
        # A new file renamed over the name: a link or FIFO planted there is replaced, never written through.
        fileio.atomic_write(self.root / f"{model.name}.json", (json.dumps(data, indent=2) + "\n").encode("utf-8"),
                            root=self.root, limit=MAX_MANIFEST_BYTES)


def _name_from_url(url: str) -> str:
    """A cache name from a URL's file name: `Qwen2.5-0.5B-Instruct-Q4_K_M.gguf` -> `qwen2.5-0.5b-instruct-q4_k_m`."""
    stem = unquote(PurePosixPath(urlsplit(url).path).name)
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._")
    if not cleaned:
        raise InvalidArgumentError("cannot name the model after this URL: give --name NAME")
    return cleaned[:64]
