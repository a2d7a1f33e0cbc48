"""`RecordingModel`: a model that keeps every request a turn sends, so a test can assert on what was asked.

It answers like the other doubles (a list of replies, a `Script`, a reply function) or hands each request on to
another `ModelClient` - the runtime's HTTP client over a real llama-server in an end-to-end test - and records the
request in the same form either way: a `ChatRequest` (the `POST /chat/completions` body the HTTP client builds,
with typed accessors) and the conversation it belongs to. A request refused by the model's gate is not recorded:
it was never sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias, Unpack

from pyruntime.model import Gate, ModelClient, ModelStream
from pyruntime.model.client.compat import ChatCallOptions, Message
from pyruntime.model.client.types import ChatCompletion
from pyruntime.testing.models import ChatRequest, FunctionModel, Reply, ReplyFunction, ScriptedModel
from pyruntime.testing.scripted import Script

Answering: TypeAlias = ModelClient | Sequence[Reply] | Script | ReplyFunction
"""What answers the recorded requests: a model client, or what `ScriptedModel` / `FunctionModel` take."""


class RecordingModel:
    """A `ModelClient` that records each request, then lets `answering` answer it.

    `answering`: a list of replies or a `Script` (answered as `ScriptedModel` does), a reply function (as
    `FunctionModel`), or any `ModelClient` (the runtime's own client, another double). `gate` goes to the
    double built from replies or a function; a given client keeps its own.
    """

    def __init__(self, answering: Answering, *, gate: Gate | None = None) -> None:
        """Wrap the client, or build the double that gives the replies."""
        self.model: ModelClient
        if _is_model_client(answering):
            if gate is not None:
                raise ValueError("a given model client keeps its own gate")
            self.model = answering  # type: ignore[assignment]  # narrowed by _is_model_client
        elif isinstance(answering, Script | Sequence):
            self.model = ScriptedModel(answering, gate=gate)
        elif callable(answering):
            self.model = FunctionModel(answering, gate=gate)
        else:
            raise TypeError(f"RecordingModel answers with a ModelClient, replies, a Script or a function, "
                            f"not {type(answering).__name__}")
        self.requests: list[ChatRequest] = []

    # -- the assertion API ---------------------------------------------------------------------------------

    @property
    def last(self) -> ChatRequest:
        """The latest request (AssertionError when none was sent)."""
        assert self.requests, "no request was sent to the model"
        return self.requests[-1]

    def of_conversation(self, conversation: str | None) -> list[ChatRequest]:
        """The requests of one conversation (the `conversation` the turn engine named), in order."""
        return [r for r in self.requests if r.conversation == conversation]

    @property
    def conversations(self) -> list[str | None]:
        """Each conversation that sent a request, once, in the order of its first request."""
        return list(dict.fromkeys(r.conversation for r in self.requests))

    def where(self, test: Callable[[ChatRequest], bool]) -> list[ChatRequest]:
        """The requests `test` holds for, in order (e.g. `lambda r: r.streamed`)."""
        return [r for r in self.requests if test(r)]

    # -- the ModelClient calls -----------------------------------------------------------------------------

    @property
    def gate(self) -> Gate | None:
        """The answering model's gate."""
        return self.model.gate

    @gate.setter
    def gate(self, gate: Gate | None) -> None:
        self.model.gate = gate

    async def chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ChatCompletion:
        """Record the request, then the answering model's whole reply."""
        self.model.check_available()
        self._record(messages, False, options)
        return await self.model.chat(messages, **options)

    def stream_chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ModelStream:
        """The answering model's stream (its gate asked first), the request recorded."""
        stream = self.model.stream_chat(messages, **options)
        self._record(messages, True, options)
        return stream

    def check_available(self) -> None:
        """As the answering model."""
        self.model.check_available()

    async def aclose(self) -> None:
        """Close the answering model."""
        await self.model.aclose()

    def _record(self, messages: Sequence[Message], stream: bool, options: ChatCallOptions) -> None:
        self.requests.append(ChatRequest.of(messages, stream, options, len(self.requests) + 1))


def _is_model_client(value: object) -> bool:
    return all(callable(getattr(value, name, None)) for name in ("chat", "stream_chat", "check_available", "aclose"))


if TYPE_CHECKING:  # mypy holds the recording model to the seam
    def _a_model_client(model: RecordingModel) -> ModelClient:
        return model
