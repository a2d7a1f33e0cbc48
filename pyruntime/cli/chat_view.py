"""The terminal chat's loop and its printing: lines in, turns and commands out (`cli/chat.py` wires the runtime).

The reply streams as it decodes; tool calls show compactly (`[memory append ✓]`) and, with the memory writer pass,
what was stored after each turn in one line (`[stored: Player's name: Alex]`). Lines starting with `/` are commands.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from pyruntime.errors import CoreAIError
from pyruntime.memory.versions import list_versions, revert_memory
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import LoadStatus, ScopedAgentMemoryStore
from pyruntime.turns import (
    AiOrchestrator,
    AiTaskRequest,
    FinalEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pyruntime.turns.writer.decision import MemoryDesign
from pyruntime.turns.writer.passes import MemoryPassOutcome

EXIT_OK = 0
EXIT_FAILED = 1

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


class LineReader:
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


@dataclass(eq=False)
class ChatSession:
    """The chat loop of one role and scope: turns, commands and their output.

    Over an orchestrator whose stores are the chat's file stores; `server`: the hosted model (the chat ends when it
    dies).
    """

    orchestrator: AiOrchestrator
    out: TextIO
    _: KW_ONLY
    role: str
    scope: AgentMemoryScope
    actor: str | None
    max_tokens: int
    server: LlamaServerProcess | None = None
    view: ScopedAgentMemoryStore = field(init=False)
    config: RoleMemoryConfig = field(init=False)
    _commands: dict[str, Callable[[str], Awaitable[bool]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.view = self.orchestrator.stores.scoped(self.scope, self.actor)
        self.config = self.orchestrator.policy.get(self.role)
        self._commands = {
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

    async def run(self, reader: LineReader, *, interactive: bool = False) -> int:
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
        elif self.orchestrator.settings.memory_design is MemoryDesign.WRITER:
            memory = "memory on (writer pass after each reply)"
        else:
            memory = f"memory tool on ({config.default_action.wire_name})"
        if not config.with_chat_history:
            history = "no chat history"
        else:
            history = "chat history saved" if config.persist_chat_history else "chat history kept for this session only"
        mode = self.orchestrator.settings.tool_mode.value
        self.say(f"Chatting with {self.role} ({memory}, {history}, tool calls: {mode}).")
        self.say("Type /help for commands, /quit to leave.")

    # -- a turn ----------------------------------------------------------------------------

    async def _turn(self, hint: str) -> None:
        request = AiTaskRequest(
            hint=hint, role_id=self.role, source_tag="Chat", scope=self.scope, actor=self.actor,
            max_output_tokens=self.max_tokens,
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


def is_tty(stream: TextIO) -> bool:
    """Whether a person types into `stream` (the chat then shows a `you>` prompt)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
