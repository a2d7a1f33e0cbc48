"""`coreai-runtime models list | pull NAME|URL | remove NAME | path NAME`: models by name, pulled into a cache.

The cache is `<--data-dir>/CoreAI/models` (the game's persistentDataPath), or `--models-dir`, or by default the
per-user folder the chat uses (`<default data dir>/CoreAI/models`). `pull` shows a progress bar on stderr,
resumes an interrupted download of the same file when run again, stops a download of unknown size at
`--max-gb` and before the disk would have less than `--keep-free-gb` free, checks size, sha256 and the GGUF
header before the file enters the cache, and names what went wrong otherwise (nothing half-written is left in
the cache). Ctrl+C (or SIGTERM) stops it cleanly: one line, the bytes so far kept for the resume.
`serve --model NAME` hosts a pulled model by its name (and pulls a catalogue model first). Exit codes: 0 done,
1 failed (network, checksum, not pulled, a pull of it running), 2 bad input, 130 stopped by Ctrl+C (143 by
SIGTERM). Errors are logged under `pyruntime.cli.models`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from pyruntime.catalog import entries
from pyruntime.catalog.cache import ModelCache, PullRequest
from pyruntime.catalog.cache import models_dir as models_dir_of
from pyruntime.catalog.download import DEFAULT_KEEP_FREE, DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, size_text
from pyruntime.catalog.pull import ModelPull
from pyruntime.cli.chat import default_data_dir
from pyruntime.cli.guard import EXIT_OK, UsageError, guarded
from pyruntime.cli.progress import ProgressBar
from pyruntime.errors import InvalidArgumentError

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `models` subcommand and its actions."""
    p = subparsers.add_parser("models", help="list, pull, remove and locate GGUF models by name",
                              description="Models by name: a catalogue of known-good GGUFs for NPCs, pulled into a "
                                          "cache with progress, resume and checksum checks.")
    actions = p.add_subparsers(dest="models_action", required=True)
    listing = actions.add_parser("list", help="the catalogue, and which models are pulled")
    listing.add_argument("--json", action="store_true", help="one JSON object per model on stdout")
    pull = actions.add_parser("pull", help="download a model into the cache (resumes an interrupted download)")
    pull.add_argument("model", metavar="NAME|URL", help="a catalogue name (see `models list`) or an http(s) URL")
    pull.add_argument("--sha256", help="the file's expected sha256 (for a URL; a catalogue entry has its own)")
    pull.add_argument("--name", help="the name to keep a URL's model under (default: from its file name)")
    pull.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                      help=f"give up when the server sends nothing for this long (default {DEFAULT_TIMEOUT_S:g})")
    pull.add_argument("--max-gb", type=float, default=DEFAULT_MAX_BYTES / 1e9, metavar="GB",
                      help=f"stop a URL download past this size (default {DEFAULT_MAX_BYTES / 1e9:g}; a catalogue "
                           "model of known size gets exactly that)")
    pull.add_argument("--keep-free-gb", type=float, default=DEFAULT_KEEP_FREE / 1e9, metavar="GB",
                      help="never leave less than this free on the cache's disk (default "
                           f"{DEFAULT_KEEP_FREE / 1e9:g}); checked before and during the download")
    remove = actions.add_parser("remove", help="delete a pulled model (and any partial download of it)")
    remove.add_argument("model", metavar="NAME")
    path = actions.add_parser("path", help="print the file of a pulled model (for --model PATH or a game setting)")
    path.add_argument("model", metavar="NAME")
    for action in (listing, pull, remove, path):
        where = action.add_mutually_exclusive_group()
        where.add_argument("--data-dir", type=Path,
                           help="the game's persistentDataPath: the cache is <data-dir>/CoreAI/models")
        where.add_argument("--models-dir", type=Path, help="the cache folder itself")
        action.set_defaults(handler=guarded(run, log))


def cache_of(args: argparse.Namespace) -> ModelCache:
    """The cache the flags name (default: the per-user data folder's)."""
    if getattr(args, "models_dir", None) is not None:
        return ModelCache(args.models_dir)
    data_dir = args.data_dir if getattr(args, "data_dir", None) is not None else default_data_dir()
    return ModelCache(models_dir_of(data_dir))


def run(args: argparse.Namespace) -> int:
    """Handler of `models ACTION`."""
    cache = cache_of(args)
    action = args.models_action
    if action == "list":
        return _list(cache, as_json=args.json)
    if action == "pull":
        return _pull(cache, args)
    if action == "remove":
        if not cache.remove(args.model):
            log.warning("model %s was not pulled; nothing removed", entries.check_name(args.model))
        return EXIT_OK
    print(cache.path(args.model))  # path
    return EXIT_OK


class _Stopped(BaseException):
    """A stop signal during a pull (raised where the pull is, like KeyboardInterrupt, so it cleans up)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """While inside, SIGTERM stops the pull as Ctrl+C does (a launcher's stop leaves no lock file behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pull(cache: ModelCache, args: argparse.Namespace) -> int:
    if not args.max_gb > 0 or not args.keep_free_gb >= 0:
        raise UsageError("--max-gb must be above 0 and --keep-free-gb at least 0")
    request = PullRequest.of(args.model, sha256=args.sha256, name=args.name)
    if request.sha256 is None:
        log.warning("no --sha256 given: the file is checked as a GGUF only; its sha256 is recorded for later")
    bar = ProgressBar(request.name)
    stopped: BaseException | None = None
    try:
        with _stopped_by_sigterm():
            model = cache.pull(request, progress=bar, timeout_s=args.timeout, max_bytes=int(args.max_gb * 1e9),
                               keep_free=int(args.keep_free_gb * 1e9))
    except (KeyboardInterrupt, _Stopped) as stop:
        stopped = stop
    finally:
        bar.done()
    if stopped is not None:
        signum = stopped.signum if isinstance(stopped, _Stopped) else signal.SIGINT
        kept = cache.partial_bytes(request.name)
        log.error("the pull of %s was stopped (%s); %s", request.name,
                  "Ctrl+C" if signum == signal.SIGINT else signal.Signals(signum).name,
                  f"the {size_text(kept)} downloaded so far are kept: run the same command again to resume" if kept
                  else "nothing was kept")
        return 128 + signum
    print(model.path)
    log.info("pulled %s (%d bytes, sha256 %s)", model.name, model.size_bytes, model.sha256)
    return EXIT_OK


def _list(cache: ModelCache, *, as_json: bool) -> int:
    pulled = {m.name: m for m in cache.list()}
    rows: list[dict[str, Any]] = []  # JSON lines
    for entry in entries.CATALOG:
        model = pulled.pop(entry.name, None)
        rows.append({"name": entry.name, "pulled": model is not None, "size_bytes": entry.size_bytes,
                     "license": entry.license, "context_length": entry.context_length, "tool_mode": entry.tool_mode,
                     "memory_design": entry.memory_design, "description": entry.description, "url": entry.url,
                     "sha256": entry.sha256, "checksum_source": entry.checksum_source,
                     "path": str(model.path) if model else None})
    for model in pulled.values():  # pulled from a URL: not in the catalogue
        rows.append({"name": model.name, "pulled": True, "size_bytes": model.size_bytes, "url": model.url,
                     "sha256": model.sha256, "path": str(model.path), "description": "pulled from a URL"})
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_OK
    print(f"models in {cache.root}:")
    for row in rows:
        size = f"{row['size_bytes'] / 1e6:,.0f} MB" if row.get("size_bytes") else "size unknown"
        mark = "pulled" if row["pulled"] else "-"
        extra = f"  {row['license']}, ctx {row['context_length']}, {row['tool_mode']} tools" if "license" in row else ""
        print(f"  {row['name']:<16} {mark:<7} {size:>12}{extra}")
        print(f"  {'':<16} {row['description']}")
    sys.stdout.flush()
    return EXIT_OK


def resolve_model_flag(model: Path | None, *, models_dir: Path | None,
                       data_dir: Path | None) -> tuple[Path | None, ModelPull | None]:
    """`--model` of serve: a .gguf path as it is; a name -> its pulled file, or where a catalogue model will go.

    A name is looked up in --models-dir, else in <data-dir>/CoreAI/models and then the per-user cache that
    `models pull` fills by default. A catalogue model that is in none of them is pulled into the first of those
    folders (the second value says so); any other unknown name is an InvalidArgumentError.
    """
    if model is None or model.suffix.lower() == ".gguf" or model.is_file():
        return model, None  # a file that is not .gguf is refused by serve's checks, naming the flag
    try:
        name = entries.check_name(model.name)
    except InvalidArgumentError:
        raise InvalidArgumentError("--model must be a .gguf file or a model name") from None
    caches = [ModelCache(models_dir)] if models_dir is not None else [
        *([ModelCache(models_dir_of(data_dir))] if data_dir is not None else []),
        ModelCache(models_dir_of(default_data_dir()))]
    for cache in caches:
        pulled = cache.get(name)
        if pulled is not None:
            return pulled.path, None
    if entries.find(name) is None:
        raise InvalidArgumentError(f"--model must be a .gguf file or the name of a pulled or catalogue model; {name} "
                                   "is neither (coreai-runtime models list; pull a URL with: "
                                   "coreai-runtime models pull URL)")
    return caches[0].model_file(name), ModelPull(PullRequest.of(name), caches[0])
