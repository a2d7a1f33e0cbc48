"""`ModelClient`: the calls the turn engine makes on a model, so anything with them can stand in for one.

The runtime's own client is `OpenAICompatClient` (HTTP to llama-server, LM Studio, Ollama, ...); the
in-process test doubles are `pyruntime.testing.ScriptedModel` and `FunctionModel`. The turn engine
(`AiOrchestrator`, the memory pass, the prewarm, the between-turns fold) is typed against this protocol
only, so it never depends on how the model is reached. No I/O here: the seam is types, and it imports none of
its implementations (each one holds itself to it where it is defined, for mypy).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeAlias, Unpack

from pyruntime.model.client.compat import ChatCallOptions, Message
from pyruntime.model.client.types import ChatCompletion, StreamDelta

Gate: TypeAlias = Callable[[], None]
"""Raises `ModelUnavailableError` when the model cannot take requests now (e.g. a watchdog restart)."""

ModelStream: TypeAlias = AbstractAsyncContextManager[AsyncIterator[StreamDelta]]
"""A streamed reply: `async with stream as deltas: async for delta in deltas`; leaving the block stops it.

The deltas end with a `FinishDelta` (usage comes as a `UsageDelta`), or the iteration raises a `ModelError`.
"""


class ModelClient(Protocol):
    """What the turn engine asks of a model: a reply, a streamed reply, whether it is up, and closing.

    A call's keywords (tools, tool_choice, response_format, temperature, max_tokens, extra, conversation) are
    declared once, as `ChatCallOptions`. `gate`, when set, is asked before every request (see `Gate`): the runtime
    points it at the engine's watchdog so turns fail fast (UNAVAILABLE) while the model restarts.
    """

    gate: Gate | None

    async def chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ChatCompletion:
        """One whole reply; `options["conversation"]` names the conversation (the hosted engine keeps its slot)."""
        ...

    def stream_chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ModelStream:
        """A streamed reply (the gate is asked now, before the stream is opened)."""
        ...

    def check_available(self) -> None:
        """Raise `ModelUnavailableError` when the gate says the model cannot take requests now."""
        ...

    async def aclose(self) -> None:
        """Release what the client holds (connections); the model itself is not stopped."""
        ...

