"""`coreai-runtime serve`: the runtime - stores, model, orchestrator, gRPC and Connect - until SIGINT/SIGTERM.

The flags become one `RuntimeSettings`; `pyruntime/app.py`'s `Runtime` builds and starts everything in order:
stores -> services and RPC servers (health answers 503 "loading", turns UNAVAILABLE with a retry hint) -> model
server (a hosted llama.cpp child, a checked external URL, or none with `--no-model`) -> orchestrator, bound to
the services. Then ONE JSON line goes to stdout for
launchers, `{"grpc_port": N, "connect_port": N, "model_url": "..." | null, "token_file": "...",
"model_key_file": "..."}` (the last only with a hosted model: its port's API key, 0600, next to the token);
logs go to stderr. `--log-file PATH` sends stdout and stderr (the ready line, logs, a crash's traceback) to
PATH, appended: a launcher then needs no pipe (a Unity editor's pipe goes unread after a domain reload).
Stopped in reverse: in-flight calls get `--grace` seconds, store writes finish, the model server is
stopped (on every path, failures included). A hosted model is watched and restarted when it dies or hangs
(model/hosting/supervisor.py); one that cannot be kept up leaves the runtime serving memory, history, exports and
health (turns UNAVAILABLE, health `modelState: failed`) while the watchdog keeps trying. Exit 0 after a
signal, 1 when something fails to start, 2 on bad arguments.

Never orphaned: `--parent-pid PID` (the game's pid) stops serve when that process dies, however it
died; `--exit-on-stdin-eof` does the same when the launcher's end of stdin closes (see cli/lifeline.py).
On Windows, where the event loop has no signal handlers, plain signal handlers stand in (cli/signals.py).

The token comes from $COREAI_RUNTIME_TOKEN or is generated; it is written to the token file (0600)
and never logged nor taken from the command line (other users can read those). The same holds for the
key of an external `--llm-url` server: `--llm-api-key-file` or $COREAI_LLM_API_KEY, never a flag value.

The flags and their `RuntimeSettings` are here; refusing bad ones before anything starts is `serve_checks.py`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyruntime.app import DEFAULT_GRACE_S, Runtime, RuntimeSettings
from pyruntime.cli import event_loop, layers
from pyruntime.cli.lifeline import lifelines
from pyruntime.cli.models import resolve_model_flag
from pyruntime.cli.serve_checks import validate
from pyruntime.cli.signals import stop_on_signals
from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.llm_key import LLM_API_KEY_ENV
from pyruntime.model.client.concurrency import DEFAULT_EXTERNAL_CONCURRENCY
from pyruntime.model.hosting.llama_server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_SLOTS,
    default_threads,
)
from pyruntime.net.auth import TOKEN_ENV
from pyruntime.observability import LOG_FORMATS, LOG_LEVELS, configure_logging
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT
from pyruntime.rpc.grpc_server import DEFAULT_GRPC_PORT
from pyruntime.service.admission import DEFAULT_MAX_QUEUED, DEFAULT_MAX_TURNS_PER_CONVERSATION
from pyruntime.stores.engine_files import PROMPT_CACHE_RELATIVE_PATH
from pyruntime.stores.in_memory import DEFAULT_CHAT_CAP, DEFAULT_TRANSCRIPT_CAP
from pyruntime.turns.rounds.modes import ToolCallMode
from pyruntime.turns.writer.decision import MemoryDesign

log = logging.getLogger(__name__)

EXIT_OK = 0
YOUNG_COLLECTION_THRESHOLD = 20_000  # allocations between young collections (Python's default: 700)
# The threads of `asyncio.to_thread`: a turn's store reads and its records, which fsync. Python's default (CPUs + 4)
# lets a burst of records waiting on the disk hold every thread while the next turns' reads, on the way to their
# first token, queue behind them; a worker mostly waits on the disk, so many cost little.
BLOCKING_IO_WORKERS = 64
EXIT_FAILED = 1
EXIT_USAGE = 2
_PROMPT_CACHE_PATH = PROMPT_CACHE_RELATIVE_PATH.as_posix()
_IN_DATA_DIR = "<data-dir>"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `serve` subcommand."""
    p = subparsers.add_parser(
        "serve", help="run the runtime: model server, orchestrator, gRPC and Connect services, until stopped",
        description="Run the runtime until SIGINT/SIGTERM. Prints one JSON ready line on stdout; logs go to stderr.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", type=Path, metavar="PATH.gguf|NAME",
                        help="GGUF model file to host, or a model's name (coreai-runtime models list): a pulled one, "
                             "or a catalogue model, downloaded first while Health reports the download "
                             "(default: the embedded SmolLM2-135M)")
    source.add_argument("--llm-url",
                        help="run turns against this OpenAI-compatible server (e.g. http://127.0.0.1:1234/v1)")
    source.add_argument("--scripted-model", type=Path, metavar="FILE",
                        help="answer turns from a script (deterministic NPCs for tests and play-mode CI), served "
                             "OpenAI-compatible on --host/--port")
    source.add_argument("--no-model", action="store_true",
                        help="no model: serve the stores and the role policy only (turns answer UNAVAILABLE)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"listen address of the hosted model (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port of the hosted model (default {DEFAULT_PORT})")
    p.add_argument("--ctx", type=int, help="context size (default 8192, never above the model's trained context)")
    p.add_argument("--threads", type=int,
                   help=f"CPU threads of the hosted model (default: half the cores, here {default_threads()}; "
                        "the rest stay with the game)")
    p.add_argument("--n-gpu-layers", type=int, default=0, metavar="N",
                   help="layers of the hosted model offloaded to the GPU (default 0: CPU only; -1: all); needs a "
                        "GPU build of llama-server (a GPU that cannot take them: the CPU, the reason in Health)")
    p.add_argument("--slots", type=int, default=None, metavar="N",
                   help=f"parallel slots of the hosted model: NPCs decoded together, each keeping its state "
                        f"(default {DEFAULT_SLOTS}; each costs --ctx tokens of KV memory)")
    p.add_argument("--prompt-cache-mb", type=int, default=None,
                   help="room for the states of NPCs that lost their slot, each parked in a file of its own and "
                        "restored when that NPC speaks again (0: off; default 256 for a model under 1 GB, else 2048; "
                        "~22 MB per 1000-token SmolLM2 conversation)")
    p.add_argument("--prompt-cache-dir", nargs="?", const=_IN_DATA_DIR, metavar="DIR",
                   help="save the slots' states there when serve stops, so NPCs' first turns after a restart start "
                        f"warm (without DIR: <data-dir>/{_PROMPT_CACHE_PATH}; default: off)")
    p.add_argument("--llm-api-key-file", type=Path, metavar="FILE",
                   help=f"the --llm-url server's API key, read from this file (or ${LLM_API_KEY_ENV}; never on the "
                        "command line)")
    p.add_argument("--llm-header", action="append", metavar='"NAME: VALUE"',
                   help="an extra header for the --llm-url server (repeatable; not for secrets: the key goes in "
                        "--llm-api-key-file)")
    p.add_argument("--llm-concurrency", type=int, metavar="N",
                   help="model calls sent to the --llm-url server at once (default: its /props total_slots for a "
                        f"llama-server, else {DEFAULT_EXTERNAL_CONCURRENCY}, for a server that batches on a GPU)")
    p.add_argument("--data-dir", type=Path,
                   help="the game's persistentDataPath (saves live under CoreAI/); required unless --session-only")
    p.add_argument("--models-dir", type=Path,
                   help="the models cache --model NAME is looked up and pulled in (default <data-dir>/CoreAI/models, "
                        "then the per-user cache of `coreai-runtime models pull`)")
    p.add_argument("--store", metavar="postgresql://…",
                   help="keep saves in this PostgreSQL database instead of files (headless servers; several runtimes "
                        "may share it); replaces --data-dir")
    p.add_argument("--session-only", action="store_true", help="keep memory and chats in this process, write no saves")
    p.add_argument("--listen", default=DEFAULT_HOST,
                   help=f"RPC bind address (default {DEFAULT_HOST}; anything else requires ${TOKEN_ENV} and "
                        "--tls-cert/--tls-key); the model port stays on loopback")
    p.add_argument("--tls-cert", type=Path, metavar="PEM",
                   help="serve both RPC ports over TLS with this certificate (chain); needs --tls-key")
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="the TLS certificate's private key (unencrypted PEM)")
    p.add_argument("--grpc-port", type=int, default=DEFAULT_GRPC_PORT,
                   help=f"gRPC port (default {DEFAULT_GRPC_PORT}; 0 = any free port)")
    p.add_argument("--connect-port", type=int, default=DEFAULT_CONNECT_PORT,
                   help=f"Connect (HTTP) port (default {DEFAULT_CONNECT_PORT}; 0 = any free port)")
    p.add_argument("--token-file", type=Path,
                   help="where the token is written (default <data-dir>/CoreAI/runtime/token)")
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE_S,
                   help=f"seconds in-flight calls get on shutdown (default {DEFAULT_GRACE_S:g})")
    p.add_argument("--chat-history-cap", type=int, default=DEFAULT_CHAT_CAP,
                   help=f"chat messages kept per key (default {DEFAULT_CHAT_CAP})")
    p.add_argument("--transcript-cap", type=int, default=DEFAULT_TRANSCRIPT_CAP,
                   help=f"transcript rows kept per key (default {DEFAULT_TRANSCRIPT_CAP})")
    p.add_argument("--max-turns-running", type=int, metavar="N",
                   help="turns run at once (default: what the model serves at once, the hosted engine's slots or "
                        "--llm-concurrency, and a quarter more, at least 4 more); more wait for a place, "
                        "round-robin by conversation")
    p.add_argument("--max-turns-queued", type=int, default=DEFAULT_MAX_QUEUED, metavar="N",
                   help=f"turns that wait for a place, within their deadline (default {DEFAULT_MAX_QUEUED}); beyond, "
                        "a turn is refused with RESOURCE_EXHAUSTED and a retry hint (0: refused at once)")
    p.add_argument("--max-turns-per-conversation", type=int, default=DEFAULT_MAX_TURNS_PER_CONVERSATION,
                   metavar="N", help="turns of one conversation running or waiting (default "
                                     f"{DEFAULT_MAX_TURNS_PER_CONVERSATION}); one runs at a time, in order")
    p.add_argument("--memory-design", choices=[d.value for d in MemoryDesign],
                   help="how memory is written: 'tool' (the memory tool in the reply) or 'writer' (a separate "
                        "decision after the reply); default: writer for a small hosted model, else tool")
    p.add_argument("--tool-mode", choices=[m.value for m in ToolCallMode],
                   help="how tool calls travel (default: structured for a hosted model, native for --llm-url)")
    p.add_argument("--prewarm", choices=["on", "off"],
                   help="after each turn (and its memory write), evaluate the conversation's next prompt in the "
                        "background so the next reply starts warm (default: on for a hosted model, off for "
                        "--llm-url: turn it on for a llama.cpp server that keeps its prompt)")
    p.add_argument("--event-loop", choices=event_loop.CHOICES, default="auto",
                   help="the asyncio event loop: uvloop (less CPU per turn) or the standard one (default auto: "
                        "uvloop where it is installed, never on Windows)")
    p.add_argument("--log-level", choices=LOG_LEVELS, help="log level (default info; debug with -v)")
    p.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                   help="text, or json: one object per line with the turn's trace_id (default text)")
    p.add_argument("--log-file", type=Path, metavar="FILE",
                   help="append stdout and stderr (ready line, logs, tracebacks) to FILE instead of the inherited "
                        "streams, so the launcher needs no pipe (the file is created owner-only)")
    p.add_argument("--parent-pid", type=int,
                   help="stop (and stop the model) when this process exits, however it dies: the game's pid")
    p.add_argument("--exit-on-stdin-eof", action="store_true",
                   help="stop when standard input closes (a launcher holding the pipe died); not for a terminal")
    layers.install(p)  # last: every flag above is also COREAI_<NAME> and a --config key
    p.set_defaults(handler=run)


def options_from_args(args: argparse.Namespace) -> RuntimeSettings:
    """The options of parsed `serve` flags, completed from COREAI_* variables, the --config file and the defaults."""
    args = layers.resolve(args)
    models_dir = getattr(args, "models_dir", None)
    model, model_pull = resolve_model_flag(args.model, models_dir=models_dir, data_dir=args.data_dir)
    return RuntimeSettings(
        model=model, model_pull=model_pull, models_dir=models_dir, llm_url=args.llm_url, no_model=args.no_model,
        host=args.host, port=args.port,
        scripted_model=getattr(args, "scripted_model", None),
        ctx=args.ctx, data_dir=args.data_dir, session_only=args.session_only, listen=args.listen,
        store=getattr(args, "store", None),
        grpc_port=args.grpc_port, connect_port=args.connect_port, token_file=args.token_file, grace=args.grace,
        tls_cert=getattr(args, "tls_cert", None), tls_key=getattr(args, "tls_key", None),
        chat_history_cap=args.chat_history_cap, transcript_cap=args.transcript_cap,
        tool_mode=ToolCallMode.parse(args.tool_mode) if args.tool_mode else None,
        memory_design=MemoryDesign.parse(args.memory_design) if getattr(args, "memory_design", None) else None,
        prewarm={"on": True, "off": False}.get(getattr(args, "prewarm", None) or ""),
        parent_pid=args.parent_pid, exit_on_stdin_eof=args.exit_on_stdin_eof, threads=args.threads,
        n_gpu_layers=getattr(args, "n_gpu_layers", 0), prompt_cache_mb=args.prompt_cache_mb,
        prompt_cache_dir=_prompt_cache_dir(getattr(args, "prompt_cache_dir", None), args.data_dir),
        slots=getattr(args, "slots", None), llm_api_key_file=getattr(args, "llm_api_key_file", None),
        llm_headers=_header_list(getattr(args, "llm_header", None)),
        llm_concurrency=getattr(args, "llm_concurrency", None),
        max_turns_running=getattr(args, "max_turns_running", None),
        max_turns_queued=getattr(args, "max_turns_queued", DEFAULT_MAX_QUEUED),
        max_turns_per_conversation=getattr(args, "max_turns_per_conversation", DEFAULT_MAX_TURNS_PER_CONVERSATION))


def _header_list(value: object) -> tuple[str, ...]:
    """--llm-header values (a single string from the environment or a config file is one header)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _prompt_cache_dir(flag: str | None, data_dir: Path | None) -> Path | None:
    """--prompt-cache-dir's folder: the one given, or the data dir's when given without one."""
    if flag is None:
        return None
    if flag != _IN_DATA_DIR:
        return Path(flag)
    if data_dir is None:
        raise InvalidArgumentError("--prompt-cache-dir without a folder needs --data-dir (it goes under it)")
    return data_dir / PROMPT_CACHE_RELATIVE_PATH


def run(args: argparse.Namespace) -> int:
    """Handler of `serve`: returns the exit code."""
    flagged = getattr(args, "log_file", None)
    if flagged is not None:  # given on the command line: redirected before anything can be printed
        log_to_file(flagged)
    try:
        layers.resolve(args)
    except InvalidArgumentError as exc:  # a bad COREAI_* variable or config file, before logging is set up
        configure_logging("info", "text")
        log.error("%s", exc)
        return EXIT_USAGE
    if args.log_file is not None and flagged is None:  # from $COREAI_LOG_FILE or the config file
        log_to_file(args.log_file)
    configure_logging(args.log_level or ("debug" if getattr(args, "verbose", False) else "info"), args.log_format)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
    try:
        options = options_from_args(args)
        validate(options)
        loop = event_loop.resolve(getattr(args, "event_loop", "auto"))
        log.info("event loop: %s", loop)
        return event_loop.run(serve(options), loop)
    except InvalidArgumentError as exc:
        log.error("%s", exc)
        return EXIT_USAGE
    except CoreAIError as exc:
        log.error("cannot start: %s", exc)
        return EXIT_FAILED
    except OSError as exc:  # strerror only: str(exc) would name files
        log.error("cannot start: %s (errno %s)", exc.strerror or type(exc).__name__, exc.errno)
        return EXIT_FAILED


def log_to_file(path: Path) -> None:
    """Point file descriptors 1 and 2 (and sys.stdout/stderr) at `path`, appended; created owner-only (0600).

    Descriptors, not only the Python objects: output written below Python (a C library, a fatal error's
    traceback from faulthandler) lands in the file too. Line-buffered, so the launcher's tail is current.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for target in (1, 2):
            os.dup2(fd, target)
    finally:
        os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)


async def serve(options: RuntimeSettings, *, on_ready: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Start the runtime, announce readiness, wait for a stop (signal, Shutdown RPC, lifeline), stop in reverse."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(BLOCKING_IO_WORKERS, thread_name_prefix="coreai-io"))

    def request_stop() -> None:  # the Shutdown RPC (loopback only: the Runtime decides); called off the loop
        loop.call_soon_threadsafe(stop.set)

    with _stop_triggers(options, stop):
        async with Runtime(options, stop_requested=request_stop) as runtime:
            starting = asyncio.create_task(runtime.start())
            stopping = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if not starting.done():  # a signal while starting: unwind what has started so far
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                log.info("stopped while starting")
                return EXIT_OK
            ready = starting.result()
            (on_ready or _print_ready)(ready)
            log.info("ready; stop with Ctrl+C or SIGTERM")
            freeze_startup_heap()  # after the announcement: a launcher that sees the ports answer finds it logged
            return await _wait(stop)


def freeze_startup_heap() -> None:
    """Move every object alive once the runtime has started out of the garbage collector's sight.

    What start-up loaded (modules, grpc and pydantic schemas, the model catalogue) lives as long as the process;
    left in the collector's oldest generation, every full collection walks it again while holding the GIL, which
    stalls every turn in flight for ~50 ms (the slowest 1 % of first tokens at 100 players). Frozen, a full
    collection walks only what turns made since. The young generation's threshold goes from 700 allocations to
    YOUNG_COLLECTION_THRESHOLD: a turn allocates thousands of short-lived objects, and fewer, larger young collections
    cost the same CPU with fewer pauses in a turn's way (the players' p90 and p99 lower at 200 players, same run).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, 20, 10)


@contextlib.contextmanager
def _stop_triggers(options: RuntimeSettings, stop: asyncio.Event) -> Iterator[None]:
    """Set `stop` on a stop signal (every OS), when --parent-pid exits, or on stdin EOF (--exit-on-stdin-eof)."""
    loop = asyncio.get_running_loop()

    def lifeline_cut(reason: str) -> None:  # runs on a watcher thread
        log.info("%s; stopping", reason)
        with contextlib.suppress(RuntimeError):  # the loop already closed: serve has ended anyway
            loop.call_soon_threadsafe(stop.set)

    with contextlib.ExitStack() as triggers:
        triggers.enter_context(stop_on_signals(loop, stop.set))
        try:  # only the entry: an error of serve's own inside the block must pass through unchanged
            triggers.enter_context(
                lifelines(lifeline_cut, parent_pid=options.parent_pid, stdin_eof=options.exit_on_stdin_eof))
        except ProcessLookupError as exc:
            raise InvalidArgumentError(f"--parent-pid {options.parent_pid} is not a running process") from exc
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        yield


def _print_ready(ready: dict[str, Any]) -> None:
    print(json.dumps(ready), flush=True)


async def _wait(stop: asyncio.Event) -> int:
    """Until a stop signal. A model that cannot be kept up does not end serve: the watchdog keeps trying."""
    await stop.wait()
    return EXIT_OK
