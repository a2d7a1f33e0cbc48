"""`coreai-runtime serve`: the runtime - stores, model, orchestrator, gRPC and Connect - until SIGINT/SIGTERM.

Started in order: stores -> services and RPC servers (health answers 503 "loading", turns UNAVAILABLE
with a retry hint) -> model server (a hosted llama.cpp child, a checked external URL, or none with
`--no-model`) -> orchestrator, bound to the services. Then ONE JSON line goes to stdout for
launchers, `{"grpc_port": N, "connect_port": N, "model_url": "..." | null, "token_file": "...",
"model_key_file": "..."}` (the last only with a hosted model: its port's API key, 0600, next to the token);
logs go to stderr. `--log-file PATH` sends stdout and stderr (the ready line, logs, a crash's traceback) to
PATH, appended: a launcher then needs no pipe (a Unity editor's pipe goes unread after a domain reload).
Stopped in reverse: in-flight calls get `--grace` seconds, store writes finish, the model server is
stopped (on every path, failures included). A hosted model is watched and restarted when it dies or hangs
(model/supervisor.py); one that cannot be kept up leaves the runtime serving memory, history, exports and
health (turns UNAVAILABLE, health `modelState: failed`) while the watchdog keeps trying. Exit 0 after a
signal, 1 when something fails to start, 2 on bad arguments.

Never orphaned: `--parent-pid PID` (the game's pid) stops serve when that process dies, however it
died; `--exit-on-stdin-eof` does the same when the launcher's end of stdin closes (see cli/lifeline.py).
On Windows, where the event loop has no signal handlers, plain signal handlers stand in (cli/signals.py).

The token comes from $COREAI_RUNTIME_TOKEN or is generated; it is written to the token file (0600)
and never logged nor taken from the command line (other users can read those). The same holds for the
key of an external `--llm-url` server: `--llm-api-key-file` or $COREAI_LLM_API_KEY, never a flag value.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pyruntime.cli import layers
from pyruntime.cli.lifeline import lifelines
from pyruntime.cli.llm_key import LLM_API_KEY_ENV, read_llm_api_key
from pyruntime.cli.models import ModelPull, PullStatus, resolve_model_flag
from pyruntime.cli.signals import stop_on_signals
from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.model.client import OpenAICompatClient
from pyruntime.model.hosting import LlamaServerProcess, generate_model_key, hosted_model_config, port_is_free
from pyruntime.model.llama_server import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_SLOTS, MAX_SLOTS, default_threads
from pyruntime.model.scripted import Script
from pyruntime.model.scripted_server import MODEL_ID, ScriptedModelServer
from pyruntime.model.supervisor import ModelSupervisor
from pyruntime.observability import LOG_FORMATS, LOG_LEVELS, configure_logging
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.rpc import RpcConfig, RpcServers
from pyruntime.rpc.auth import TOKEN_ENV, default_token_file, is_loopback_host, resolve_token, write_token_file
from pyruntime.rpc.connect_server import DEFAULT_CONNECT_PORT
from pyruntime.rpc.grpc_server import DEFAULT_GRPC_PORT
from pyruntime.rpc.tls import check_listen, tls_files
from pyruntime.service import RuntimeServices
from pyruntime.service.model_memory import hosted_model_memory
from pyruntime.service.readiness import EXTERNAL_MODEL, MODEL_LOADING, Readiness, hosted_model_readiness
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, confined, open_stores
from pyruntime.stores.in_memory import DEFAULT_CHAT_CAP, DEFAULT_TRANSCRIPT_CAP
from pyruntime.stores.persistence import DATA_FOLDER
from pyruntime.turns.memory_writer import MemoryDesign
from pyruntime.turns.modes import ToolCallMode

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_GRACE_S = 5.0
_WATCH_S = 0.5
MODEL_KEY_FILE_NAME = "model_key"  # next to the token file: the model port's API key, for external clients
PROMPT_CACHE_RELATIVE_PATH = Path("CoreAI") / "runtime" / "prompt-cache"  # --prompt-cache-dir without a folder
_PROMPT_CACHE_PATH = PROMPT_CACHE_RELATIVE_PATH.as_posix()
_IN_DATA_DIR = "<data-dir>"
TAIL_ANCHORS_FILE_NAME = "tail-anchors.json"  # in the prompt cache folder: where each conversation's tail went


@dataclass(frozen=True)
class ServeOptions:
    """What `serve` was asked to do (the parsed flags)."""

    model: Path | None = None
    llm_url: str | None = None
    no_model: bool = False
    scripted_model: Path | None = None  # a script file: serve the scripted model (pyruntime/model/scripted.py)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    ctx: int | None = None
    data_dir: Path | None = None
    store: str | None = None  # a postgresql:// URL: saves in that database instead of files (headless servers)
    session_only: bool = False
    listen: str = DEFAULT_HOST
    grpc_port: int = DEFAULT_GRPC_PORT
    connect_port: int = DEFAULT_CONNECT_PORT
    token_file: Path | None = None
    tls_cert: Path | None = None  # with tls_key: both RPC ports speak TLS (required beyond loopback)
    tls_key: Path | None = None
    grace: float = DEFAULT_GRACE_S
    chat_history_cap: int = DEFAULT_CHAT_CAP
    transcript_cap: int = DEFAULT_TRANSCRIPT_CAP
    tool_mode: ToolCallMode | None = None
    memory_design: MemoryDesign | None = None  # None: the factory's model profile decides
    prewarm: bool | None = None  # None: on for a hosted model, off for --llm-url (the factory's default)
    parent_pid: int | None = None
    exit_on_stdin_eof: bool = False
    threads: int | None = None  # None: default_threads() (half the cores, at least 1)
    n_gpu_layers: int = 0  # layers of the hosted model on the GPU; 0: CPU only, -1: all
    prompt_cache_mb: int | None = None  # host RAM for cold conversations' states; 0: off, None: by model size
    prompt_cache_dir: Path | None = None  # the slots' states saved there at a stop, restored at start; None: off
    slots: int | None = None  # parallel slots of the hosted engine; None: DEFAULT_SLOTS
    llm_api_key_file: Path | None = None  # the --llm-url server's key, in a file
    llm_headers: tuple[str, ...] = ()  # extra "Name: value" headers for the --llm-url server
    models_dir: Path | None = None  # where `--model NAME` is looked up (None: <data-dir>/CoreAI/models, per-user cache)
    model_pull: ModelPull | None = None  # `--model NAME` of a catalogue model not pulled yet: downloaded first

    @property
    def hosts_model(self) -> bool:
        """True when serve runs llama.cpp itself (neither --llm-url nor --no-model)."""
        return self.llm_url is None and not self.no_model and self.scripted_model is None


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
                   help="host RAM for the states of NPCs that lost their slot, restored by copy when they speak "
                        "again (0: off; default 256 for a model under 1 GB, else 2048; "
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
    p.add_argument("--memory-design", choices=[d.value for d in MemoryDesign],
                   help="how memory is written: 'tool' (the memory tool in the reply) or 'writer' (a separate "
                        "decision after the reply); default: writer for a small hosted model, else tool")
    p.add_argument("--tool-mode", choices=[m.value for m in ToolCallMode],
                   help="how tool calls travel (default: structured for a hosted model, native for --llm-url)")
    p.add_argument("--prewarm", choices=["on", "off"],
                   help="after each turn (and its memory write), evaluate the conversation's next prompt in the "
                        "background so the next reply starts warm (default: on for a hosted model, off for "
                        "--llm-url: turn it on for a llama.cpp server that keeps its prompt)")
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


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """The options of parsed `serve` flags, completed from COREAI_* variables, the --config file and the defaults."""
    args = layers.resolve(args)
    models_dir = getattr(args, "models_dir", None)
    model, model_pull = resolve_model_flag(args.model, models_dir=models_dir, data_dir=args.data_dir)
    return ServeOptions(
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
        llm_headers=_header_list(getattr(args, "llm_header", None)))


def _header_list(value: object) -> tuple[str, ...]:
    """--llm-header values (a single string from the environment or a config file is one header)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def llm_headers(options: ServeOptions) -> dict[str, str]:
    """The --llm-header values as headers; InvalidArgumentError for one that is not `Name: value`."""
    headers: dict[str, str] = {}
    for raw in options.llm_headers:
        name, sep, value = raw.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or any(c in name for c in " \t()<>@,;:\\\"/[]?={}") or not name.isascii():
            raise InvalidArgumentError('--llm-header must be "Name: value"')
        if any(c in raw for c in "\r\n\0") or not value.isprintable():
            raise InvalidArgumentError("--llm-header must be one printable line")
        if name.lower() == "authorization":
            raise InvalidArgumentError("--llm-header cannot carry the key: use --llm-api-key-file or "
                                       f"${LLM_API_KEY_ENV}")
        headers[name] = value
    return headers


def llm_api_key(options: ServeOptions) -> str | None:
    """The --llm-url server's key: --llm-api-key-file, else $COREAI_LLM_API_KEY, else None (never logged)."""
    return read_llm_api_key(options.llm_api_key_file)


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
        return asyncio.run(serve(options))
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


def validate(options: ServeOptions) -> None:
    """Refuse bad flags before anything starts (InvalidArgumentError naming the flag)."""
    if options.store is not None:
        from pyruntime.stores.postgres import is_database_url

        if not is_database_url(options.store):
            raise InvalidArgumentError("--store must be a postgresql:// URL")
        if options.session_only:
            raise InvalidArgumentError("--store and --session-only exclude each other")
    if options.data_dir is None and not options.session_only and options.store is None:
        raise InvalidArgumentError(
            "--data-dir is required (the game's persistentDataPath, where saves live); "
            "pass --session-only to keep everything in memory instead")
    if options.data_dir is not None and options.data_dir.exists() and not options.data_dir.is_dir():
        raise InvalidArgumentError("--data-dir exists but is not a directory")
    if options.llm_url is not None and not options.llm_url.startswith(("http://", "https://")):
        raise InvalidArgumentError("--llm-url must be an http:// or https:// URL")
    if options.llm_url is None and (options.llm_api_key_file is not None or options.llm_headers):
        raise InvalidArgumentError("--llm-api-key-file and --llm-header are for an --llm-url server")
    if options.llm_url is not None:
        llm_headers(options)
        llm_api_key(options)
    if options.slots is not None and not 1 <= options.slots <= MAX_SLOTS:
        raise InvalidArgumentError(f"--slots must be within 1..{MAX_SLOTS}, got {options.slots}")
    if options.scripted_model is not None:
        Script.load(options.scripted_model)  # a bad script is a usage error naming its field, before anything starts
    if options.model is not None and options.model.suffix.lower() != ".gguf":
        raise InvalidArgumentError("--model must be a .gguf file or a model name")
    if options.hosts_model and not 0 < options.port <= 65535:
        raise InvalidArgumentError(f"--port must be within 1..65535, got {options.port}")
    for flag, port in (("--grpc-port", options.grpc_port), ("--connect-port", options.connect_port)):
        if not 0 <= port <= 65535:
            raise InvalidArgumentError(f"{flag} must be within 0..65535 (0 = any free port), got {port}")
    ports = [options.grpc_port, options.connect_port] + ([options.port] if options.hosts_model else [])
    fixed = [p for p in ports if p != 0]
    if len(set(fixed)) != len(fixed):
        raise InvalidArgumentError("--port, --grpc-port and --connect-port must differ")
    if options.grace < 0:
        raise InvalidArgumentError("--grace must be >= 0 seconds")
    if options.threads is not None and options.threads < 1:
        raise InvalidArgumentError(f"--threads must be at least 1, got {options.threads}")
    if options.n_gpu_layers < -1:
        raise InvalidArgumentError(f"--n-gpu-layers must be -1 (all), 0 (CPU) or more, got {options.n_gpu_layers}")
    if options.parent_pid is not None and options.parent_pid <= 0:
        raise InvalidArgumentError(f"--parent-pid must be a process id (> 0), got {options.parent_pid}")
    if options.prompt_cache_dir is not None and options.prompt_cache_dir.exists() and \
            not options.prompt_cache_dir.is_dir():
        raise InvalidArgumentError("--prompt-cache-dir exists but is not a directory")
    _check_prompt_cache_folder(options)
    if options.chat_history_cap < 1 or options.transcript_cap < 1:
        raise InvalidArgumentError("--chat-history-cap and --transcript-cap must be at least 1")
    if not is_loopback_host(options.host):
        raise InvalidArgumentError(f"--host must be loopback (the model port has no TLS), got {options.host}")
    _, given = resolve_token()  # also refuses a malformed $COREAI_RUNTIME_TOKEN
    tls = tls_files(options.tls_cert, options.tls_key)
    check_listen(options.listen, token_given=given, tls=tls)
    if tls is not None:
        tls.check()


class _StopClock:
    """When the stop began: what comes after the RPC servers (the memory passes) shares their grace period."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.began: float | None = None

    def start(self) -> None:
        """The stop begins now."""
        self.began = time.monotonic()

    def left(self) -> float:
        """Seconds of the grace period still left (all of it before the stop began)."""
        if self.began is None:
            return self.grace
        return max(0.0, self.began + self.grace - time.monotonic())


@dataclass(frozen=True)
class _Model:
    """Where turns go: the base URL, the alias shown in Health, the hosted child (if serve runs one)."""

    url: str | None
    alias: str
    server: LlamaServerProcess | None = None
    supervisor: ModelSupervisor | None = None  # watches and restarts the hosted child
    port_key: str | None = None  # the key of the model port serve opened (hosted or scripted), for model_key_file


async def serve(options: ServeOptions, *, on_ready: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Start everything, announce readiness, wait for a signal (or the model server dying), stop in reverse."""
    stop = asyncio.Event()
    clock = _StopClock(options.grace)
    with _stop_triggers(options, stop):
        async with contextlib.AsyncExitStack() as stack:
            starting = asyncio.create_task(_start(options, stack, stop, clock))
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
            ready, model = starting.result()
            (on_ready or _print_ready)(ready)
            log.info("ready; stop with Ctrl+C or SIGTERM")
            code = await _wait(stop)
            clock.start()
            if model.supervisor is not None:
                # Stopping: the watchdog restarts nothing any more (a hung engine is stopped, not reloaded).
                model.supervisor.stop_restarting()
            return code


@contextlib.contextmanager
def _stop_triggers(options: ServeOptions, stop: asyncio.Event) -> Iterator[None]:
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


class _Loading:
    """Health while serve loads the model: the hosted child's progress, never ready before turns are bound."""

    def __init__(self) -> None:
        self.host: object | None = None  # the LlamaServerProcess, then its supervisor, once they exist

    def __call__(self) -> Readiness:
        readiness = hosted_model_readiness(self.host) if self.host is not None else MODEL_LOADING
        return MODEL_LOADING if readiness.model_ready else readiness


async def _start(options: ServeOptions, stack: contextlib.AsyncExitStack,
                 stop: asyncio.Event | None = None, clock: _StopClock | None = None) -> tuple[dict[str, Any], _Model]:
    """Each stage in order; each registers its own stop on stack first, so any failure unwinds what started.

    The RPC ports open before the model loads (health answers 503 "loading", turns UNAVAILABLE meanwhile);
    the model's stops go on a stack entered before the RPC servers', so they still run after those stopped.
    """
    _check_rpc_ports_free(options)
    stores = _open_stores(options)
    stack.callback(stores.close)  # a database pool: closed after the RPC servers stopped
    policy = AgentMemoryPolicy()
    loading = None if options.no_model else _Loading()
    services = RuntimeServices.create(stores, policy, readiness=loading)
    if stop is not None and is_loopback_host(options.listen):
        # The Shutdown RPC: the launcher's graceful stop where there is no SIGTERM (Windows). Beyond loopback a
        # game client's token must not stop a shared server, so there it stays refused.
        loop = asyncio.get_running_loop()
        requested = stop

        def request_stop() -> None:
            loop.call_soon_threadsafe(requested.set)

        services.orchestrator.stop_requested = request_stop
    model_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
    token_file = _token_file(options, stack)
    token_root = _token_root(options)
    config = RpcConfig(host=options.listen, grpc_port=options.grpc_port, connect_port=options.connect_port,
                       token_file=token_file, token_root=token_root, grace_s=options.grace,
                       tls=tls_files(options.tls_cert, options.tls_key))
    servers = RpcServers(services, config)
    stack.push_async_callback(_stop_rpc, servers)
    await servers.start()
    if options.model_pull is not None:
        await _pull_model(options.model_pull, services, loading)
    model = await _start_model(options, model_stack, loading)
    await _attach_turns(options, services, stores, model, model_stack, clock or _StopClock(options.grace))
    ready = {"grpc_port": servers.grpc_port, "connect_port": servers.connect_port, "model_url": model.url,
             "token_file": str(token_file)}
    if model.port_key:
        # For external OpenAI clients on this machine; same folder and rights as the token (0600).
        key_file = write_token_file(token_file.with_name(MODEL_KEY_FILE_NAME), model.port_key, root=token_root)
        ready["model_key_file"] = str(key_file)
    return ready, model


async def _pull_model(pull: ModelPull, services: RuntimeServices, loading: _Loading | None) -> None:
    """Download the named model before it loads; Health says "downloading" with its progress meanwhile."""
    status = PullStatus(pull.request.name, pull.request.size_bytes)
    if loading is not None:
        loading.host = status
    services.orchestrator.model_download = status.message
    log.info("model %s is not pulled yet: downloading it into %s", pull.request.name, pull.cache.root)
    pulling = asyncio.ensure_future(asyncio.to_thread(pull.cache.pull, pull.request, progress=status.update))
    try:
        model = await asyncio.shield(pulling)
    except asyncio.CancelledError:
        status.cancelled = True  # the next progress update ends the download thread; the partial file stays
        with contextlib.suppress(Exception):
            await pulling
        raise
    finally:
        services.orchestrator.model_download = lambda: None
    log.info("model %s downloaded and checked (%d bytes)", model.name, model.size_bytes)


def _check_rpc_ports_free(options: ServeOptions) -> None:
    """Fail before the model loads (seconds) when an RPC port is taken; the bind itself stays the real check."""
    if ":" in options.listen:
        return  # port_is_free speaks IPv4 only; the bind reports IPv6 conflicts
    host = "127.0.0.1" if options.listen == "localhost" else options.listen
    for flag, port in (("--grpc-port", options.grpc_port), ("--connect-port", options.connect_port)):
        if port and not port_is_free(host, port):
            raise OSError(errno.EADDRINUSE, f"port {port} ({flag}) on {options.listen} is already in use")


def _open_stores(options: ServeOptions) -> StoreBundle:
    mode = AgentMemoryPersistenceMode.SESSION_ONLY if options.session_only else AgentMemoryPersistenceMode.PERSISTENT
    stores = open_stores(mode, options.data_dir, chat_cap=options.chat_history_cap,
                         transcript_cap=options.transcript_cap, database_url=options.store)
    log.info("stores open: %s%s (chat cap %d, transcript cap %d)", mode.value,
             " in PostgreSQL" if options.store else "", options.chat_history_cap, options.transcript_cap)
    return stores


async def _start_model(options: ServeOptions, stack: contextlib.AsyncExitStack, loading: _Loading | None) -> _Model:
    if options.no_model:
        log.info("no model: turns answer UNAVAILABLE")
        return _Model(None, "")
    if options.llm_url is not None:
        return _Model(options.llm_url, await _check_external(options.llm_url, llm_api_key(options),
                                                              llm_headers(options)))
    if options.scripted_model is not None:
        key = generate_model_key()  # the same key rule as the hosted model port
        scripted = ScriptedModelServer(Script.load(options.scripted_model), options.host, options.port, api_key=key)
        await scripted.start()
        stack.push_async_callback(scripted.stop)
        return _Model(scripted.base_url, MODEL_ID, port_key=key)
    config = hosted_model_config(options.model, host=options.host, port=options.port, n_ctx=options.ctx,
                                 n_threads=options.threads, n_gpu_layers=options.n_gpu_layers, slots=options.slots,
                                 prompt_cache_mb=options.prompt_cache_mb, prompt_cache_dir=options.prompt_cache_dir)
    server = LlamaServerProcess(config)
    stack.push_async_callback(_stop_model, server)
    if loading is not None:
        loading.host = server
    await _host(server)
    supervisor = ModelSupervisor(server)
    if loading is not None:
        loading.host = supervisor
    supervisor.watch()
    stack.push_async_callback(asyncio.to_thread, supervisor.stop_watching)  # before the child is stopped
    log.info("serving model %s at %s (%d slots)", server.config.alias, server.base_url, server.config.slots)
    return _Model(server.base_url, server.config.alias, server, supervisor, port_key=server.api_key)


async def _host(server: LlamaServerProcess) -> None:
    """Start the llama.cpp child; if cancelled meanwhile, keep stopping it until its start gives up."""
    loading = asyncio.ensure_future(asyncio.to_thread(server.start))
    loading.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no "never retrieved" noise
    try:
        await asyncio.shield(loading)
    except asyncio.CancelledError:
        # The loading thread cannot be cancelled; a child it spawns after one stop() would outlive us.
        while not loading.done():
            await asyncio.to_thread(server.stop)
            await asyncio.wait({loading}, timeout=_WATCH_S)
        raise


async def _stop_model(server: LlamaServerProcess) -> None:
    if server.pid is None:
        return
    await asyncio.to_thread(server.stop)
    log.info("model server stopped")


async def _check_external(url: str, api_key: str | None, headers: dict[str, str]) -> str:
    """The alias of the external server's first model (never a path); raises when it does not answer."""
    async with OpenAICompatClient(url, timeout=10.0, api_key=api_key, headers=headers) as client:
        models = await client.models()
    log.info("external model server answers with %d model(s)", len(models))
    if not models:
        return ""
    # llama-cpp-python lists a model by its file path unless it has an alias; a path never goes out.
    name = PurePosixPath(models[0].replace("\\", "/")).name
    return name[:-5] if name.lower().endswith(".gguf") else name


async def _attach_turns(options: ServeOptions, services: RuntimeServices, stores: StoreBundle, model: _Model,
                        stack: contextlib.AsyncExitStack, clock: _StopClock) -> None:
    """With a model, bind the turns to an orchestrator against it (built from the started server)."""
    if model.url is None:
        return
    from pyruntime.turns import build_orchestrator  # the turn engine only when there is a model
    from pyruntime.turns.convert import ProtoTurnRunner

    # Tool mode and calls per round: the factory's model profile, the same as the chat's.
    mode = options.tool_mode
    policy = services.orchestrator.policy
    if model.server is not None:
        orchestrator = build_orchestrator(server=model.server, stores=stores, policy=policy, tool_mode=mode,
                                          memory_design=options.memory_design, prewarm=options.prewarm)
    else:
        external = options.llm_url is not None
        orchestrator = build_orchestrator(base_url=model.url, stores=stores, policy=policy, tool_mode=mode,
                                          memory_design=options.memory_design, prewarm=options.prewarm,
                                          api_key=llm_api_key(options) if external else model.port_key,
                                          headers=llm_headers(options) if external else None)
    stack.push_async_callback(orchestrator.client.aclose)
    if options.prompt_cache_dir is not None and model.server is not None:
        # With the prompt states on disk, the prompts after a restart must be the ones sent before it.
        anchors = options.prompt_cache_dir / TAIL_ANCHORS_FILE_NAME
        orchestrator.load_tail_anchors(anchors)
        stack.push_async_callback(asyncio.to_thread, _save_tail_anchors, orchestrator, anchors)
    # Runs before the client closes (and after the RPC servers stop): memory passes still queued get what is left
    # of the grace period (counted from the signal: a launcher's stop timeout covers the whole stop), the rest are
    # cancelled (behind a hung or busy engine they would hold up the stop).
    passes = orchestrator.memory_passes
    stack.push_async_callback(lambda: passes.stop(clock.left()))
    # Runs first: a prewarm warms a next turn that will not come (it never holds up a memory pass).
    stack.push_async_callback(orchestrator.prewarms.cancel)
    log.info("memory design: %s", orchestrator.memory_design.value)
    if model.supervisor is not None:
        orchestrator.client.gate = model.supervisor.check_available  # turns fail fast while it restarts

    # Health reads the host's state, never the model server (llama.cpp answers /v1/models only between generations).
    host = model.supervisor or model.server
    readiness = (lambda: hosted_model_readiness(host)) if host is not None else (lambda: EXTERNAL_MODEL)
    services.orchestrator.memory_design = orchestrator.memory_design.value
    services.metrics.watch_model_queue(lambda: orchestrator.queue.waiting)
    services.metrics.watch_prewarms(orchestrator.prewarms.stats.counts)
    services.orchestrator.attach_runner(ProtoTurnRunner(orchestrator), model.alias)
    if host is not None:
        services.orchestrator.model_memory = lambda: hosted_model_memory(host)
    services.orchestrator.readiness = readiness  # last: health says ready only once turns can run


def _save_tail_anchors(orchestrator: Any, path: Path) -> None:
    """At shutdown (after the last turn): a failure costs warm first turns after the restart, nothing else."""
    try:
        orchestrator.save_tail_anchors(path)
    except Exception as exc:  # noqa: BLE001
        log.warning("tail anchors not saved (%s)", type(exc).__name__)


def _token_file(options: ServeOptions, stack: contextlib.AsyncExitStack) -> Path:
    """--token-file, else under the data dir; session-only without one: a private folder removed at exit."""
    if options.token_file is not None:
        return options.token_file
    if options.data_dir is not None:
        return default_token_file(options.data_dir)
    folder = Path(tempfile.mkdtemp(prefix="coreai-runtime-"))  # 0700
    stack.callback(shutil.rmtree, folder, True)
    return folder / "token"


def _check_prompt_cache_folder(options: ServeOptions) -> None:
    """A prompt cache inside the data folder (`<data-dir>/CoreAI/runtime/prompt-cache`) must not go through a link:
    the model child writes and removes state files there."""
    if options.prompt_cache_dir is None or options.data_dir is None:
        return
    root = Path(options.data_dir) / DATA_FOLDER
    if root not in Path(options.prompt_cache_dir).parents:
        return
    try:
        with confined.open_folder(Path(options.prompt_cache_dir), root):
            pass
    except FileNotFoundError:
        pass  # created on first use
    except confined.UnsafeSaveError as exc:
        raise InvalidArgumentError(f"--prompt-cache-dir: {exc}") from None


def _token_root(options: ServeOptions) -> Path | None:
    """The data folder the token file is in (its default place, `<data-dir>/CoreAI/runtime/`): nothing below it is
    followed through a link. A --token-file the user named is written where it says."""
    if options.token_file is not None or options.data_dir is None:
        return None
    return Path(options.data_dir) / DATA_FOLDER


async def _stop_rpc(servers: RpcServers) -> None:
    """Stop accepting, give in-flight calls the grace period, then wait for store writes still running."""
    log.info("stopping")
    try:
        await servers.stop()
    finally:
        await asyncio.to_thread(servers.services.close)
    log.info("RPC servers stopped")


def _print_ready(ready: dict[str, Any]) -> None:
    print(json.dumps(ready), flush=True)


async def _wait(stop: asyncio.Event) -> int:
    """Until a stop signal. A model that cannot be kept up does not end serve: the watchdog keeps trying."""
    await stop.wait()
    return EXIT_OK
