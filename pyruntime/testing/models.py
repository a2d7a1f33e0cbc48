"""In-process model doubles: `ScriptedModel` and `FunctionModel`, for testing turn logic without a model.

Both are `ModelClient`s (`pyruntime/model/client/seam.py`): hand one to `AiOrchestrator` in place of the
HTTP client and a turn runs exactly as against llama.cpp - the queue, the tool loop, streaming, the
output cap, recording - with replies you chose, no process and no socket. They speak the scripted
model's vocabulary (`pyruntime/testing/scripted.py`, what `serve --scripted-model FILE` serves over
HTTP): a reply is a text, a `ScriptedCall`, a `ScriptedError` or a whole `Answer` (text pieces, tool
calls, delays). In structured tool mode (a `response_format` whose schema has `tool_calls`) a reply is
sent as the JSON object that mode expects, as the scripted server does; an `Answer(..., structured=True)`
is sent as it is (to test a malformed reply), and so is any reply to another JSON format (the memory
writer's decision: reply with its JSON text). Every request is kept in `requests`, as the body the HTTP
client would have sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, Unpack

from pyruntime.model.client.compat import (
    ChatCallOptions,
    Message,
    build_chat_request,
    error_from_body,
    parse_chunk,
    parse_completion,
)
from pyruntime.model.client.errors import ModelError, ModelUnavailableError
from pyruntime.model.client.seam import Gate, ModelClient, ModelStream
from pyruntime.model.client.types import ChatCompletion, StreamDelta
from pyruntime.testing.scripted import (
    Answer,
    RequestFacts,
    Script,
    ScriptedCall,
    ScriptedError,
    request_facts,
    scripted_answer,
)
from pyruntime.testing.scripted_wire import ReplyHeader, chunk_bodies, completion_body, error_body

Reply: TypeAlias = str | ScriptedCall | ScriptedError | Answer
"""One model reply: a text, one tool call (with no text), an HTTP failure, or a whole `Answer`."""


@dataclass(frozen=True)
class ChatRequest:
    """One request the turn engine sent, as the HTTP client would have sent it (`body`)."""

    body: dict[str, Any]  # the `POST /chat/completions` JSON (messages normalized, `stream`, tools, ...)
    conversation: str | None  # the conversation the request belongs to (the hosted engine's slot key)
    number: int  # 1 for the model's first request, 2 for the next, ...

    @classmethod
    def of(cls, messages: Sequence[Message], stream: bool, options: ChatCallOptions, number: int) -> ChatRequest:
        """The request a call with these arguments sends: a snapshot (the caller may reuse its lists)."""
        body = build_chat_request(None, messages, stream=stream, **options)
        return cls(copy.deepcopy(body), options.get("conversation"), number)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages, system prompt first."""
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The native tool definitions offered (empty in structured mode, which offers them in the schema)."""
        tools: list[dict[str, Any]] = self.body.get("tools", [])
        return tools

    @property
    def facts(self) -> RequestFacts:
        """What the scripted model's rules look at: the player's message, after tool results, structured, ..."""
        return request_facts(self.body)

    @property
    def streamed(self) -> bool:
        """True for a streamed request (`stream_chat`: a turn's reply, a prewarm), False for `chat`."""
        return bool(self.body.get("stream"))

    @property
    def max_tokens(self) -> int | None:
        """The output cap sent (None: the server's own)."""
        value: int | None = self.body.get("max_tokens")
        return value

    @property
    def temperature(self) -> float | None:
        """The sampling temperature sent (None: the server's own)."""
        value: float | None = self.body.get("temperature")
        return value

    @property
    def tool_choice(self) -> str | dict[str, Any] | None:
        """The native `tool_choice` sent: `"none"`, `"required"`, a named tool, or None (the server's default)."""
        value: str | dict[str, Any] | None = self.body.get("tool_choice")
        return value

    @property
    def response_format(self) -> dict[str, Any] | None:
        """The `response_format` sent (structured tool mode, the memory writer's decision), or None."""
        value: dict[str, Any] | None = self.body.get("response_format")
        return value

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the reply is constrained to, or None for free text."""
        fmt = self.response_format or {}
        schema: dict[str, Any] | None = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
        return schema

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools the model may call, in order: the native definitions, or the structured schema's branches."""
        if self.tools:
            return tuple(t["function"]["name"] for t in self.tools)
        calls = ((self.schema or {}).get("properties") or {}).get("tool_calls")
        if not isinstance(calls, dict):
            return ()
        items = calls.get("items") or {}
        branches = items.get("anyOf", [items])
        return tuple(b["properties"]["name"]["const"] for b in branches)

    @property
    def system_prompt(self) -> str:
        """The first message's text when it is the system prompt, else ""."""
        first = self.messages[0]
        return str(first.get("content") or "") if first.get("role") == "system" else ""

    @property
    def roles(self) -> list[str]:
        """The role of each message, in order."""
        return [str(m["role"]) for m in self.messages]

    @property
    def last_text(self) -> str:
        """The last message's text: the player's line of a turn, the tool results of a later round, ..."""
        return str(self.messages[-1].get("content") or "")

    def sends(self, text: str) -> bool:
        """True when some message's text contains `text` (a fact, a block heading, a player's line)."""
        return any(text in str(m.get("content") or "") for m in self.messages)


ReplyFunction: TypeAlias = Callable[[ChatRequest], Reply | Awaitable[Reply]]


class InProcessModel:
    """A `ModelClient` that answers in-process; subclasses say what to answer (`_answer`)."""

    model_name = "in-process"

    def __init__(self, *, gate: Gate | None = None) -> None:
        """Start with no requests; `gate`: as the HTTP client's (asked before every request)."""
        self.gate = gate
        self.requests: list[ChatRequest] = []
        self.closed = False

    async def _answer(self, request: ChatRequest) -> Answer:
        raise NotImplementedError

    async def chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ChatCompletion:
        """One whole reply."""
        self.check_available()
        request = self._record(messages, False, options)
        answer = await self._sent(request)
        if answer.first_delay_ms:
            await asyncio.sleep(answer.first_delay_ms / 1000)
        _raise_error(answer)
        return parse_completion(completion_body(answer, request.messages, self._reply(request)))

    def stream_chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ModelStream:
        """A streamed reply: the text piece by piece, then the tool calls, the usage and the finish."""
        self.check_available()
        request = self._record(messages, True, options)
        return contextlib.aclosing(self._deltas(request))

    async def _deltas(self, request: ChatRequest) -> AsyncGenerator[StreamDelta, None]:
        answer = await self._sent(request)
        if answer.first_delay_ms:
            await asyncio.sleep(answer.first_delay_ms / 1000)
        _raise_error(answer)
        for wait, chunk in chunk_bodies(answer, request.messages, self._reply(request)):
            if wait:
                await asyncio.sleep(wait)
            for delta in parse_chunk(chunk):
                yield delta

    def _reply(self, request: ChatRequest) -> ReplyHeader:
        """The reply's model name and id, as an HTTP server would send them."""
        return ReplyHeader(self.model_name, f"{self.model_name}-{request.number}")

    def check_available(self) -> None:
        """Raise `ModelUnavailableError` when closed or when the gate says the model cannot take requests."""
        if self.closed:
            raise ModelUnavailableError("the model client is closed")
        if self.gate is not None:
            self.gate()

    async def aclose(self) -> None:
        """Refuse further requests (as a closed HTTP client would)."""
        self.closed = True

    def _record(self, messages: Sequence[Message], stream: bool, options: ChatCallOptions) -> ChatRequest:
        request = ChatRequest.of(messages, stream, options, len(self.requests) + 1)
        self.requests.append(request)
        return request

    async def _sent(self, request: ChatRequest) -> Answer:
        """The answer in the shape the request asks for (structured mode: the JSON object)."""
        answer = await self._answer(request)
        if answer.error is None and not answer.structured and request.facts.structured:
            return scripted_answer(answer.text, answer.tool_calls, structured=True, delay_ms=answer.delay_ms,
                                   first_delay_ms=answer.first_delay_ms)
        return answer


class ScriptedModel(InProcessModel):
    """Answers from a list of replies, one per request in order (the last one repeats), or from a `Script`.

    A `Script` is what `serve --scripted-model FILE` serves (rules matched on the role and the player's
    message): the same file drives play-mode tests over HTTP and Python tests in-process.
    """

    model_name = "scripted"

    def __init__(self, replies: Sequence[Reply] | Script, *, gate: Gate | None = None) -> None:
        """Keep the replies (at least one) or the script."""
        super().__init__(gate=gate)
        if not isinstance(replies, Script):
            if isinstance(replies, str) or not replies:
                raise ValueError("ScriptedModel needs a non-empty list of replies (or a Script)")
            for reply in replies:
                _as_answer(reply)  # a bad entry fails here, not in the middle of a turn
        self._replies = replies

    async def _answer(self, request: ChatRequest) -> Answer:
        if isinstance(self._replies, Script):
            return self._replies.answer(request.body)
        return _as_answer(self._replies[min(request.number, len(self._replies)) - 1])


class FunctionModel(InProcessModel):
    """Answers with what `function(request)` returns (a `Reply`, or an awaitable of one)."""

    model_name = "function"

    def __init__(self, function: ReplyFunction, *, gate: Gate | None = None) -> None:
        """Keep the function."""
        super().__init__(gate=gate)
        self.function = function

    async def _answer(self, request: ChatRequest) -> Answer:
        reply = self.function(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return _as_answer(reply)


def _as_answer(reply: Reply) -> Answer:
    if isinstance(reply, Answer):
        return reply
    if isinstance(reply, str):
        return scripted_answer(reply)
    if isinstance(reply, ScriptedCall):
        return scripted_answer("", (reply,))
    if isinstance(reply, ScriptedError):
        return Answer((), error=reply)
    raise TypeError(f"a model reply is a str, ScriptedCall, ScriptedError or Answer, not {type(reply).__name__}")


def _raise_error(answer: Answer) -> None:
    """An error answer fails the call as the same HTTP failure would through the real client."""
    if answer.error is not None:
        error: ModelError = error_from_body(answer.error.status, error_body(answer.error))
        raise error


if TYPE_CHECKING:  # mypy holds the doubles to the seam the turn engine is typed against

    def _are_model_clients(scripted: ScriptedModel, function: FunctionModel) -> list[ModelClient]:
        return [scripted, function]
