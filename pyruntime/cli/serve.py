"""`coreai-runtime serve`: host the model (or check an external one) until SIGINT/SIGTERM.

A thin composition: each service is started in order and stopped in reverse. Later issues add
the gRPC/Connect services and the orchestrator here.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.hosting import LlamaServerProcess, hosted_model_config
from pyruntime.model.llama_server import DEFAULT_HOST, DEFAULT_PORT

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_WATCH_S = 0.5


@dataclass(frozen=True)
class ServeOptions:
    """What `serve` was asked to do."""

    model: Path | None
    llm_url: str | None
    host: str
    port: int
    ctx: int | None
    data_dir: Path | None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `serve` subcommand."""
    p = subparsers.add_parser("serve", help="host the local model (default: embedded SmolLM2) until stopped")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", type=Path, help="GGUF model file to host (default: the embedded SmolLM2-135M)")
    source.add_argument("--llm-url", help="use this OpenAI-compatible server (e.g. http://127.0.0.1:1234/v1) instead")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"listen address of the hosted model (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port of the hosted model (default {DEFAULT_PORT})")
    p.add_argument("--ctx", type=int, help="context size (default 8192, never above the model's trained context)")
    p.add_argument("--data-dir", type=Path, help="the game's persistentDataPath (saves live under CoreAI/)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `serve`: returns the exit code."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
    options = ServeOptions(args.model, args.llm_url, args.host, args.port, args.ctx, args.data_dir)
    try:
        _validate(options)
        return asyncio.run(serve(options))
    except InvalidArgumentError as exc:
        log.error("%s", exc)
        return EXIT_USAGE
    except CoreAIError as exc:
        log.error("%s", exc)
        return EXIT_FAILED


def _validate(options: ServeOptions) -> None:
    if options.data_dir is not None and options.data_dir.exists() and not options.data_dir.is_dir():
        raise InvalidArgumentError("--data-dir exists but is not a directory")
    if options.llm_url is not None and not options.llm_url.startswith(("http://", "https://")):
        raise InvalidArgumentError("--llm-url must be an http:// or https:// URL")


async def serve(options: ServeOptions) -> int:
    """Start the services, wait for SIGINT/SIGTERM (or the model server dying), stop them."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server: LlamaServerProcess | None = None
    try:
        if options.llm_url is not None:
            await _check_external(options.llm_url)
        else:
            config = hosted_model_config(options.model, host=options.host, port=options.port, n_ctx=options.ctx)
            server = LlamaServerProcess(config)
            await asyncio.to_thread(server.start)
            log.info("serving model %s at %s", config.alias, server.base_url)
        log.info("ready; stop with Ctrl+C or SIGTERM")
        return await _wait(stop, server)
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
            log.info("model server stopped")
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _check_external(url: str) -> None:
    async with OpenAICompatClient(url, timeout=10.0) as client:
        models = await client.models()
    log.info("external model server answers with %d model(s)", len(models))


async def _wait(stop: asyncio.Event, server: LlamaServerProcess | None) -> int:
    while not stop.is_set():
        if server is not None and not server.is_alive():
            log.error("model server exited unexpectedly")
            return EXIT_FAILED
        try:
            await asyncio.wait_for(stop.wait(), _WATCH_S)
        except TimeoutError:
            pass
    log.info("stopping")
    return EXIT_OK
