"""Settings of the hosted llama.cpp server, and the entry point that runs it inside a child process.

Run as `python -m pyruntime.model.llama_server CONFIG_JSON`; `hosting.LlamaServerProcess` does that.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyruntime.errors import InvalidArgumentError

if TYPE_CHECKING:  # llama_cpp loads the native library: only the child imports it
    from llama_cpp.server.settings import ModelSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 13333
DEFAULT_N_CTX = 8192  # llama-cpp-python's 2048 is too small for a memory-assembled turn
MIN_N_CTX = 32
API_KEY_ENV = "COREAI_MODEL_API_KEY"  # how the key reaches the child: never on its command line (ps shows it)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """llama.cpp threads that leave the game half the cores: max(1, cores // 2).

    llama.cpp's threads spin at every barrier, so a thread that loses its core to the game stalls
    all the others: a 32-token turn took 35.5 s on 2 threads against 2.2 s on 1 thread with other
    load on a 2-core machine (issue 9).
    """
    return max(1, available_cores() // 2)


def effective_n_ctx(requested: int | None, trained: int | None) -> int:
    """The context size to host with: the request (default 8192), never above the trained context."""
    n_ctx = DEFAULT_N_CTX if requested is None else requested
    if n_ctx < MIN_N_CTX:
        raise InvalidArgumentError(f"n_ctx must be at least {MIN_N_CTX}, got {n_ctx}")
    return min(n_ctx, trained) if trained else n_ctx


@dataclass(frozen=True)
class LlamaServerConfig:
    """Game-ready settings of one hosted model (see contract §8)."""

    model_path: Path
    alias: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    n_ctx: int | None = None  # None: 8192; always clamped to the model's trained context
    n_threads: int = field(default_factory=default_threads)
    # Layers offloaded to the GPU (llama.cpp's n_gpu_layers): 0 = CPU only, -1 = all. Needs a GPU build
    # of llama-cpp-python; the default CPU wheel ignores it.
    n_gpu_layers: int = 0
    interrupt_requests: bool = False  # True would cut a running stream when another request arrives
    chat_format: str | None = None  # None: the model's own chat template
    sse_ping_interval_s: float | None = None  # None: the library default (15 s)
    # The server's default True keeps logits of every prompt position (n_ctx x vocab floats,
    # 1.6 GB for SmolLM2 at 8192) and slows prompt evaluation; only prompt logprobs need it.
    logits_all: bool = False
    # RAM prompt cache (issue 13): model states of recent prompts, so NPCs in rotation find their prefix
    # warm; the limit counts the KV state (prompt_cache.NpcPromptCache drops the uncounted logits). 0: off.
    prompt_cache_mb: int = 0
    # The cache mirrored in this folder (prompt_store.py), so a restarted server finds its NPCs' prompts warm;
    # bounded by prompt_cache_mb too. None: RAM only.
    prompt_cache_dir: Path | None = None
    # Bearer key the port demands (llama-cpp-python's `api_key`); None: no key (tests, benches).
    # Never serialised: it reaches the child through API_KEY_ENV.
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.alias.strip():
            raise InvalidArgumentError("model alias must not be blank")
        if not 0 < self.port < 65536:
            raise InvalidArgumentError(f"port must be within 1..65535, got {self.port}")
        if self.n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, got {self.n_threads}")
        if self.n_gpu_layers < -1:
            raise InvalidArgumentError(f"n_gpu_layers must be -1 (all), 0 (CPU) or more, got {self.n_gpu_layers}")
        if self.prompt_cache_mb < 0:
            raise InvalidArgumentError(f"prompt_cache_mb must be 0 (off) or more, got {self.prompt_cache_mb}")
        if self.prompt_cache_dir is not None and self.prompt_cache_mb == 0:
            raise InvalidArgumentError("a prompt cache folder needs a prompt cache budget (prompt_cache_mb > 0): "
                                       "the budget bounds the folder too")

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL (with `/v1`) of the server this config describes."""
        return f"http://{self.host}:{self.port}/v1"

    def with_n_ctx(self, n_ctx: int) -> LlamaServerConfig:
        """A copy with the context size fixed."""
        return replace(self, n_ctx=n_ctx)

    def to_json(self) -> str:
        """Serialised form passed to the child process."""
        data = asdict(self)
        data["model_path"] = str(self.model_path)
        data["prompt_cache_dir"] = None if self.prompt_cache_dir is None else str(self.prompt_cache_dir)
        del data["api_key"]
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> LlamaServerConfig:
        """Inverse of `to_json`."""
        data: dict[str, Any] = json.loads(text)
        data["model_path"] = Path(data["model_path"])
        if data.get("prompt_cache_dir") is not None:
            data["prompt_cache_dir"] = Path(data["prompt_cache_dir"])
        data["api_key"] = os.environ.get(API_KEY_ENV) or None
        return cls(**data)


def run_server(config: LlamaServerConfig) -> None:
    """Load the model and serve it with uvicorn until SIGTERM/SIGINT (runs in the child process)."""
    os.environ.pop("CONFIG_FILE", None)  # create_app would otherwise replace our settings with that file
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ServerSettings

    from pyruntime.model.port_guard import ModelPortGuard, install_generation_hooks, remove_permissive_cors

    _report_stream_failures_as_events()
    install_generation_hooks()
    if config.sse_ping_interval_s is not None:
        from sse_starlette.sse import EventSourceResponse

        EventSourceResponse.DEFAULT_PING_INTERVAL = config.sse_ping_interval_s

    server_settings = ServerSettings(
        host=config.host,
        port=config.port,
        interrupt_requests=config.interrupt_requests,
        api_key=config.api_key,
    )
    app = create_app(server_settings=server_settings, model_settings=[model_settings(config)])
    remove_permissive_cors(app)
    status_extra = on_shutdown = None
    if config.prompt_cache_mb > 0:
        from pyruntime.model import prompt_cache

        status_extra = prompt_cache.status
        on_shutdown = prompt_cache.flush_active  # a graceful stop keeps the last turns' states on disk
    uvicorn.run(
        ModelPortGuard(DefaultModelMiddleware(app, config.alias), port=config.port, api_key=config.api_key,
                       status_extra=status_extra, on_shutdown=on_shutdown),
        host=config.host,
        port=config.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,  # longer than httpx's 5 s pool expiry: the client drops idle connections first

    )


def model_settings(config: LlamaServerConfig) -> ModelSettings:
    """llama-cpp-python's settings of the model the child loads."""
    from llama_cpp.server.settings import ModelSettings

    return ModelSettings(
        model=str(config.model_path),
        model_alias=config.alias,  # responses then name the alias, not the file path
        n_ctx=config.n_ctx if config.n_ctx is not None else DEFAULT_N_CTX,
        n_threads=config.n_threads,
        n_threads_batch=config.n_threads,
        n_gpu_layers=config.n_gpu_layers,
        chat_format=config.chat_format,
        logits_all=config.logits_all,
        verbose=False,
        **_prompt_cache_settings(config),
    )


def _prompt_cache_settings(config: LlamaServerConfig) -> dict[str, Any]:
    """ModelSettings fields for the RAM prompt cache; the library's cache class is replaced by ours."""
    if config.prompt_cache_mb <= 0:
        return {}
    from pyruntime.model import prompt_cache

    identity = None
    if config.prompt_cache_dir is not None:
        import llama_cpp

        from pyruntime.model.prompt_store import model_identity

        n_ctx = config.n_ctx if config.n_ctx is not None else DEFAULT_N_CTX
        identity = model_identity(config.model_path, n_ctx, llama_cpp.__version__)
    prompt_cache.install(config.prompt_cache_dir, identity)
    return {"cache": True, "cache_type": "ram", "cache_size": config.prompt_cache_mb << 20}


_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def stream_error_event(exc: Exception) -> dict[str, Any]:
    """The OpenAI-style `{"error": ...}` chunk for a failure inside a streamed completion."""
    match = _OVERFLOW.search(str(exc))
    if match:
        message = (
            f"This model's maximum context length is {match.group(2)} tokens. "
            f"However, you requested {match.group(1)} tokens."
        )
        return {"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}
    return {"error": {"message": str(exc), "type": "internal_server_error", "code": None}}


@dataclass(frozen=True)
class PromptCounters:
    """The prompt of one generation: its length and how much of it the KV cache already held."""

    prompt_tokens: int
    cached_tokens: int


def count_prompt(cache: Sequence[int], prompt: Sequence[int]) -> PromptCounters:
    """llama-cpp-python's own reuse rule (`Llama.generate`): the common prefix of the cache and the prompt
    without its last token (that one is always evaluated, for its logits)."""
    cached = 0
    for old, new in zip(cache, prompt[:-1]):
        if old != new:
            break
        cached += 1
    return PromptCounters(len(prompt), cached)


def usage_chunk(last: Mapping[str, Any], prompt: PromptCounters, cache_after: int) -> dict[str, Any]:
    """The final `usage` chunk of a stream (OpenAI `include_usage` shape; llama-cpp-python 0.3.36 sends none).

    `cache_after` is the KV cache's length after the generation: prompt + generated tokens, less the
    last one when the reply hit its length limit (a sampled token is evaluated only to sample the next).
    """
    choices = last.get("choices") or [{}]
    cut = choices[0].get("finish_reason") == "length"
    return _usage_chunk(last, prompt, max(0, cache_after - prompt.prompt_tokens) + (1 if cut else 0))


def prompt_usage_chunk(first: Mapping[str, Any], prompt: PromptCounters) -> dict[str, Any]:
    """A `usage` chunk sent before the first token: the prompt's counts, no completion tokens yet.

    A client that closes the stream early (the runtime's cap on the visible reply) never gets the
    final chunk; this one still tells it what the prompt cost. The final chunk replaces it.
    """
    return _usage_chunk(first, prompt, 0)


def _usage_chunk(model_chunk: Mapping[str, Any], prompt: PromptCounters, completion: int) -> dict[str, Any]:
    return {
        "id": model_chunk.get("id", ""), "object": "chat.completion.chunk", "created": model_chunk.get("created", 0),
        "model": model_chunk.get("model", ""), "choices": [],
        "usage": {"prompt_tokens": prompt.prompt_tokens, "completion_tokens": completion,
                  "total_tokens": prompt.prompt_tokens + completion,
                  "prompt_tokens_details": {"cached_tokens": prompt.cached_tokens}},
    }


def _report_stream_failures_as_events() -> None:
    """Make a failing stream end with an error event instead of silently.

    llama-cpp-python 0.3.36 starts the SSE response before the first token; an error after that
    (context overflow is checked there) just ends the stream with no data and no `[DONE]`.
    """
    import llama_cpp

    create = llama_cpp.Llama.create_chat_completion
    generate = llama_cpp.Llama.generate

    def counted_generate(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        # Called once per completion with the whole prompt, after any prompt-cache state was loaded;
        # the server runs one request at a time per model, so the instance can carry it to the stream's end.
        self._coreai_prompt = count_prompt(self.input_ids[: self.n_tokens].tolist(), list(tokens))
        return generate(self, tokens, *args, **kwargs)

    def guarded(llama: Any, chunks: Iterator[Any]) -> Iterator[Any]:
        llama._coreai_prompt = None
        last: dict[str, Any] = {}
        try:
            for chunk in chunks:
                if not last and llama._coreai_prompt is not None:
                    # The prompt is evaluated before the first chunk exists: its counts are final here.
                    yield prompt_usage_chunk(chunk, llama._coreai_prompt)
                last = chunk
                yield chunk
        except Exception as exc:  # noqa: BLE001 - every failure must reach the client
            yield stream_error_event(exc)
            return
        if llama._coreai_prompt is not None:
            yield usage_chunk(last, llama._coreai_prompt, int(llama.n_tokens))

    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = create(self, *args, **kwargs)
        return guarded(self, result) if kwargs.get("stream") else result

    llama_cpp.Llama.create_chat_completion = create_chat_completion  # type: ignore[method-assign]
    llama_cpp.Llama.generate = counted_generate  # type: ignore[method-assign]


class DefaultModelMiddleware:
    """ASGI middleware: a completion request without `model` gets the alias.

    Without it llama-cpp-python echoes the model's file path as `model` in every response.
    """

    _PATHS = ("/v1/chat/completions", "/v1/completions")

    def __init__(self, app: Any, alias: str) -> None:
        self.app = app
        self.alias = alias

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self._PATHS:
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = self._with_model(b"".join(chunks))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        first = {"type": "http.request", "body": body, "more_body": False}
        await self.app({**scope, "headers": headers}, _replay([first], then=receive), send)

    def _with_model(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body  # let the server report the malformed body
        if isinstance(data, dict) and not data.get("model"):
            data["model"] = self.alias
            return json.dumps(data).encode()
        return body


def _replay(messages: list[dict[str, Any]], then: Any = None) -> Any:
    """An ASGI `receive` that returns `messages` first, then defers to `then`."""
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive


def _exit_when_orphaned(poll_s: float = 0.5) -> None:
    """Stop the child when its parent dies, so no server outlives the runtime."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Child-process entry point: `python -m pyruntime.model.llama_server CONFIG_JSON`."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pyruntime.model.llama_server CONFIG_JSON", file=sys.stderr)
        return 2
    _exit_when_orphaned()
    run_server(LlamaServerConfig.from_json(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
