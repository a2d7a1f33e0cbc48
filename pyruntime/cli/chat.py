"""`coreai-runtime chat`: a terminal chat with one role, the quickest way to see the runtime work.

It hosts the embedded model (or `--model`, or talks to `--llm-url`), keeps memory and history in
file stores under the data dir per the role's policy, streams the reply as it decodes and shows
tool calls compactly (`[memory append ✓]`) and, with the memory writer pass (small models), what it
stored after each turn in one line (`[stored: Player's name: Alex]`). Lines starting with `/` are commands (`/help`). It
reads stdin line by line, so a script can drive it; end of input quits cleanly. Errors are one
line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from google.protobuf import json_format

from coreai.v1 import common_pb2
from pyruntime.app import start_hosted_model
from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.llm_key import read_llm_api_key
from pyruntime.memory.versions import list_versions, revert_memory
from pyruntime.model.hosting import LlamaServerProcess, hosted_model_config
from pyruntime.model.llama_server import DEFAULT_HOST
from pyruntime.model.seam import Gate
from pyruntime.model.supervisor import ModelSupervisor
from pyruntime.policy import RoleMemoryConfig, config_from_proto
from pyruntime.scopes import AgentMemoryScope, normalize_role_id
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    LoadStatus,
    ScopedAgentMemoryStore,
    StoreBundle,
    open_stores,
)
from pyruntime.turns import (
    AiOrchestrator,
    AiTaskRequest,
    FinalEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolCallMode,
    ToolResultEvent,
    TurnEvent,
    build_orchestrator,
)
from pyruntime.turns.factory import model_profile
from pyruntime.turns.memory_pass import MemoryPassOutcome
from pyruntime.turns.memory_writer import MemoryDesign
from pyruntime.turns.orchestrator import DEFAULT_TURN_TIMEOUT_S

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DEFAULT_ROLE = "SmartChat"
DEFAULT_MAX_TOKENS = 256  # small models ramble; a chat line needs no more
LOAD_TICK_S = 2.0
TOOL_DETAIL_CHARS = 80
STORED_LINE_CHARS = 160

HELP = """Commands:
  /memory      show the role's memory document
  /versions    list the memory's retained versions
  /revert N    set the memory back to version N (recorded as a new version)
  /history     show the chat history (and the conversation summary)
  /clear       clear the chat history and the conversation summary (the memory stays)
  /help        this list
  /quit        leave (end of input and Ctrl+D leave too)
Anything else is sent to the role."""


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


async def chat(options: ChatOptions, stdin: TextIO, out: TextIO) -> int:
    """Run the chat until /quit or end of input; hosts (and stops) the model unless `llm_url` is set.

    The model, its watchdog and the orchestrator start as the runtime's do (`pyruntime/app.py`): the watchdog is
    the client's gate, and everything stops in reverse on every path.
    """
    options.data_dir.mkdir(parents=True, exist_ok=True)
    print(f"Saves: {options.data_dir / 'CoreAI'}", file=out, flush=True)
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, options.data_dir)
    async with contextlib.AsyncExitStack() as stack:
        server: LlamaServerProcess | None = None
        supervisor: ModelSupervisor | None = None
        if options.llm_url is None:
            config = hosted_model_config(options.model, port=free_port(), n_ctx=options.ctx, n_threads=options.threads,
                                         n_gpu_layers=options.n_gpu_layers)
            server = LlamaServerProcess(config)
            supervisor = await _start_with_progress(server, stack, out)
        else:
            print(f"Using the model server at {options.llm_url}", file=out, flush=True)
        orchestrator = chat_orchestrator(stores, options.tool_mode, server=server, base_url=options.llm_url,
                                         api_key=options.api_key, timeout=options.timeout,
                                         memory_design=options.memory_design, prewarm=options.prewarm,
                                         gate=supervisor.check_available if supervisor is not None else None)
        stack.push_async_callback(orchestrator.client.aclose)
        stack.push_async_callback(orchestrator.prewarms.cancel)  # first: no next turn will come
        if options.role_config is not None:
            orchestrator.policy.set(options.role_config)
        session = ChatSession(orchestrator, options, out, server)
        return await session.run(_LineReader(stdin), interactive=_is_tty(stdin))


def chat_orchestrator(
    stores: StoreBundle,
    tool_mode: ToolCallMode,
    *,
    server: LlamaServerProcess | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TURN_TIMEOUT_S,
    memory_design: MemoryDesign | None = None,
    prewarm: bool | None = None,
    gate: Gate | None = None,
) -> AiOrchestrator:
    """The chat's orchestrator for a hosted `server` or an external `base_url` (the factory's model profile);
    `gate`: the hosted model's watchdog (turns fail fast while it restarts)."""
    return build_orchestrator(server=server, base_url=base_url, api_key=api_key, stores=stores,
                              tool_mode=tool_mode, default_timeout=timeout, memory_design=memory_design,
                              prewarm=prewarm, gate=gate)


async def _start_with_progress(server: LlamaServerProcess, stack: contextlib.AsyncExitStack,
                               out: TextIO) -> ModelSupervisor:
    """Start the model server and its watchdog (their stops on `stack`), printing a line every few seconds."""
    size_mb = server.config.model_path.stat().st_size / 1e6
    print(f"Loading model {server.config.alias} ({size_mb:.0f} MB) ...", file=out, flush=True)
    began = time.perf_counter()
    starting = asyncio.ensure_future(start_hosted_model(server, stack))
    while True:
        done, _ = await asyncio.wait({starting}, timeout=LOAD_TICK_S)
        if done:
            break
        print(f"  still loading ... {time.perf_counter() - began:.0f} s", file=out, flush=True)
    supervisor = starting.result()  # raises ModelUnavailableError with the reason
    print(f"Model ready in {time.perf_counter() - began:.1f} s.", file=out, flush=True)
    return supervisor


class _LineReader:
    """stdin lines delivered to the event loop by a daemon thread (a blocked read never holds up the exit)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._started = False

    async def readline(self) -> str:
        """The next line with its newline, "" at end of input."""
        if not self._started:
            self._started = True
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._pump, args=(loop,), name="chat-stdin", daemon=True).start()
        return await self._queue.get()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                line = self._stream.readline()
            except (OSError, ValueError):
                line = ""
            try:
                loop.call_soon_threadsafe(self._queue.put_nowait, line)
            except RuntimeError:  # the loop is closed: the chat has ended
                return
            if not line:
                return


class ChatSession:
    """The chat loop of one role and scope: turns, commands and their output."""

    def __init__(self, orchestrator: AiOrchestrator, options: ChatOptions, out: TextIO,
                 server: LlamaServerProcess | None = None) -> None:
        """A session over an orchestrator whose stores are the chat's file stores."""
        self.orchestrator = orchestrator
        self.options = options
        self.out = out
        self.server = server
        self.role = options.role
        self.view: ScopedAgentMemoryStore = orchestrator.stores.scoped(options.scope, options.actor)
        self.config: RoleMemoryConfig = orchestrator.policy.get(self.role)
        self._commands: dict[str, Callable[[str], Awaitable[bool]]] = {
            "/memory": self._memory,
            "/versions": self._versions,
            "/revert": self._revert,
            "/history": self._history,
            "/clear": self._clear,
            "/help": self._help,
            "/quit": self._quit,
            "/exit": self._quit,
        }

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write to the chat's output and flush (a driving script sees it at once)."""
        self.out.write(text + end)
        self.out.flush()

    async def run(self, reader: _LineReader, *, interactive: bool = False) -> int:
        """Greet, then handle lines until /quit or end of input; `interactive` shows a `you>` prompt."""
        self._greet()
        while True:
            if interactive:
                self.say("you> ", end="")
            line = await reader.readline()
            if not line:
                self.say("Bye.")
                return EXIT_OK
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await self._command(text):
                    return EXIT_OK
                continue
            await self._turn(text)
            if self.server is not None and not self.server.is_alive():
                print("error: the model server exited unexpectedly", file=sys.stderr)
                return EXIT_FAILED

    def _greet(self) -> None:
        config = self.config
        if not config.use_memory_tool:
            memory = "memory tool off"
        elif self.orchestrator.memory_design is MemoryDesign.WRITER:
            memory = "memory on (writer pass after each reply)"
        else:
            memory = f"memory tool on ({config.default_action.wire_name})"
        if not config.with_chat_history:
            history = "no chat history"
        else:
            history = "chat history saved" if config.persist_chat_history else "chat history kept for this session only"
        self.say(f"Chatting with {self.role} ({memory}, {history}, tool calls: {self.options.tool_mode.value}).")
        self.say("Type /help for commands, /quit to leave.")

    # -- a turn ----------------------------------------------------------------------------

    async def _turn(self, hint: str) -> None:
        request = AiTaskRequest(
            hint=hint, role_id=self.role, source_tag="Chat", scope=self.options.scope, actor=self.options.actor,
            max_output_tokens=self.options.max_tokens,
        )
        printer = _ReplyPrinter(self, f"{self.role}> ")
        turn = asyncio.ensure_future(self._stream(request, printer))
        loop = asyncio.get_running_loop()
        try:
            # Ctrl+C cancels the running turn (it is still recorded), not the chat.
            loop.add_signal_handler(signal.SIGINT, turn.cancel)
            restore = True
        except (NotImplementedError, RuntimeError, ValueError):
            restore = False
        try:
            await turn
        except asyncio.CancelledError:
            if not turn.cancelled():
                raise
            printer.line("[turn cancelled]")
        finally:
            if restore:
                loop.remove_signal_handler(signal.SIGINT)
        printer.finish()
        # The reply is on screen; the memory pass runs now (behind any player turn) and says what it kept.
        for outcome in await self.orchestrator.memory_passes.drain():
            printer.line(stored_line(outcome))

    async def _stream(self, request: AiTaskRequest, printer: _ReplyPrinter) -> None:
        async for event in self.orchestrator.stream_task(request):
            printer.show(event)

    # -- commands --------------------------------------------------------------------------

    async def _command(self, text: str) -> bool:
        """Run one command; False when the chat should end."""
        name, _, rest = text.partition(" ")
        handler = self._commands.get(name.lower())
        if handler is None:
            self.say(f"Unknown command {name}; /help lists the commands.")
            return True
        try:
            return await handler(rest.strip())
        except CoreAIError as exc:
            self.say(f"error: {exc}")
            return True

    async def _memory(self, _: str) -> bool:
        loaded = await asyncio.to_thread(self.view.try_load, self.role)
        if loaded.status is LoadStatus.FAILED:
            self.say(f"The memory document cannot be read: {loaded.reason}")
        elif loaded.state is None or not loaded.state.memory:
            self.say(f"The memory of {self.role} is empty.")
        else:
            state = loaded.state
            self.say(f"Memory of {self.role} (version {state.latest_version}, {len(state.memory)} chars):")
            self.say(state.memory)
        return True

    async def _versions(self, _: str) -> bool:
        versions = await asyncio.to_thread(list_versions, self.view.store, self.view.key(self.role))
        if not versions:
            self.say("No versions yet.")
        for v in versions:
            when = datetime.fromtimestamp(v.timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")
            preview = " ".join(v.content_after.split())
            preview = preview if len(preview) <= 60 else preview[:59] + "…"
            self.say(f"v{v.version}  {when} UTC  {v.action:<11} {v.note}  | {preview}")
        return True

    async def _revert(self, arg: str) -> bool:
        try:
            version = int(arg.lstrip("vV"))
        except ValueError:
            self.say("Usage: /revert N (a version number from /versions)")
            return True
        result = await asyncio.to_thread(revert_memory, self.view.store, self.view.key(self.role), version)
        if result.success:
            self.say(f"Reverted the memory to version {version} (now version {result.version}).")
        else:
            self.say(f"Not reverted: {result.error}")
        return True

    async def _history(self, _: str) -> bool:
        summary = await asyncio.to_thread(self.view.load_summary, self.role)
        messages = await asyncio.to_thread(self.view.get_chat_history, self.role)
        if summary:
            self.say("Conversation summary:")
            self.say(summary)
        if not messages:
            self.say(f"The chat history of {self.role} is empty.")
        for message in messages:
            self.say(f"{message.role}: {message.content}")
        return True

    async def _clear(self, _: str) -> bool:
        count = len(await asyncio.to_thread(self.view.get_chat_history, self.role))
        await asyncio.to_thread(self.view.clear_chat_history, self.role)  # also the rolling summary
        self.say(f"Cleared the chat history ({count} message(s)) and the conversation summary of {self.role}. "
                 "The memory is kept (/memory shows it).")
        return True

    async def _help(self, _: str) -> bool:
        self.say(HELP)
        return True

    async def _quit(self, _: str) -> bool:
        self.say("Bye.")
        return False


class _ReplyPrinter:
    """Streams one turn's events: text as it arrives, tool calls as `[memory append ✓]` on their own line."""

    def __init__(self, session: ChatSession, prefix: str) -> None:
        self._session = session
        self._prefix = prefix
        self._at_line_start = True
        self._calls: dict[str, ToolCallEvent] = {}

    def _write(self, text: str) -> None:
        if not text:
            return
        if self._at_line_start:
            self._session.say(self._prefix, end="")
        self._session.say(text, end="")
        self._at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        """A status line of its own."""
        if not self._at_line_start:
            self._session.say()
        self._session.say(text)
        self._at_line_start = True

    def show(self, event: TurnEvent) -> None:
        """Render one event."""
        if isinstance(event, TextDeltaEvent):
            self._write(event.text.lstrip("\n") if self._at_line_start else event.text)
        elif isinstance(event, ToolCallEvent):
            self._calls[event.call_id] = event
        elif isinstance(event, ToolResultEvent):
            self.line(tool_marker(self._calls.get(event.call_id), event))
        elif isinstance(event, FinalEvent) and not event.result.status.completed:
            self.line(f"[turn {event.result.status.name.lower().replace('_', ' ')}: {event.result.error}]")

    def finish(self) -> None:
        """End the turn's output on a fresh line."""
        if not self._at_line_start:
            self._session.say()
            self._at_line_start = True


def stored_line(outcome: MemoryPassOutcome) -> str:
    """`[stored: …]`, `[replaced: … -> …]` or `[nothing stored (why)]`: the memory pass of a turn in one line."""
    text = outcome.summary()
    if len(text) > STORED_LINE_CHARS:
        text = text[: STORED_LINE_CHARS - 1] + "…"
    return f"[{text}]"


def tool_marker(call: ToolCallEvent | None, result: ToolResultEvent) -> str:
    """`[memory append ✓]`, or `[memory append ✗ <why>]` for a failed call."""
    label = result.name
    if call is not None:
        try:
            arguments = json.loads(call.arguments_json, strict=False)
        except ValueError:
            arguments = None
        if isinstance(arguments, dict) and isinstance(arguments.get("action"), str):
            label += f" {arguments['action'].strip().lower()}"
    if result.success:
        return f"[{label} ✓]"
    why = result.content
    try:
        data = json.loads(result.content)
        if isinstance(data, dict) and data.get("Error"):
            why = str(data["Error"])
    except ValueError:
        pass
    why = " ".join(why.split())
    if len(why) > TOOL_DETAIL_CHARS:
        why = why[: TOOL_DETAIL_CHARS - 1] + "…"
    return f"[{label} ✗ {why}]"


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
