"""Memory eval: after a conversation, does the NPC know what it should know, and nothing it shouldn't?

Scripted game conversations (`bench/data/memory_conversations.json`, written for this project):
players state facts (names, orders, debts, preferences, quest outcomes), correct some of them, make
small talk and ask questions. Every configuration plays the same conversations against the same
model (the embedded SmolLM2-135M, temperature 0, same seed), then recall questions are asked in a
NEW process (a new runtime, a new chat, or a game restarted from its notes file).

Configurations:
- `a` history only: `serve` + client, the role with memory off and its history persisted.
- `b` naive: no runtime; the "game" writes every player statement into a notes file and pastes the
  notes into the system prompt of every request (the approach this runtime replaces).
- `c` this runtime through `serve` and the Python client (Connect), the role's memory on.
- `d` this runtime through `chat` (the same role config file as `c`, given with `--role-config`).
- `tool` (optional): like `c` with `--memory-design tool`, the memory tool inside the reply (the
  design SmolLM2 had before the writer pass).

Every model request goes through a counting proxy in this process, in front of one hosted llama.cpp
server: model calls and prompt tokens (the model's own tokenizer and chat template) per turn.
`serve`/`chat` reach it as an external URL, so the eval passes what the factory's model profile
chooses for the hosted SmolLM2 explicitly: `--tool-mode structured --memory-design writer --prewarm on`
(a hosted model's next prompt is evaluated in the background after each turn and its memory write).

Metrics (denominators in the table):
- captured: stated facts (not corrected later) whose keys are all in the memory document afterwards;
- captured at return / when written: stated facts whose keys were in the memory when the turn that
  stated them returned, and once that turn's memory write had landed (`WaitMemoryWrites`; the naive
  game writes its notes before it answers);
- junk writes: memory writes that carry no key of any fact of the conversation, per line with
  nothing to keep (small talk and questions);
- corrections: corrections whose new keys are in the memory and whose old keys are not;
- recall: recall questions answered with every expected key, in the new process, with the saved history
  (the runtime's roles persist it; the naive game pastes its saved chat log after the notes) and without it
  (the same saves with the chat history cleared, or the naive game's notes alone);
- example copies: replies or memory writes containing a detail that exists only in a prompt
  example (the writer's few-shot pairs, the tool contract's "Shadowfax"), per turn;
- memory talk: recall replies that speak of the memory block itself instead of the answer ("as a
  memory AI", "The memory changed to ..."): the block's heading or framing taken as the NPC's words;
- model calls and prompt tokens per conversation turn (reply and memory pass together);
- reply latency: median seconds from sending the line to the complete reply, in the same run.

Run: `nice -n 10 .venv/bin/python bench/memory_eval.py [--conversations 40] [--configs a b c d] [--out FILE]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from pyruntime.cli.chat import free_port  # noqa: E402
from pyruntime.history.tokens import LlamaTokenCounter, count_chat_tokens  # noqa: E402
from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config  # noqa: E402
from pyruntime.policy import AgentMemoryPolicy, RoleMemoryConfig, config_to_proto  # noqa: E402
from pyruntime.scopes import AgentMemoryScope  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores  # noqa: E402
from pyruntime.turns.rounds.modes import FORMAT_EXAMPLE_NAME  # noqa: E402
from pyruntime.turns.writer.decision import only_questions  # noqa: E402
from pyruntime.turns.writer.prompt import EXAMPLE_MARKERS  # noqa: E402

DATA = ROOT / "bench" / "data" / "memory_conversations.json"
ROLE = "SmartChat"  # the built-in role with memory and a saved history; each NPC's persona is its system prompt
MAX_TOKENS = 32  # an NPC line (--max-tokens); the same cap for every configuration
SEED = 7
TURN_TIMEOUT_S = 90.0
SETTLE_S = 0.4  # the model is idle this long after a turn: its memory pass has run (or there was none)
COPY_MARKERS = (*EXAMPLE_MARKERS, FORMAT_EXAMPLE_NAME)
CONFIGS = ("a", "b", "c", "d")
LABELS = {
    "a": "(a) history only (serve, no memory)",
    "b": "(b) naive: game pastes notes into the system prompt",
    "c": "(c) runtime via serve + client (writer pass)",
    "d": "(d) runtime via chat (writer pass)",
    "tool": "(tool) serve, memory tool in the reply",
    "c-session": "(c-session) as (c), history not saved between sessions",
}
TARGETS = ("recall with the history saved >= 45 % and >= (b)'s; captured >= 90 %, junk <= 8 %, corrections >= 85 %; "
           "tokens evaluated per reply <= 1.2x (a)")


# -- the conversations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One player line: its kind, text, and for facts/corrections the slot and the keys."""

    kind: str
    text: str
    slot: str = ""
    keys: tuple[str, ...] = ()
    old_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    """A scripted conversation with one NPC and its recall questions."""

    id: str
    npc: str
    persona: str
    lines: tuple[Line, ...]
    recall: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def system_prompt(self) -> str:
        """The NPC's persona as the role's system prompt."""
        return (f"You are {self.persona}, in a fantasy role-playing game. You talk with the player. "
                "Answer in one or two short sentences.")

    def kept_facts(self) -> list[Line]:
        """Facts that no later correction replaces."""
        corrected = {line.slot for line in self.lines if line.kind == "correction"}
        return [line for line in self.lines if line.kind == "fact" and line.slot not in corrected]

    def corrections(self) -> list[Line]:
        """The correction lines."""
        return [line for line in self.lines if line.kind == "correction"]

    def nothing_lines(self) -> list[Line]:
        """Lines with nothing to keep (small talk, questions)."""
        return [line for line in self.lines if line.kind in ("chat", "question")]

    def all_keys(self) -> set[str]:
        """Every key of every fact and correction, old values included."""
        return {k for line in self.lines for k in (*line.keys, *line.old_keys)}


def load_conversations(path: Path = DATA, limit: int | None = None) -> list[Conversation]:
    """The conversations of the data file (the first `limit`)."""
    raw = json.loads(path.read_text(encoding="utf-8"))["conversations"]
    conversations = []
    for item in raw[:limit]:
        lines = []
        for entry in item["lines"]:
            kind, text = entry[0], entry[1]
            if kind == "fact":
                lines.append(Line(kind, text, entry[2], tuple(entry[3])))
            elif kind == "correction":
                lines.append(Line(kind, text, entry[2], tuple(entry[3]), tuple(entry[4])))
            else:
                lines.append(Line(kind, text))
        recall = tuple((q, tuple(keys)) for q, keys in item["recall"])
        conversations.append(Conversation(item["id"], item["npc"], item["persona"], tuple(lines), recall))
    return conversations


def has_key(text: str, key: str) -> bool:
    """The key is in the text as a word start (plurals count), a number as a whole word."""
    pattern = r"\b" + re.escape(key.lower()) + (r"\b" if key.isdigit() else "")
    return re.search(pattern, text.lower()) is not None


def talks_of_memory(text: str) -> bool:
    """The reply speaks of "memory" (the block's framing taken as the NPC's own words)."""
    return re.search(r"\bmemor", text, re.IGNORECASE) is not None


def copies(text: str) -> bool:
    """The text carries a detail that exists only in a prompt example."""
    return any(re.search(r"\b" + re.escape(m.lower()) + r"\b", text.lower()) for m in COPY_MARKERS)


# -- the counting proxy ------------------------------------------------------------------------


def evaluated_tokens(tail: bytes) -> int | None:
    """Prompt tokens evaluated by the call whose response ends with `tail` (None: no usage with cached tokens)."""
    prompt = re.findall(rb'"prompt_tokens":\s*(\d+)', tail)
    cached = re.findall(rb'"cached_tokens":\s*(\d+)', tail)
    if not prompt or not cached:
        return None
    return int(prompt[-1]) - int(cached[-1])


class CountingProxy:
    """An OpenAI-compatible pass-through to the llama.cpp server that counts calls and prompt tokens."""

    def __init__(self, upstream: str, api_key: str | None, counter: LlamaTokenCounter) -> None:
        self.upstream = upstream.rstrip("/")
        self.api_key = api_key
        self.counter = counter
        self.port = free_port()
        self.calls = 0
        self.prompt_tokens = 0
        # Prompt tokens llama.cpp evaluated (not reused from its KV or prompt cache), one entry per finished
        # chat completion, from the usage the hosted server ends each response with.
        self.evaluated: list[int] = []
        self.in_flight = 0
        self.last_done = time.monotonic()
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (with /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def snapshot(self) -> tuple[int, int]:
        """(calls, prompt tokens) so far."""
        with self._lock:
            return self.calls, self.prompt_tokens

    def wait_idle(self, settle: float = SETTLE_S, timeout: float = TURN_TIMEOUT_S) -> None:
        """Wait until no request is running and none started for `settle` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                idle = self.in_flight == 0 and time.monotonic() - self.last_done >= settle
            if idle:
                return
            time.sleep(0.05)

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The ASGI app: forward, count, stream back."""
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        with self._lock:
            self.in_flight += 1
        try:
            if scope["method"] == "POST" and path.endswith("/chat/completions"):
                request = json.loads(body)
                tokens = count_chat_tokens(self.counter, request.get("messages") or [], request.get("tools"))
                with self._lock:
                    self.calls += 1
                    self.prompt_tokens += tokens
            headers = {"content-type": "application/json"}
            if self.api_key:
                headers["authorization"] = f"Bearer {self.api_key}"
            url = self.upstream + path.removeprefix("/v1")
            async with httpx.AsyncClient(timeout=httpx.Timeout(TURN_TIMEOUT_S * 2)) as client:
                async with client.stream(scope["method"], url, content=body or None, headers=headers) as response:
                    await send({"type": "http.response.start", "status": response.status_code,
                                "headers": [(b"content-type", response.headers.get("content-type", "").encode())]})
                    tail = b""
                    async for chunk in response.aiter_raw():
                        tail = (tail + chunk)[-4096:]  # the usage comes last
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            evaluated = evaluated_tokens(tail)
            if evaluated is not None:
                with self._lock:
                    self.evaluated.append(evaluated)
        finally:
            with self._lock:
                self.in_flight -= 1
                self.last_done = time.monotonic()

    def start(self) -> None:
        """Serve in a thread until `stop`."""
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
                                interface="asgi3")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="eval-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


# -- results -----------------------------------------------------------------------------------


@dataclass
class ConfigResult:
    """The numbers of one configuration."""

    name: str
    facts: int = 0
    captured: int | None = None
    nothing_lines: int = 0
    junk_writes: int | None = None
    corrections: int = 0
    corrections_applied: int | None = None
    recall_questions: int = 0
    recalled: int = 0
    recalled_without_history: int | None = None
    captured_at_return: int | None = None
    captured_when_written: int | None = None
    turns: int = 0
    example_copies: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    reply_evaluated: list[int] = field(default_factory=list)  # prompt tokens evaluated for each reply
    failed_turns: int = 0
    seconds: float = 0.0
    conversation_pids: list[int] = field(default_factory=list)
    recall_pids: list[int] = field(default_factory=list)
    memories: dict[str, str] = field(default_factory=dict)
    recall_replies: dict[str, list[str]] = field(default_factory=dict)
    recall_replies_without_history: dict[str, list[str]] = field(default_factory=dict)

    @property
    def memory_talk(self) -> int:
        """Recall replies (history saved) that speak of the memory itself."""
        return sum(talks_of_memory(t) for replies in self.recall_replies.values() for t in replies)

    @property
    def latency_median(self) -> float:
        """Median reply latency, seconds."""
        return statistics.median(self.latencies) if self.latencies else float("nan")


def score_memory(result: ConfigResult, conversation: Conversation, memory: str, writes: Sequence[str]) -> None:
    """Add one conversation's memory document and its writes (the text each write added) to the result."""
    result.memories[conversation.id] = memory
    facts = conversation.kept_facts()
    result.captured = (result.captured or 0) + sum(all(has_key(memory, k) for k in f.keys) for f in facts)
    applied = sum(all(has_key(memory, k) for k in c.keys) and not any(has_key(memory, k) for k in c.old_keys)
                  for c in conversation.corrections())
    result.corrections_applied = (result.corrections_applied or 0) + applied
    keys = conversation.all_keys()
    junk = sum(1 for added in writes if not any(has_key(added, k) for k in keys))
    result.junk_writes = (result.junk_writes or 0) + junk
    result.example_copies += sum(1 for added in writes if copies(added))


def count_lines(result: ConfigResult, conversations: Sequence[Conversation]) -> None:
    """The denominators."""
    result.facts = sum(len(c.kept_facts()) for c in conversations)
    result.nothing_lines = sum(len(c.nothing_lines()) for c in conversations)
    result.corrections = sum(len(c.corrections()) for c in conversations)
    result.recall_questions = sum(len(c.recall) for c in conversations)


def memory_and_writes(data_dir: Path, conversation: Conversation) -> tuple[str, list[str]]:
    """The conversation's memory document on disk and the text each of its versions added or changed."""
    view = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir).scoped(scope_of(conversation))
    loaded = view.try_load(ROLE)
    state = loaded.state
    if state is None:
        return "", []
    writes, before = [], ""
    for version in state.versions:
        added = set(version.content_after.splitlines()) - set(before.splitlines())
        writes.append("\n".join(sorted(added)))
        before = version.content_after
    return state.memory, writes


def memory_now(data_dir: Path, conversation: Conversation) -> str:
    """The conversation's memory document on disk now."""
    loaded = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir).scoped(scope_of(conversation)).try_load(ROLE)
    return loaded.state.memory if loaded.state is not None else ""


def kept_fact_captured(conversation: Conversation, line: Line, memory: str) -> int:
    """1 when `line` is a kept fact whose keys are all in `memory`, else 0."""
    return int(line in conversation.kept_facts() and all(has_key(memory, k) for k in line.keys))


def without_history(data_dir: Path, copy: Path, conversations: Sequence[Conversation]) -> Path:
    """A copy of the saves with every conversation's chat history (and summary) cleared: memory only."""
    shutil.copytree(data_dir, copy)
    view = open_stores(AgentMemoryPersistenceMode.PERSISTENT, copy)
    for conversation in conversations:
        view.scoped(scope_of(conversation)).clear_chat_history(ROLE)
    return copy


def scope_of(conversation: Conversation) -> AgentMemoryScope:
    """Each conversation is its own player: its own memory and history."""
    return AgentMemoryScope(user_id=f"player-{conversation.id}")


def role_config(conversation: Conversation, *, memory: bool, persist_history: bool = True) -> RoleMemoryConfig:
    """The NPC's role: the built-in SmartChat (history saved) with the persona, temperature 0."""
    base = AgentMemoryPolicy().get(ROLE)
    return base.copy(use_memory_tool=memory, system_prompt=conversation.system_prompt, temperature=0.0,
                     max_output_tokens=MAX_TOKENS, persist_chat_history=persist_history)


# -- (a), (c), tool: serve + client -------------------------------------------------------------


@contextmanager
def serve_process(data_dir: Path, proxy: CountingProxy, design: str) -> Iterator[tuple[Any, int]]:
    """A `coreai-runtime serve` against the proxy; yields (client, pid); SIGTERM at the end (passes drain)."""
    from pyruntime.client import RuntimeClient

    command = [sys.executable, "-m", "pyruntime.cli", "serve", "--llm-url", proxy.url, "--data-dir", str(data_dir),
               "--grpc-port", "0", "--connect-port", "0", "--tool-mode", "structured", "--memory-design", design,
               "--prewarm", "on",
               "--parent-pid", str(os.getpid())]  # a stopped eval leaves no runtime behind
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    client = None
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("serve exited before it was ready")
        ready = json.loads(line)
        token = Path(ready["token_file"]).read_text(encoding="utf-8").strip()
        client = RuntimeClient(f"http://127.0.0.1:{ready['connect_port']}", token=token, timeout=TURN_TIMEOUT_S + 30)
        yield client, process.pid
    finally:
        if client is not None:
            client.close()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_serve_config(name: str, conversations: Sequence[Conversation], proxy: CountingProxy,
                     work: Path) -> ConfigResult:
    """(a) history only, (c) the writer pass, (tool) the memory tool in the reply: serve + client."""
    result = ConfigResult(name)
    count_lines(result, conversations)
    memory = name != "a"
    persist = name != "c-session"
    design = "tool" if name == "tool" else "writer"
    data_dir = work / name
    calls0, tokens0 = proxy.snapshot()
    with serve_process(data_dir, proxy, design) as (client, pid):
        result.conversation_pids.append(pid)
        for conversation in conversations:
            client.configure_role(role_config(conversation, memory=memory, persist_history=persist))
            for line in conversation.lines:
                began = time.perf_counter()
                finished_before = len(proxy.evaluated)
                response = client.run_task(line.text, role_id=ROLE, scope=scope_of(conversation),
                                           timeout_ms=int(TURN_TIMEOUT_S * 1000), max_output_tokens=MAX_TOKENS)
                result.latencies.append(time.perf_counter() - began)
                # Calls that finished while the player waited: the reply's own (the memory pass starts after it).
                result.reply_evaluated.append(sum(proxy.evaluated[finished_before:]))
                result.turns += 1
                result.failed_turns += response.status != 1  # TURN_STATUS_OK
                result.example_copies += copies(response.text)
                if memory:
                    at_return = memory_now(data_dir, conversation)
                    if response.memory_write_pending:  # the player reads the reply: the write lands meanwhile
                        client.wait_memory_writes(ROLE, scope=scope_of(conversation), trace_id=response.trace_id,
                                                  timeout_ms=int(TURN_TIMEOUT_S * 1000))
                    written = memory_now(data_dir, conversation)
                    result.captured_at_return = (result.captured_at_return or 0) + kept_fact_captured(
                        conversation, line, at_return)
                    result.captured_when_written = (result.captured_when_written or 0) + kept_fact_captured(
                        conversation, line, written)
                proxy.wait_idle()  # and anything else the runtime does between turns
            print(f"  {name} {conversation.id} done", file=sys.stderr, flush=True)
    calls1, tokens1 = proxy.snapshot()
    result.model_calls, result.prompt_tokens = calls1 - calls0, tokens1 - tokens0
    if memory:
        for conversation in conversations:
            score_memory(result, conversation, *memory_and_writes(data_dir, conversation))
    # The new process: first on a copy without the saved history (memory only), then on the saves themselves.
    bare = without_history(data_dir, work / f"{name}-without-history", conversations)
    result.recalled_without_history, result.recall_replies_without_history = recall_in_new_process(
        bare, conversations, proxy, design, memory, persist)
    result.recalled, result.recall_replies = recall_in_new_process(data_dir, conversations, proxy, design, memory,
                                                                   persist, result)
    return result


def recall_in_new_process(data_dir: Path, conversations: Sequence[Conversation], proxy: CountingProxy, design: str,
                          memory: bool, persist: bool, result: ConfigResult | None = None,
                          ) -> tuple[int, dict[str, list[str]]]:
    """(recalled, replies per conversation): the recall questions asked in a new `serve` on `data_dir`."""
    recalled, replies_of = 0, {}
    with serve_process(data_dir, proxy, design) as (client, pid):
        if result is not None:
            result.recall_pids.append(pid)
        for conversation in conversations:
            client.configure_role(role_config(conversation, memory=memory, persist_history=persist))
            replies = []
            for question, keys in conversation.recall:
                response = client.run_task(question, role_id=ROLE, scope=scope_of(conversation),
                                           timeout_ms=int(TURN_TIMEOUT_S * 1000), max_output_tokens=MAX_TOKENS)
                replies.append(response.text)
                recalled += all(has_key(response.text, k) for k in keys)
                proxy.wait_idle()
            replies_of[conversation.id] = replies
    return recalled, replies_of


# -- (b) naive ---------------------------------------------------------------------------------


def naive_messages(conversation: Conversation, notes: Sequence[str], history: Sequence[dict[str, str]],
                   text: str) -> list[dict[str, str]]:
    """The naive game's request: persona + every note in the system prompt, this session's history, the line."""
    system = conversation.system_prompt
    if notes:
        system += "\n\nWhat the player told you before:\n" + "\n".join(f"- {n}" for n in notes)
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": text}]


async def run_naive(conversations: Sequence[Conversation], proxy: CountingProxy, work: Path) -> ConfigResult:
    """(b): the game keeps a notes file of every player statement and pastes it into the system prompt."""
    result = ConfigResult("b")
    count_lines(result, conversations)
    notes_dir = work / "b"
    notes_dir.mkdir(parents=True, exist_ok=True)
    calls0, tokens0 = proxy.snapshot()
    async with OpenAICompatClient(proxy.url, timeout=TURN_TIMEOUT_S) as client:
        for conversation in conversations:
            notes: list[str] = []
            history: list[dict[str, str]] = []
            writes: list[str] = []
            for line in conversation.lines:
                began = time.perf_counter()
                completion = await client.chat(naive_messages(conversation, notes, history, line.text),
                                               temperature=0.0, max_tokens=MAX_TOKENS, extra={"seed": SEED})
                result.latencies.append(time.perf_counter() - began)
                result.turns += 1
                result.example_copies += copies(completion.text)
                history += [{"role": "user", "content": line.text}, {"role": "assistant", "content": completion.text}]
                if not only_questions(line.text):  # the naive game writes down every statement
                    notes.append(line.text)
                    writes.append(line.text)
                # Its notes are written before it answers: captured at return is captured when written.
                captured = kept_fact_captured(conversation, line, "\n".join(notes))
                result.captured_at_return = (result.captured_at_return or 0) + captured
                result.captured_when_written = (result.captured_when_written or 0) + captured
            (notes_dir / f"{conversation.id}.json").write_text(json.dumps(notes), encoding="utf-8")
            (notes_dir / f"{conversation.id}.history.json").write_text(json.dumps(history), encoding="utf-8")
            score_memory(result, conversation, "\n".join(notes), writes)
        calls1, tokens1 = proxy.snapshot()
        result.model_calls, result.prompt_tokens = calls1 - calls0, tokens1 - tokens0
        # The game restarts: its notes file survives, alone, or with its saved chat log pasted after the notes.
        result.recalled_without_history = 0
        for conversation in conversations:
            notes = json.loads((notes_dir / f"{conversation.id}.json").read_text(encoding="utf-8"))
            saved = json.loads((notes_dir / f"{conversation.id}.history.json").read_text(encoding="utf-8"))
            for history, replies_of in ((saved, result.recall_replies), ([], result.recall_replies_without_history)):
                replies: list[str] = []
                session: list[dict[str, str]] = []
                for question, keys in conversation.recall:
                    completion = await client.chat(naive_messages(conversation, notes, [*history, *session], question),
                                                   temperature=0.0, max_tokens=MAX_TOKENS, extra={"seed": SEED})
                    replies.append(completion.text)
                    session += [{"role": "user", "content": question},
                                {"role": "assistant", "content": completion.text}]
                    recalled = all(has_key(completion.text, k) for k in keys)
                    if history:
                        result.recalled += recalled
                    else:
                        result.recalled_without_history += recalled
                replies_of[conversation.id] = replies
    result.conversation_pids.append(os.getpid())
    return result


# -- (d) chat ----------------------------------------------------------------------------------

_END_MARKERS = ("[stored: ", "[replaced: ", "[nothing stored", "[turn ")


class ChatProcess:
    """A `coreai-runtime chat` driven line by line through stdin."""

    def __init__(self, conversation: Conversation, proxy: CountingProxy, data_dir: Path, config_file: Path) -> None:
        command = [sys.executable, "-m", "pyruntime.cli", "chat", "--llm-url", proxy.url, "--data-dir", str(data_dir),
                   "--role", ROLE, "--role-config", str(config_file), "--user", scope_of(conversation).user_id or "",
                   "--tool-mode", "structured", "--memory-design", "writer", "--prewarm", "on",
                   "--max-tokens", str(MAX_TOKENS),
                   "--timeout", str(TURN_TIMEOUT_S)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.pid = self.process.pid
        self._read_until(lambda line: line.startswith("Type /help"))

    def _read_until(self, done: Any) -> list[tuple[float, str]]:
        assert self.process.stdout is not None
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("chat ended unexpectedly")
            lines.append((time.perf_counter(), line.rstrip("\n")))
            if done(line):
                return lines

    def say(self, text: str) -> tuple[str, float, str]:
        """Send a line; (the reply, seconds to the complete reply, the memory line)."""
        assert self.process.stdin is not None
        began = time.perf_counter()
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        lines = self._read_until(lambda line: line.startswith(_END_MARKERS))
        reply_lines = [(t, s) for t, s in lines[:-1] if s]
        reply = "\n".join(s.removeprefix(f"{ROLE}> ") for _, s in reply_lines)
        finished = reply_lines[-1][0] if reply_lines else lines[-1][0]
        return reply, finished - began, lines[-1][1]

    def close(self) -> None:
        """Quit and wait for the process."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write("/quit\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def run_chat_config(conversations: Sequence[Conversation], proxy: CountingProxy, work: Path) -> ConfigResult:
    """(d): one chat process per conversation, then a new chat process for its recall questions."""
    result = ConfigResult("d")
    count_lines(result, conversations)
    data_dir = work / "d"
    data_dir.mkdir(parents=True, exist_ok=True)
    calls = tokens = 0
    for conversation in conversations:
        config_file = work / f"d-{conversation.id}.json"
        config_file.write_text(json_of(role_config(conversation, memory=True)), encoding="utf-8")
        chat = ChatProcess(conversation, proxy, data_dir, config_file)
        result.conversation_pids.append(chat.pid)
        calls0, tokens0 = proxy.snapshot()
        try:
            for line in conversation.lines:
                reply, seconds, stored = chat.say(line.text)
                result.latencies.append(seconds)
                result.turns += 1
                result.failed_turns += stored.startswith("[turn ")
                result.example_copies += copies(reply)
        finally:
            calls1, tokens1 = proxy.snapshot()
            chat.close()
        calls, tokens = calls + calls1 - calls0, tokens + tokens1 - tokens0
        score_memory(result, conversation, *memory_and_writes(data_dir, conversation))
        recall = ChatProcess(conversation, proxy, data_dir, config_file)  # the new process
        result.recall_pids.append(recall.pid)
        replies = []
        try:
            for question, keys in conversation.recall:
                reply, _, _ = recall.say(question)
                replies.append(reply)
                result.recalled += all(has_key(reply, k) for k in keys)
        finally:
            recall.close()
        result.recall_replies[conversation.id] = replies
        print(f"  d {conversation.id} done", file=sys.stderr, flush=True)
    result.model_calls, result.prompt_tokens = calls, tokens
    return result


def json_of(config: RoleMemoryConfig) -> str:
    """A role config as the proto3 JSON that ConfigureRole and `chat --role-config` take."""
    from google.protobuf import json_format

    return json_format.MessageToJson(config_to_proto(config))


# -- report ------------------------------------------------------------------------------------


def fraction(part: int | None, whole: int) -> str:
    """`part/whole (pct)` or `—` when the configuration has no memory document."""
    if part is None:
        return "—"
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else f"{part}/0"


def table(results: Sequence[ConfigResult]) -> str:
    """The results table (docs/benchmarks.md#the-memory-eval)."""
    baseline = next((r for r in results if r.name == "a"), None)
    rows = ["| configuration | facts captured | captured at turn return | captured when written | junk writes "
            "| corrections applied | recall, history saved | recall, history not saved | memory talk in recall "
            "| example copies | model calls / turn | prompt tokens / turn | tokens evaluated per reply, median (vs a) "
            "| reply latency median s (vs a) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = (f" ({r.latency_median / baseline.latency_median:.2f}×)" if baseline is not None
                 and baseline.latency_median > 0 else "")
        evaluated = "—"
        if r.reply_evaluated:
            evaluated = f"{statistics.median(r.reply_evaluated):.0f}"
            base = 0.0
            if baseline is not None and baseline.reply_evaluated:
                base = statistics.median(baseline.reply_evaluated)
            if base > 0:
                evaluated += f" ({statistics.median(r.reply_evaluated) / base:.2f}×)"
        rows.append(
            f"| {LABELS[r.name]} | {fraction(r.captured, r.facts)} | {fraction(r.captured_at_return, r.facts)} "
            f"| {fraction(r.captured_when_written, r.facts)} | {fraction(r.junk_writes, r.nothing_lines)} "
            f"| {fraction(r.corrections_applied, r.corrections)} | {fraction(r.recalled, r.recall_questions)} "
            f"| {fraction(r.recalled_without_history, r.recall_questions)} | {r.memory_talk}/{r.recall_questions} "
            f"| {r.example_copies}/{r.turns} | {r.model_calls / max(r.turns, 1):.2f} "
            f"| {r.prompt_tokens / max(r.turns, 1):.0f} | {evaluated} | {r.latency_median:.2f}{ratio} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the eval; prints the table (stdout) and writes every number to --out."""
    global MAX_TOKENS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="the first N conversations (default all)")
    parser.add_argument("--configs", nargs="+", default=["a", "c", "b", "d"], choices=[*CONFIGS, "tool", "c-session"])
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help=f"reply cap (default {MAX_TOKENS})")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of the model server")
    parser.add_argument("--prompt-cache-mb", type=int, default=None,
                        help="RAM prompt cache of the hosted model (serve --prompt-cache-mb; default: serve's)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep the saves here (default: a temp dir)")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="print one table from the --out files of runs made side by side (one configuration each)")
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge)
    MAX_TOKENS = args.max_tokens
    conversations = load_conversations(args.data, args.conversations)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="memory-eval-"))
    # Default every core: the eval is the only model user (the game default, half the cores, doubles its time);
    # runs side by side take one thread each (llama.cpp's threads spin: more threads than cores is slower).
    server = LlamaServerProcess(hosted_model_config(None, port=free_port(), n_threads=args.threads,
                                                    prompt_cache_mb=args.prompt_cache_mb))
    server.start()
    proxy = CountingProxy(server.base_url, server.api_key, LlamaTokenCounter(server.config.model_path))
    proxy.start()
    results: list[ConfigResult] = []
    began = time.perf_counter()
    try:
        for name in args.configs:
            print(f"running {LABELS[name]} on {len(conversations)} conversations", file=sys.stderr, flush=True)
            started = time.perf_counter()
            if name == "b":
                results.append(asyncio.run(run_naive(conversations, proxy, work)))
            elif name == "d":
                results.append(run_chat_config(conversations, proxy, work))
            else:
                results.append(run_serve_config(name, conversations, proxy, work))
            results[-1].seconds = time.perf_counter() - started
            if args.out is not None:  # after each configuration: a long run that is stopped keeps what it measured
                write_report(args.out, conversations, " ".join(sys.argv[1:]), results)
    finally:
        proxy.stop()
        server.stop()
    text = table(results)
    command = "nice -n 10 .venv/bin/python bench/memory_eval.py" + (
        f" --conversations {args.conversations}" if args.conversations else "") + " --configs " + " ".join(
        args.configs) + (f" --max-tokens {MAX_TOKENS}" if MAX_TOKENS != parser.get_default("max_tokens") else "") + (
        f" --threads {args.threads}" if args.threads != parser.get_default("threads") else "") + (
        f" --prompt-cache-mb {args.prompt_cache_mb}" if args.prompt_cache_mb is not None else "")
    failed = ", ".join(f"{r.name}: {r.failed_turns}" for r in results)
    took = ", ".join(f"{r.name}: {r.seconds:.0f} s" for r in results)
    print(text)
    print(f"\n{len(conversations)} conversations, SmolLM2-135M, temperature 0, seed {SEED}, {MAX_TOKENS} reply tokens; "
          f"{time.perf_counter() - began:.0f} s ({took}); failed or timed-out turns ({failed}).\n"
          f"Targets: {TARGETS}.\nCommand: {command}")
    if args.out is not None:
        write_report(args.out, conversations, command, results)
    return 0


def merge(paths: Sequence[Path]) -> int:
    """One table from several --out files (configurations run side by side, on the same conversations)."""
    names = {f.name for f in fields(ConfigResult)}
    results, commands = [], []
    for path in paths:
        report = json.loads(path.read_text(encoding="utf-8"))
        commands.append(report["command"])
        results += [ConfigResult(**{k: v for k, v in r.items() if k in names}) for r in report["results"]]
    order = ["a", "b", "c", "d", "c-session", "tool"]
    results.sort(key=lambda r: order.index(r.name))
    print(table(results))
    took = ", ".join(f"{r.name}: {r.seconds:.0f} s" for r in results)
    print(f"\nRun side by side ({took}); failed or timed-out turns: "
          f"{', '.join(f'{r.name}: {r.failed_turns}' for r in results)}.\nCommands:\n" + "\n".join(commands))
    return 0


def write_report(path: Path, conversations: Sequence[Conversation], command: str,
                 results: Sequence[ConfigResult]) -> None:
    """Every number of the run as JSON, with the table."""
    path.write_text(json.dumps({"conversations": len(conversations), "command": command, "table": table(results),
                                "results": [asdict(r) | {"latency_median": r.latency_median} for r in results]},
                               indent=1), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
