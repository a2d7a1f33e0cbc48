"""`LatencyEngine`: an OpenAI-compatible test engine that answers every request at once, with a fixed latency model.

What a GPU server that batches looks like from the runtime's side: every request is served concurrently, its first
token `first_token_s` after it arrived, then `tokens` tokens `token_gap_s` apart (the defaults: 28 ms, 24 tokens
4 ms apart). It records what it was sent, so a benchmark or a test can check what reached the engine: the
conversation identity (the OpenAI `user` field and the `X-CoreAI-Conversation` header), the markers a caller
put in its lines (`marker`: a regex; each request keeps the ones of its last user message and of all its
messages), when the request arrived and when its first token left (wall clock, to subtract the engine's own
time from a player's first token). `GET /props` answers `total_slots` as llama-server does when `slots` is set.

Served on loopback by `LatencyEngineServer` (its own thread and event loop, the model port's guard), or as a
process: `python -m pyruntime.testing.engine --port 0` prints one JSON line `{"base_url": ...}` and serves
until stopped; `GET /coreai/recorded` gives the records as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pyruntime.model.public_port import GuardedPort, ModelPortAuth, read_body, send_json
from pyruntime.net.limits import TransportLimits

MODEL_ID = "latency-engine"
CONVERSATION_HEADER = "x-coreai-conversation"  # lower case: ASGI header names
RECORDED_PATH = "/coreai/recorded"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class LatencyModel:
    """When the tokens of one answer leave: the first after `first_token_s`, the rest `token_gap_s` apart."""

    first_token_s: float = 0.028
    tokens: int = 24
    token_gap_s: float = 0.004


@dataclass
class RecordedRequest:
    """One chat request as the engine saw it (no message text kept, only the markers found in it)."""

    user: str | None
    conversation: str | None  # the X-CoreAI-Conversation header
    stream: bool
    last_user_markers: list[str]
    markers: list[str]  # distinct, in every message
    arrived: float  # time.time()
    peer_port: int | None = None  # the client's port: the same one for calls on a kept-alive connection
    first_token: float | None = None
    finished: float | None = None


@dataclass
class EngineStats:
    """Requests running now and the most that ran at once."""

    running: int = 0
    peak: int = 0
    total: int = 0


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class LatencyEngine:
    """The ASGI application; `requests` holds a `RecordedRequest` per chat request, in arrival order."""

    def __init__(self, latency: LatencyModel = LatencyModel(), *, slots: int | None = None,
                 marker: str | None = None, word: str = "ok") -> None:
        """`slots`: what `/props` answers as `total_slots` (None: no `/props`, as servers other than llama-server);
        `marker`: a regex whose matches in the messages are recorded; `word`: each token's text."""
        self.latency = latency
        self.slots = slots
        self.marker = re.compile(marker) if marker else None
        self.word = word
        self.requests: list[RecordedRequest] = []
        self.stats = EngineStats()
        self._lock = threading.Lock()

    def recorded(self) -> list[dict[str, Any]]:
        """The records as JSON-ready dicts."""
        with self._lock:
            return [asdict(r) for r in self.requests]

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == RECORDED_PATH and method == "GET":
            await send_json(send, 200, {"requests": self.recorded(), "peak": self.stats.peak})
            return
        if path == "/props" and method == "GET" and self.slots is not None:
            await send_json(send, 200, {"total_slots": self.slots, "model_alias": MODEL_ID})
            return
        path = path[3:] if path.startswith("/v1/") else path
        if path == "/models" and method == "GET":
            await send_json(send, 200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
            return
        if path != "/chat/completions" or method != "POST":
            await send_json(send, 404, {"error": {"message": "not found", "code": 404}})
            return
        arrived = time.time()
        raw = await read_body(receive)
        try:
            body = json.loads(raw) if raw is not None else None
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            await send_json(send, 400, {"error": {"message": "bad request", "code": 400}})
            return
        record = self._record(scope, body, arrived)
        self.stats.running += 1
        self.stats.total += 1
        self.stats.peak = max(self.stats.peak, self.stats.running)
        try:
            if body.get("stream"):
                await self._stream(send, record)
            else:
                await self._whole(send, record)
        finally:
            self.stats.running -= 1
            record.finished = time.time()

    def _record(self, scope: dict[str, Any], body: dict[str, Any], arrived: float) -> RecordedRequest:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        messages = body["messages"]
        last_user = next((_text(m) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
                         "")
        found: list[str] = []
        last: list[str] = []
        if self.marker is not None:
            found = sorted({m for message in messages for m in self.marker.findall(_text(message))})
            last = sorted(set(self.marker.findall(last_user)))
        user = body.get("user")
        client = scope.get("client")
        record = RecordedRequest(user if isinstance(user, str) else None, headers.get(CONVERSATION_HEADER),
                                 bool(body.get("stream")), last, found, arrived,
                                 client[1] if isinstance(client, (list, tuple)) and len(client) > 1 else None)
        with self._lock:
            self.requests.append(record)
        return record

    def _usage(self) -> dict[str, int]:
        return {"prompt_tokens": 0, "completion_tokens": self.latency.tokens, "total_tokens": self.latency.tokens}

    async def _whole(self, send: Send, record: RecordedRequest) -> None:
        latency = self.latency
        await asyncio.sleep(latency.first_token_s + latency.token_gap_s * max(0, latency.tokens - 1))
        record.first_token = time.time()
        text = " ".join([self.word] * latency.tokens)
        await send_json(send, 200, {"id": "latency", "object": "chat.completion", "model": MODEL_ID,
                                    "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": text}}],
                                    "usage": self._usage()})

    async def _stream(self, send: Send, record: RecordedRequest) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        latency = self.latency
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        head = '{"id":"latency","object":"chat.completion.chunk","model":"' + MODEL_ID + '","choices":[{"index":0,'
        for index in range(latency.tokens):
            # Absolute times: a late wake-up does not push every later token back.
            await asyncio.sleep(max(0.0, start + latency.first_token_s + index * latency.token_gap_s - loop.time()))
            piece = json.dumps(self.word if index == 0 else " " + self.word)
            chunk = head + '"delta":{"content":' + piece + '},"finish_reason":null}]}'
            await send({"type": "http.response.body", "body": b"data: " + chunk.encode() + b"\n\n", "more_body": True})
            if index == 0:
                record.first_token = time.time()
        end = head + '"delta":{},"finish_reason":"stop"}],"usage":' + json.dumps(self._usage()) + "}"
        await send({"type": "http.response.body", "body": b"data: " + end.encode() + b"\n\ndata: [DONE]\n\n",
                    "more_body": False})


@dataclass
class LatencyEngineServer:
    """A `LatencyEngine` served on loopback (port 0: a free one), on its own thread and loop."""

    engine: LatencyEngine = field(default_factory=LatencyEngine)
    host: str = "127.0.0.1"
    port: int = 0
    api_key: str | None = None
    _port: GuardedPort | None = None

    def start(self) -> LatencyEngineServer:
        """Bind and serve."""
        # Generous limits: hundreds of players' requests at once, each on its own connection.
        limits = TransportLimits(request_timeout_s=60.0, idle_timeout_s=60.0)
        guarded = ModelPortAuth(self.engine, port=lambda: self.bound_port, api_key=self.api_key)
        self._port = GuardedPort(guarded, self.host, self.port, limits=limits, name="latency engine")
        self._port.start()
        return self

    @property
    def bound_port(self) -> int:
        """The port it listens on."""
        return self._port.port if self._port is not None else self.port

    @property
    def base_url(self) -> str:
        """`http://host:port/v1`."""
        return f"http://{self.host}:{self.bound_port}/v1"

    def stop(self) -> None:
        """Stop serving."""
        if self._port is not None:
            self._port.stop()
            self._port = None

    def __enter__(self) -> LatencyEngineServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve a latency engine until SIGINT/SIGTERM; print `{"base_url": ...}` once it listens."""
    parser = argparse.ArgumentParser(description="An OpenAI-compatible test engine with a fixed latency model")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--first-token-ms", type=float, default=28.0)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--gap-ms", type=float, default=4.0)
    parser.add_argument("--slots", type=int, default=None, help="answer /props with this total_slots")
    parser.add_argument("--marker", default=None, help="regex whose matches in the messages are recorded")
    parser.add_argument("--http", choices=["guarded", "minimal"], default="guarded",
                        help="guarded: the model port's server (uvicorn under its guard); minimal: "
                             "testing/minimal_http on uvloop where installed, a fraction of the CPU per reply "
                             "(load benchmarks)")
    args = parser.parse_args(argv)
    latency = LatencyModel(args.first_token_ms / 1000, args.tokens, args.gap_ms / 1000)
    engine = LatencyEngine(latency, slots=args.slots, marker=args.marker)
    if args.http == "minimal":
        return _serve_minimal(engine, args.port)
    server = LatencyEngineServer(engine, port=args.port).start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(json.dumps({"base_url": server.base_url}), flush=True)
    stop.wait()
    server.stop()
    return 0


def _serve_minimal(engine: LatencyEngine, port: int) -> int:
    """Serve `engine` with `minimal_http` until SIGINT/SIGTERM."""
    from pyruntime.cli import event_loop
    from pyruntime.testing.minimal_http import serve_minimal

    async def serve() -> None:
        server = await serve_minimal(engine, "127.0.0.1", port)
        bound = server.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(json.dumps({"base_url": f"http://127.0.0.1:{bound}/v1"}), flush=True)
        await stop.wait()
        server.close()

    event_loop.run(serve(), event_loop.resolve("auto"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
