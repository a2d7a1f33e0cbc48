"""Inside the model child process: guard the model port and stop generations nobody waits for.

Runs in the llama.cpp child (see `llama_server.run_server`), never in the runtime process.

- `ModelPortGuard` (ASGI): refuses a foreign `Host`/`Origin` (403) and a request without the API
  key (401) before llama-cpp-python sees it, answers `GET /coreai/status` without touching the
  model lock (the watchdog's probe), and notices a client that disconnects.
- `install_generation_hooks` wraps `Llama.generate`: between two sampled tokens it checks whether
  the request's client is gone and ends the generation then. llama-cpp-python's server itself only
  notices a disconnect after it emits text, and it emits nothing while it holds back incomplete
  UTF-8 (toolchain notes: a cancelled generation blocked the single-slot server for >10 minutes).
  It also enforces the request's `max_tokens`: llama-cpp-python checks it only after it emitted text,
  so while it holds back incomplete UTF-8 a request with `max_tokens: 1` decoded 3432 tokens
  (measured with 0.3.36) - an output cap that does not hold exactly when it matters.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

STATUS_PATH = "/coreai/status"
_COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")


class GenerationControl:
    """One completion request: has its client gone, and how far has its generation come."""

    def __init__(self) -> None:
        """A control for a request that has not started generating."""
        self.cancelled_at: float | None = None
        self.started_at: float | None = None
        self.last_progress: float | None = None
        self.ended_at: float | None = None
        self.tokens = 0
        self.max_tokens: int | None = None  # the request's, once known
        self.stopped_early = False  # the client left
        self.capped = False  # stopped at max_tokens by us (llama-cpp-python missed it)

    def cancel(self) -> None:
        """The client disconnected: the generation stops at its next token."""
        if self.cancelled_at is None:
            self.cancelled_at = time.monotonic()


@dataclass
class _Last:
    tokens: int = 0
    stopped_early: bool = False
    capped: bool = False


class GenerationTracker:
    """The generation running now (llama.cpp decodes one request at a time) and counters for the probe."""

    def __init__(self) -> None:
        """No generation yet."""
        self._lock = threading.Lock()
        self.active: GenerationControl | None = None
        self.finished = 0
        self.stopped_on_cancel = 0
        self.last = _Last()

    def begin(self, control: GenerationControl) -> None:
        """A generation starts (prompt evaluation first)."""
        now = time.monotonic()
        with self._lock:
            control.started_at = control.last_progress = now
            self.active = control

    def end(self, control: GenerationControl) -> None:
        """A generation ended (completed, stopped or failed)."""
        with self._lock:
            if control.ended_at is not None:
                return
            control.ended_at = time.monotonic()
            self.finished += 1
            self.stopped_on_cancel += int(control.stopped_early)
            self.last = _Last(control.tokens, control.stopped_early, control.capped)
            if self.active is control:
                self.active = None

    def status(self) -> dict[str, Any]:
        """What the watchdog reads: is a generation running, since when, cancelled since when."""
        now = time.monotonic()
        with self._lock:
            active = self.active
            body: dict[str, Any] = {
                "generating": active is not None,
                "finished": self.finished,
                "stopped_on_cancel": self.stopped_on_cancel,
                "last_tokens": self.last.tokens,
                "last_stopped_early": self.last.stopped_early,
                "last_capped": self.last.capped,
            }
            if active is not None:
                body["tokens"] = active.tokens
                body["generation_s"] = now - (active.started_at or now)
                body["since_progress_s"] = now - (active.last_progress or now)
                body["cancelled_s"] = None if active.cancelled_at is None else now - active.cancelled_at
        return body


TRACKER = GenerationTracker()
_current: contextvars.ContextVar[GenerationControl | None] = contextvars.ContextVar("coreai_generation", default=None)


def install_generation_hooks(tracker: GenerationTracker = TRACKER) -> None:
    """Wrap `llama_cpp.Llama.generate` so a request whose client is gone stops at the next token."""
    import llama_cpp

    generate = llama_cpp.Llama.generate
    create_completion = llama_cpp.Llama.create_completion
    if getattr(generate, "_coreai_hooked", False):
        return

    def completion_hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        control = _current.get()
        limit = kwargs.get("max_tokens")
        if control is not None and isinstance(limit, int) and limit > 0:
            control.max_tokens = limit
        return create_completion(self, *args, **kwargs)

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        # Runs in the worker thread; anyio copies the request's context there, so this is its control.
        control = _current.get() or GenerationControl()
        tracker.begin(control)
        tokens = generate(self, *args, **kwargs)
        try:
            for token in tokens:
                control.last_progress = time.monotonic()
                if control.cancelled_at is not None:
                    control.stopped_early = True
                    return  # the completion then ends as if at max_tokens; nobody reads it
                if control.max_tokens is not None and control.tokens >= control.max_tokens:
                    control.capped = True
                    return  # ends with finish_reason "length", where llama-cpp-python would have ended it
                control.tokens += 1
                yield token
        finally:
            tokens.close()
            tracker.end(control)

    hooked._coreai_hooked = True  # type: ignore[attr-defined]
    llama_cpp.Llama.generate = hooked  # type: ignore[method-assign]
    llama_cpp.Llama.create_completion = completion_hooked  # type: ignore[method-assign]


def remove_permissive_cors(app: Any) -> None:
    """Drop the `allow_origins=["*"]` CORS middleware llama-cpp-python's `create_app` adds."""
    from starlette.middleware.cors import CORSMiddleware

    app.user_middleware = [m for m in app.user_middleware if m.cls is not CORSMiddleware]
    app.middleware_stack = None  # rebuilt on the first request


class ModelPortGuard:
    """ASGI middleware in front of llama-cpp-python: loopback Host/Origin, the API key, the status probe."""

    def __init__(self, app: Any, *, port: int, api_key: str | None, tracker: GenerationTracker = TRACKER,
                 status_extra: Callable[[], dict[str, Any]] | None = None,
                 on_shutdown: Callable[[], None] | None = None) -> None:
        """Guard `app` served on `port`; `api_key` None accepts requests without a key (tests only);
        `status_extra` adds fields to the status probe's answer (read without locks, e.g. the prompt cache's size);
        `on_shutdown` runs (in a thread) when the server shuts down gracefully, before the app hears of it."""
        auth = _rpc_auth()
        self._bearer_matches = auth.bearer_matches
        self._host_allowed = auth.host_header_allowed
        self._origin_allowed = auth.origin_allowed
        self.app = app
        self.port = port
        self.api_key = api_key
        self.tracker = tracker
        self.status_extra = status_extra
        self.on_shutdown = on_shutdown

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._lifespan(receive), send)
            return
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = _headers(scope)
        if not self._host_allowed(headers.get("host"), self.port) or not self._origin_allowed(headers.get("origin")):
            await _json(send, 403, {"error": {"message": "foreign Host or Origin refused", "type": "forbidden",
                                              "code": "forbidden"}})
            return
        if self.api_key is not None and not self._bearer_matches(headers.get("authorization"), self.api_key):
            await _json(send, 401, {"error": {"message": "missing or wrong API key", "type": "unauthorized",
                                              "code": "invalid_api_key"}})
            return
        if scope["path"] == STATUS_PATH and scope["method"] == "GET":
            body = self.tracker.status()
            if self.status_extra is not None:
                body.update(self.status_extra())
            await _json(send, 200, body)
            return
        if scope["method"] == "POST" and scope["path"] in _COMPLETION_PATHS:
            await self._watched(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _lifespan(self, receive: Any) -> Any:
        """`receive` of the lifespan scope, running `on_shutdown` when the shutdown message arrives."""
        hook = self.on_shutdown

        async def watched() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown" and hook is not None:
                await asyncio.to_thread(hook)
            return message

        return watched if hook is not None else receive

    async def _watched(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Run a completion with a control that is cancelled as soon as the client disconnects.

        The real `receive` is read by a pump task for the whole request (a non-streamed completion
        never reads it again after the body, so a disconnect would go unseen), and replayed to the app.
        """
        control = GenerationControl()
        token = _current.set(control)
        messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def pump() -> None:
            while True:
                message = await receive()
                await messages.put(message)
                if message["type"] == "http.disconnect":
                    control.cancel()
                    return

        pumping = asyncio.create_task(pump())
        try:
            await self.app(scope, messages.get, send)
        finally:
            _current.reset(token)
            pumping.cancel()


def _rpc_auth() -> Any:
    """The RPC ports' own Host/Origin/bearer checks (`pyruntime/rpc/auth.py`), one implementation for all ports.

    Loaded from its file: importing `pyruntime.rpc` would start the whole transport and service
    stack (grpc, the services, the turn engine) inside the model child.
    """
    import importlib.util
    import sys
    from pathlib import Path

    name = "_coreai_rpc_auth"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "rpc" / "auth.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request headers (latin-1, lower-case names); a repeated header keeps its first value."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


async def _json(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
