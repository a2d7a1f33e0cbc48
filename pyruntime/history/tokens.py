"""Token counting: the loaded model's tokenizer when available, else `max(1, (len+3)//4)` (contract §5)."""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from pyruntime.errors import InvalidArgumentError

if TYPE_CHECKING:  # llama_cpp is the serve extra's, imported only when an exact counter is asked for
    from llama_cpp.llama_types import ChatCompletionRequestMessage, ChatCompletionTool

MESSAGE_OVERHEAD_TOKENS = 5
"""Template tokens around one message's content (ChatML: `<|im_start|>`, role, newline, `<|im_end|>`, newline)."""

GENERATION_PROMPT_TOKENS = 3
"""Template tokens of the assistant header that opens the reply."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    def count(self, text: str) -> int:
        """Tokens of `text` (at least 1 for the heuristic)."""
        ...


class HeuristicTokenCounter:
    """The fallback estimate `max(1, (len + 3) // 4)`, len in characters."""

    def count(self, text: str) -> int:
        """Estimated tokens of `text`."""
        return max(1, (len(text) + 3) // 4)


def count_message_tokens(counter: TokenCounter, content: str) -> int:
    """Tokens one chat message costs in a prompt: its content plus the template overhead (role included)."""
    return counter.count(content) + MESSAGE_OVERHEAD_TOKENS


def count_chat_tokens(
    counter: TokenCounter, messages: Sequence[Mapping[str, str]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """Prompt tokens of a chat (and the native `tools` it sends): exact when the counter renders the model's
    template (which decides whether and how tools appear), else estimated (tools as their JSON)."""
    exact = getattr(counter, "count_messages", None)
    if callable(exact):
        return int(exact(messages, tools=tools) if tools else exact(messages))
    total = sum(count_message_tokens(counter, m["content"]) for m in messages) + GENERATION_PROMPT_TOKENS
    return total + (counter.count(json.dumps(list(tools))) if tools else 0)


# ggml_log_level as the bundled llama.cpp defines it (include/ggml.h). llama-cpp-python's own log
# callback still maps the older numbering (WARN=2, ERROR=3), so under verbose=False it prints every
# warning as an error, e.g. `n_ctx_seq (512) > n_ctx_train (0)` on each vocabulary-only load.
GGML_LOG_LEVEL_ERROR = 4
GGML_LOG_LEVEL_CONT = 5  # continues the previous message at its level


class _ErrorsOnlyLog:
    """A llama.cpp log callback that writes only errors (and their continuation lines) to stderr."""

    def __init__(self) -> None:
        import llama_cpp

        self._printing = False
        self.callback = llama_cpp.llama_log_callback(self._log)  # kept referenced while installed

    def _log(self, level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != GGML_LOG_LEVEL_CONT:
            self._printing = level == GGML_LOG_LEVEL_ERROR
        if self._printing:
            print(text.decode("utf-8", "replace"), end="", flush=True, file=sys.stderr)


_ERRORS_ONLY: _ErrorsOnlyLog | None = None


@contextmanager
def llama_errors_only() -> Iterator[None]:
    """Within the block, llama.cpp in this process logs errors only; its default callback comes back after.

    The hosted server runs in a child process with its own llama.cpp and logging: this does not touch it.
    """
    global _ERRORS_ONLY
    import llama_cpp
    from llama_cpp import _logger

    if _ERRORS_ONLY is None:
        _ERRORS_ONLY = _ErrorsOnlyLog()
    llama_cpp.llama_log_set(_ERRORS_ONLY.callback, ctypes.c_void_p(0))
    try:
        yield
    finally:
        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


class LlamaTokenCounter:
    """Exact counts with the model's own tokenizer (llama.cpp, vocabulary only: no weights loaded).

    `count_messages` renders the GGUF's chat template and tokenizes it the way llama-cpp-python's
    chat handler does, so it equals the server's `usage.prompt_tokens` for the same messages.
    """

    def __init__(self, model_path: str | Path, *, cache_size: int = 4096) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise InvalidArgumentError("model_path does not name a model file")
        import llama_cpp  # heavy native import: only when an exact counter is asked for

        with llama_errors_only():  # a vocabulary-only load warns about its (unused) context on stderr
            self._llama = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        # Counting the same stored message every turn is the common case.
        self._count = lru_cache(maxsize=cache_size)(self._tokenize_len)
        self._formatter = None
        template = self._llama.metadata.get("tokenizer.chat_template")
        if template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=self._token_text(self._llama.token_eos()),
                bos_token=self._token_text(self._llama.token_bos()),
            )

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llama.detokenize([token], special=True).decode("utf-8", "replace")

    def _tokenize_len(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` (no BOS added, special tokens parsed)."""
        return self._llama.tokenize(text.encode("utf-8", "surrogatepass"), add_bos=False, special=True)

    def count(self, text: str) -> int:
        """Exact tokens of `text`."""
        return self._count(text)

    def render(
        self, messages: Sequence[Mapping[str, str]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> str:
        """The prompt text the model's chat template makes of `messages` and `tools` (with the generation prompt)."""
        if self._formatter is None:
            raise InvalidArgumentError("the model has no chat template")
        # Role/content mappings and OpenAI tool schemas are what llama-cpp-python's TypedDicts describe.
        chat = cast("list[ChatCompletionRequestMessage]", [dict(m) for m in messages])
        schemas = cast("list[ChatCompletionTool]", list(tools)) if tools else None
        return self._formatter(messages=chat, tools=schemas).prompt

    def count_messages(
        self, messages: Sequence[Mapping[str, str]], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """Exact prompt tokens of a chat, as llama.cpp's server counts them (tools rendered as its template does)."""
        # The Jinja formatter reports added_special=True, so llama-cpp-python adds no BOS either.
        return len(self.tokenize(self.render(messages, tools)))
