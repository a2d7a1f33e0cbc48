"""`coreai-runtime chat`: a terminal chat with one role, the quickest way to see the runtime work.

It hosts the embedded model (or `--model`, or talks to `--llm-url`) and keeps memory and history in file stores
under the data dir per the role's policy. The runtime is `serve`'s (`pyruntime/app.py`'s `Runtime`, from one
`RuntimeSettings`: stores, model with its watchdog, turn engine), without the RPC ports; the loop and its printing
are `cli/chat_view.py`. It reads stdin line by line, so a script can drive it; end of input quits cleanly. Errors
are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from google.protobuf import json_format

from coreai.v1 import common_pb2
from pyruntime.app import Runtime
from pyruntime.cli.chat_view import EXIT_FAILED, EXIT_OK, ChatSession, LineReader, is_tty
from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.llm_key import read_llm_api_key
from pyruntime.model.hosting.llama_server import DEFAULT_HOST
from pyruntime.policy import RoleMemoryConfig, config_from_proto
from pyruntime.scopes import AgentMemoryScope, normalize_role_id
from pyruntime.settings import RuntimeSettings
from pyruntime.turns import ToolCallMode
from pyruntime.turns.factory import model_profile
from pyruntime.turns.orchestrator import DEFAULT_TURN_TIMEOUT_S
from pyruntime.turns.writer.decision import MemoryDesign

log = logging.getLogger(__name__)

EXIT_USAGE = 2

DEFAULT_ROLE = "SmartChat"
DEFAULT_MAX_TOKENS = 256  # small models ramble; a chat line needs no more
LOAD_TICK_S = 2.0

def default_data_dir() -> Path:
    """The per-user folder for the chat's saves: `$XDG_DATA_HOME/coreai-runtime` or `~/.local/share/coreai-runtime`."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".local" / "share") / "coreai-runtime"


@dataclass(frozen=True)
class ChatOptions:
    """What `chat` was asked to do."""

    role: str
    data_dir: Path
    model: Path | None
    llm_url: str | None
    api_key: str | None
    scope: AgentMemoryScope
    actor: str | None
    tool_mode: ToolCallMode
    memory_design: MemoryDesign | None
    role_config: RoleMemoryConfig | None
    max_tokens: int
    timeout: float
    ctx: int | None
    threads: int | None = None  # hosted model's CPU threads; None: half the cores
    n_gpu_layers: int = 0  # hosted model's layers on the GPU; 0: CPU only, -1: all
    prewarm: bool | None = None  # None: on for a hosted model, off for --llm-url


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `chat` subcommand."""
    p = subparsers.add_parser("chat", help="chat with a role in the terminal (hosts the embedded model by default)")
    p.add_argument("--role", default=DEFAULT_ROLE, help=f"role to chat with (default {DEFAULT_ROLE})")
    p.add_argument("--data-dir", type=Path, default=None,
                   help=f"where the saves live (default {default_data_dir()}; the runtime adds CoreAI/...)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", type=Path, help="GGUF model file to host (default: the embedded SmolLM2-135M)")
    source.add_argument("--llm-url", help="use this OpenAI-compatible server (e.g. http://127.0.0.1:1234/v1) instead")
    p.add_argument("--llm-api-key-file", type=Path, default=None,
                   help="the --llm-url server's API key, read from this file (or $COREAI_LLM_API_KEY)")
    p.add_argument("--api-key", default=None,
                   help="the --llm-url server's key on the command line (other users can read it: prefer "
                        "--llm-api-key-file or $COREAI_LLM_API_KEY)")
    p.add_argument("--tenant", default=None)
    p.add_argument("--user", default=None)
    p.add_argument("--session", default=None)
    p.add_argument("--topic", default=None)
    p.add_argument("--actor", default=None, help="named actor (NPC instance); 'local' = none")
    p.add_argument("--tool-mode", choices=[m.value for m in ToolCallMode], default=None,
                   help="how tool calls travel (default: structured for a hosted model, native for --llm-url)")
    p.add_argument("--memory-design", choices=[d.value for d in MemoryDesign], default=None,
                   help="how memory is written: 'tool' (the memory tool in the reply) or 'writer' (a separate "
                        "decision after the reply); default: writer for a small hosted model, else tool")
    p.add_argument("--prewarm", choices=["on", "off"], default=None,
                   help="evaluate the next prompt in the background after each turn (default: on for a hosted "
                        "model, off for --llm-url)")
    p.add_argument("--role-config", type=Path, default=None,
                   help="a coreai.v1.RoleMemoryConfig as proto3 JSON (what a game sends with ConfigureRole), "
                        "registered for --role before the chat starts: the chat then runs the role as serve would")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                   help=f"most tokens per model reply (default {DEFAULT_MAX_TOKENS})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TURN_TIMEOUT_S,
                   help=f"seconds one turn may take (default {DEFAULT_TURN_TIMEOUT_S:g})")
    p.add_argument("--ctx", type=int, default=None, help="context size of a hosted model (default 8192)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads of a hosted model (default: half the cores, at least 1)")
    p.add_argument("--n-gpu-layers", type=int, default=0, metavar="N",
                   help="layers of a hosted model offloaded to the GPU (default 0: CPU only; -1: all); "
                        "needs a GPU build of llama-cpp-python")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `chat`: returns the exit code; every error is one line on stderr."""
    _quiet_logs(verbose=bool(getattr(args, "verbose", False)))
    try:
        options = _options(args)
        return asyncio.run(chat(options, sys.stdin, sys.stdout))
    except InvalidArgumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CoreAIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        # The OS message may carry a path; say what failed, not where.
        print(f"error: I/O error ({type(exc).__name__}, errno {exc.errno})", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # the CLI promises one line, not a traceback
        print(f"error: unexpected {type(exc).__name__}", file=sys.stderr)
        log.debug("details", exc_info=True)
        return EXIT_FAILED


def _quiet_logs(verbose: bool) -> None:
    """The chat prints its own progress; the runtime's info lines would interleave with the reply."""
    if not verbose:
        for name in ("pyruntime", "httpx"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _options(args: argparse.Namespace) -> ChatOptions:
    """Validate the arguments before anything starts or is written."""
    role = normalize_role_id(args.role)
    data_dir = args.data_dir if args.data_dir is not None else default_data_dir()
    if data_dir.exists() and not data_dir.is_dir():
        raise InvalidArgumentError("--data-dir exists but is not a directory")
    if args.llm_url is not None and not args.llm_url.startswith(("http://", "https://")):
        raise InvalidArgumentError("--llm-url must be an http:// or https:// URL")
    if args.model is not None and not args.model.is_file():
        raise InvalidArgumentError("--model must be an existing .gguf file")
    if args.max_tokens < 1:
        raise InvalidArgumentError("--max-tokens must be at least 1")
    if not args.timeout > 0:
        raise InvalidArgumentError("--timeout must be a positive number of seconds")
    if args.threads is not None and args.threads < 1:
        raise InvalidArgumentError("--threads must be at least 1")
    if args.n_gpu_layers < -1:
        raise InvalidArgumentError("--n-gpu-layers must be -1 (all), 0 (CPU) or more")
    profile = model_profile(hosted=args.llm_url is None, tool_mode=args.tool_mode)
    return ChatOptions(
        role=role,
        data_dir=data_dir,
        model=args.model,
        llm_url=args.llm_url,
        api_key=args.api_key or (read_llm_api_key(args.llm_api_key_file) if args.llm_url else None),
        scope=AgentMemoryScope(args.tenant, args.user, args.session, args.topic),
        actor=args.actor,
        tool_mode=profile.tool_mode,
        memory_design=MemoryDesign.parse(args.memory_design) if args.memory_design else None,
        role_config=_role_config(args.role_config, role) if getattr(args, "role_config", None) else None,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        ctx=args.ctx,
        threads=args.threads,
        n_gpu_layers=args.n_gpu_layers,
        prewarm={"on": True, "off": False}.get(getattr(args, "prewarm", None) or ""),
    )


def _role_config(path: Path, role: str) -> RoleMemoryConfig:
    """The role config of a `--role-config` file, read as ConfigureRole reads its message."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise InvalidArgumentError("--role-config must be a readable UTF-8 JSON file") from None
    message = common_pb2.RoleMemoryConfig()
    try:
        json_format.Parse(text, message)
    except json_format.ParseError as exc:
        raise InvalidArgumentError(f"--role-config is not a coreai.v1.RoleMemoryConfig in JSON ({exc})") from None
    if not message.role_id.strip():
        message.role_id = role
    if normalize_role_id(message.role_id) != role:
        raise InvalidArgumentError("--role-config names another role than --role")
    return config_from_proto(message)


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nothing listens on right now (the OS picks it): the chat's model is private to it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def chat_settings(options: ChatOptions) -> RuntimeSettings:
    """The chat's runtime: file stores under the data dir, its own model on a free port, no RPC ports, and an
    `--llm-url` server that may come up later (its first turn says when it is down)."""
    return RuntimeSettings(
        model=options.model, llm_url=options.llm_url, api_key=options.api_key, check_llm_url=False,
        port=free_port(), ctx=options.ctx, threads=options.threads, n_gpu_layers=options.n_gpu_layers,
        data_dir=options.data_dir, rpc=False, tool_mode=options.tool_mode, memory_design=options.memory_design,
        prewarm=options.prewarm, turn_timeout=options.timeout,
        roles=(options.role_config,) if options.role_config is not None else ())


async def chat(options: ChatOptions, stdin: TextIO, out: TextIO) -> int:
    """Run the chat until /quit or end of input; hosts (and stops) the model unless `llm_url` is set.

    The runtime is built and stopped as serve's is (`pyruntime/app.py`): everything stops in reverse on every path.
    """
    options.data_dir.mkdir(parents=True, exist_ok=True)
    print(f"Saves: {options.data_dir / 'CoreAI'}", file=out, flush=True)
    async with Runtime(chat_settings(options)) as runtime:
        await _start_with_progress(runtime, out)
        assert runtime.orchestrator is not None and runtime.model is not None  # the chat always has a model
        session = ChatSession(runtime.orchestrator, out, role=options.role, scope=options.scope,
                              actor=options.actor, max_tokens=options.max_tokens, server=runtime.model.server)
        return await session.run(LineReader(stdin), interactive=is_tty(stdin))


async def _start_with_progress(runtime: Runtime, out: TextIO) -> None:
    """Start the runtime; while a hosted model loads, print a line every few seconds."""
    hosted = runtime.settings.hosts_model
    if hosted:
        config = runtime.model_config
        size_mb = config.model_path.stat().st_size / 1e6
        print(f"Loading model {config.alias} ({size_mb:.0f} MB) ...", file=out, flush=True)
    else:
        print(f"Using the model server at {runtime.settings.llm_url}", file=out, flush=True)
    began = time.perf_counter()
    starting = asyncio.ensure_future(runtime.start())
    try:
        while not (await asyncio.wait({starting}, timeout=LOAD_TICK_S))[0]:
            if hosted:
                print(f"  still loading ... {time.perf_counter() - began:.0f} s", file=out, flush=True)
    except BaseException:
        starting.cancel()  # the start unwinds what it started; the runtime's stop does the rest
        with contextlib.suppress(BaseException):
            await starting
        raise
    starting.result()  # raises ModelUnavailableError with the reason
    if hosted:
        print(f"Model ready in {time.perf_counter() - began:.1f} s.", file=out, flush=True)
