"""Token counting: the heuristic, and the exact counter agreeing with llama.cpp on a real (tiny) model."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest
from llama_cpp import _logger

from pyruntime.errors import InvalidArgumentError
from pyruntime.history.tokens import (
    GENERATION_PROMPT_TOKENS,
    GGML_LOG_LEVEL_CONT,
    GGML_LOG_LEVEL_ERROR,
    MESSAGE_OVERHEAD_TOKENS,
    HeuristicTokenCounter,
    LlamaTokenCounter,
    count_chat_tokens,
    llama_errors_only,
)

CHATS = [
    [{"role": "user", "content": "hello"}],
    [
        {"role": "system", "content": "You are the blacksmith."},
        {"role": "user", "content": "My name is Alex and I need a sword."},
        {"role": "assistant", "content": "Hello Alex! A sword costs 40 gold."},
        {"role": "user", "content": "Ünïcödé, emoji 😀 and\nnew lines\tand <|im_start|> inside"},
    ],
    [
        {"role": "system", "content": "Previous conversation summary:\n- user: a\n- assistant: b"},
        {"role": "user", "content": ""},
    ],
]


@pytest.mark.parametrize(("text", "expected"), [("", 1), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)])
def test_heuristic_is_len_plus_3_div_4_at_least_1(text: str, expected: int) -> None:
    assert HeuristicTokenCounter().count(text) == expected


def test_heuristic_chat_count_adds_the_template_overhead() -> None:
    chat = [{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": "y" * 8}]
    expected = 10 + 2 + 2 * MESSAGE_OVERHEAD_TOKENS + GENERATION_PROMPT_TOKENS
    assert count_chat_tokens(HeuristicTokenCounter(), chat) == expected


@pytest.fixture(scope="module")
def model(tiny_model_path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(tiny_model_path), n_ctx=512, n_threads=1, verbose=False)


@pytest.mark.parametrize("chat", CHATS)
def test_exact_chat_count_equals_llama_cpp_prompt_tokens(
    tiny_model_path: Path, model: llama_cpp.Llama, chat: list
) -> None:
    counter = LlamaTokenCounter(tiny_model_path)
    reply = model.create_chat_completion(chat, max_tokens=1, temperature=0.0)
    assert not isinstance(reply, Iterator)  # not streamed
    assert count_chat_tokens(counter, chat) == reply["usage"]["prompt_tokens"]


def test_exact_text_count_equals_the_model_tokenizer(tiny_model_path: Path, model: llama_cpp.Llama) -> None:
    counter = LlamaTokenCounter(tiny_model_path)
    for text in ("the sword", "Ünïcödé 😀", "x" * 300, "<|im_end|>"):
        assert counter.count(text) == len(model.tokenize(text.encode(), add_bos=False, special=True))
    assert counter.count("<|im_end|>") == 1  # special tokens are parsed, not spelled out


def test_exact_counter_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        LlamaTokenCounter(tmp_path / "missing.gguf")


def test_loading_the_vocabulary_prints_nothing_and_restores_the_log_callback(
    tiny_model_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    counter = LlamaTokenCounter(tiny_model_path)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")  # no `llama_context: n_ctx_seq (...) > n_ctx_train (0)` line
    assert counter.count("the sword") >= 1
    # llama-cpp-python's own callback is back for every other llama.cpp use in this process.
    current = llama_cpp.llama_log_callback()
    llama_cpp.llama_log_get(ctypes.byref(current), ctypes.byref(ctypes.c_void_p()))
    assert ctypes.cast(current, ctypes.c_void_p).value == ctypes.cast(_logger.llama_log_callback, ctypes.c_void_p).value


def test_llama_errors_still_reach_stderr_while_the_load_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    with llama_errors_only():
        current = llama_cpp.llama_log_callback()
        llama_cpp.llama_log_get(ctypes.byref(current), ctypes.byref(ctypes.c_void_p()))
        # Messages as llama.cpp hands them to the installed callback: level, text, user data.
        for level, text in ((GGML_LOG_LEVEL_ERROR - 1, b"a warning\n"), (GGML_LOG_LEVEL_ERROR, b"an error"),
                            (GGML_LOG_LEVEL_CONT, b" that goes on\n"), (GGML_LOG_LEVEL_ERROR - 2, b"info\n"),
                            (GGML_LOG_LEVEL_CONT, b" more info\n")):
            current(level, text, None)
    assert capfd.readouterr().err == "an error that goes on\n"
