"""A scripted `Answer` as OpenAI chat-completion JSON (pure): one shape for every scripted model.

The scripted server sends these bodies over HTTP; the in-process doubles (`models.py`) read the same bodies
through the HTTP client's own parse (`model/client/compat.py`), so a scripted reply reaches a turn the same
way whether or not a socket is in between.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.testing.scripted import Answer, ScriptedError, scripted_usage

Body = dict[str, Any]


@dataclass(frozen=True)
class ReplyHeader:
    """What every body of one reply carries besides the answer: the model's name, the reply's id and time."""

    model: str
    reply_id: str
    created: int = 0  # Unix seconds


def _tool_calls(answer: Answer) -> list[Body]:
    return [{"id": f"call_{i + 1}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for i, c in enumerate(answer.tool_calls)]


def _finish_reason(answer: Answer) -> str:
    return "tool_calls" if answer.tool_calls else "stop"


def _usage(messages: Sequence[Mapping[str, Any]], answer: Answer) -> Body:
    prompt, completion = scripted_usage(messages, answer)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def error_body(error: ScriptedError) -> Body:
    """The body of an error answer, sent with HTTP status `error.status`."""
    return {"error": {"message": error.message, "code": error.status}}


def completion_body(answer: Answer, messages: Sequence[Mapping[str, Any]], header: ReplyHeader) -> Body:
    """The `chat.completion` body of a whole reply (`answer` without an error)."""
    message: Body = {"role": "assistant", "content": answer.text}
    if answer.tool_calls:
        message["tool_calls"] = _tool_calls(answer)
    return {"id": header.reply_id, "object": "chat.completion", "created": header.created, "model": header.model,
            "usage": _usage(messages, answer),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(answer)}]}


def chunk_bodies(answer: Answer, messages: Sequence[Mapping[str, Any]], header: ReplyHeader
                 ) -> Iterator[tuple[float, Body]]:
    """The `chat.completion.chunk` bodies of a streamed reply, each with the seconds to wait before sending it.

    The role, the text pieces (`delay_ms` apart), the tool calls, then the finish with the usage.
    """
    base = {"id": header.reply_id, "object": "chat.completion.chunk", "created": header.created,
            "model": header.model}

    def chunk(delta: Body, finish: str | None = None, **extra: Any) -> Body:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}

    yield 0.0, chunk({"role": "assistant"})
    wait = 0.0  # an empty piece sends nothing but still takes its delay
    for index, piece in enumerate(answer.pieces):
        wait += answer.delay_ms / 1000 if index else 0.0
        if piece:
            yield wait, chunk({"content": piece})
            wait = 0.0
    if answer.tool_calls:
        yield wait, chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(_tool_calls(answer))]})
        wait = 0.0
    yield wait, chunk({}, _finish_reason(answer), usage=_usage(messages, answer))
