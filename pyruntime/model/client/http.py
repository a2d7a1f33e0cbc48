"""One async client for any OpenAI-compatible chat server (the hosted llama.cpp, LM Studio, Ollama, ...).

Just over 400 lines as one job, the HTTP side of a call (deadlines, stall limits, slot affinity), which
splitting would scatter across the streamed and unary paths that share it; what goes on the wire and how
replies are read is `compat.py`'s, the SSE framing `sse.py`'s, the connections and their keep-alive retry
`pool.py`'s.

The HTTP client is aiohttp's: every turn is a streamed call of a few dozen events, and aiohttp's C parser and
reader cost ~0.7 ms of CPU per such call where httpx (pure-Python h11 under anyio) cost ~4.7 ms, the largest
part of a turn's CPU in `serve` (docs/benchmarks.md, "Players on one server").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import aiohttp

from pyruntime.aio import AsyncClosing
from pyruntime.model.client.compat import (
    ChatCallOptions,
    ForcedCall,
    ForcedCallStream,
    Message,
    build_chat_request,
    error_from_response,
    force_tool_by_schema,
    forced_completion,
    named_choice_as_required,
    parse_chunk,
    parse_completion,
)
from pyruntime.model.client.concurrency import conversation_fields
from pyruntime.model.client.errors import IncompleteStreamError, ModelError, ModelStalledError, ModelUnavailableError
from pyruntime.model.client.parked_states import ParkedStates
from pyruntime.model.client.pool import LoopPool
from pyruntime.model.client.seam import Gate, ModelClient
from pyruntime.model.client.slot_moves import EngineAnswer, SlotMoves, slot_action
from pyruntime.model.client.slots import SlotAffinity, SlotUse
from pyruntime.model.client.sse import SSEDecoder, SSELines
from pyruntime.model.client.types import ChatCompletion, FinishDelta, StreamDelta, TextDelta, ToolCallDelta
from pyruntime.observability.first_token import model_call_sent, model_text_received

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0  # a long non-streamed reply on a slow CPU
DEFAULT_DEADLINE_S = 300.0  # every call, streamed or not, ends by then (closing the stream stops the generation)
# A stream that sends no text for this long is stopped and reported (ModelStalledError). Before the
# first text the prompt is still being evaluated, which takes longer on a slow CPU with a long prompt.
DEFAULT_FIRST_TEXT_S = 120.0
DEFAULT_TEXT_GAP_S = 30.0
DRAIN_AFTER_DONE_S = 1.0  # how long the end of a body may lag its [DONE] before the connection is closed
# A slot action (park, restore, erase) waits for the slot's running request: llama-server defers it until then.
SLOT_ACTION_TIMEOUT_S = 60.0

class ChatStream(AsyncClosing):
    """The deltas of one streamed reply; leaving `async with` (or `aclose()`) closes the HTTP stream."""

    def __init__(self, deltas: AsyncIterator[StreamDelta]) -> None:
        """Wrap the delta generator."""
        self._deltas = deltas

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> StreamDelta:
        return await self._deltas.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the HTTP stream."""
        await self._deltas.aclose()  # type: ignore[attr-defined]


class OpenAICompatClient(AsyncClosing):
    """Chat completions and model listing over the OpenAI HTTP API; errors become `ModelError`s.

    `base_url` includes the version prefix, e.g. `http://127.0.0.1:13333/v1`. Without `model`, the
    first model the server lists is used. For the hosted llama-server (`LlamaServerProcess.client_options`)
    it also speaks that server's dialect: each conversation in its own parallel slot (`slots`), usage
    counts from the per-token `timings`, a named `tool_choice` sent as `required` with only that tool.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        json_schema_as_json_object: bool = True,
        http_client: aiohttp.ClientSession | None = None,
        deadline_s: float | None = DEFAULT_DEADLINE_S,
        first_text_s: float | None = DEFAULT_FIRST_TEXT_S,
        text_gap_s: float | None = DEFAULT_TEXT_GAP_S,
        gate: Gate | None = None,
        headers: Mapping[str, str] | None = None,
        unix_socket: str | Callable[[], str | None] | None = None,
        slots: SlotAffinity | None = None,
        parked: ParkedStates | None = None,
        llama_server: bool = False,
        forced_tools_as_schema: bool = False,
        connections: int | None = None,
        middlewares: Sequence[aiohttp.ClientMiddlewareType] = (),
    ) -> None:
        """Configure the client; `http_client` (not closed by us) replaces the internal one.

        `deadline_s` bounds every call; `first_text_s` / `text_gap_s` stop a stream that sends no
        text (or tool-call piece) for that long from its start / after its last text. None: no limit.
        `gate` is asked before every request (see `Gate`). `headers` go with every request (a provider's
        own headers; the key goes in `api_key`). `unix_socket`: the hosted engine's Unix socket to connect to
        instead of `base_url`'s host and port, or a function that names it (asked for each event loop's pool).
        `slots`: the hosted engine's slot affinity (requests that name a `conversation` keep its slot), `parked`:
        where it parks the states of conversations that lost their slot (`slot_moves.py`). `llama_server`: the
        server is llama.cpp's own (its dialect, above).
        `connections`: the calls made at once (the request queue's capacity): the pool keeps that many alive.
        `middlewares`: aiohttp client middlewares every request of the internal client passes (what a test puts
        between the client and the engine: a recorder, an injected fault).
        A call that names a `conversation` names it to the server too (`model/concurrency.conversation_fields`).
        """
        for name, value in (("deadline_s", deadline_s), ("first_text_s", first_text_s), ("text_gap_s", text_gap_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.deadline_s = deadline_s
        self.first_text_s = first_text_s
        self.text_gap_s = text_gap_s
        self.gate = gate
        self._timeout = timeout
        self._json_schema_as_json_object = json_schema_as_json_object
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.slots = slots
        self.slot_moves = SlotMoves(slots, parked, self._engine_post) if slots is not None else None
        self.llama_server = llama_server
        self.forced_tools_as_schema = forced_tools_as_schema
        self._pool = LoopPool(self.base_url, timeout=timeout, unix_socket=unix_socket, connections=connections,
                              middlewares=middlewares, given=http_client)

    async def models(self) -> list[str]:
        """Ids of the models the server offers (`GET /models`)."""
        with self._transport_errors():
            async with await self._pool.request("GET", f"{self.base_url}/models", headers=self._headers) as response:
                status, content = response.status, await response.read()
        if status >= 400:
            raise error_from_response(status, content)
        data = self._json(content)
        return [str(m.get("id")) for m in data.get("data") or [] if isinstance(m, Mapping)]

    async def chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ChatCompletion:
        """One non-streamed chat completion (within `deadline_s`); `conversation` (a `slots.conversation_id`)
        keeps the hosted engine's slot of that conversation."""
        self.check_available()
        conversation = options.get("conversation")
        body = await self._request_body(messages, False, options)
        forced = self._forced(body)
        headers = self._named(body, conversation)
        limit = asyncio.timeout(self.deadline_s)
        try:
            async with limit, self._slot(conversation, messages, body) as use:
                with self._transport_errors():
                    async with await self._post(body, headers) as response:
                        status, content = response.status, await response.read()
                if status >= 400:
                    self._slot_failed(use)
        except TimeoutError:
            if limit.expired():
                raise self._deadline_error() from None
            raise
        if status >= 400:
            raise error_from_response(status, content)
        completion = parse_completion(self._json(content))
        return forced_completion(forced, completion) if forced is not None else completion

    def _forced(self, body: dict[str, Any]) -> ForcedCall | None:
        """The body in the server's dialect (in place); the forced call asked as a schema, if one was."""
        if self.forced_tools_as_schema:
            forced = force_tool_by_schema(body)
            if forced is not None:
                return forced
        if self.llama_server:
            named_choice_as_required(body)
        return None

    def _named(self, body: dict[str, Any], conversation: str | None) -> Mapping[str, str]:
        """The headers of a call; one of a conversation names it in the body and a header (for the server's router)."""
        fields, headers = conversation_fields(conversation)
        if not fields:
            return self._headers
        for name, value in fields.items():
            body.setdefault(name, value)
        return {**self._headers, **headers}

    async def _post(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> aiohttp.ClientResponse:
        """POST a completion, up to its response's head (`_request`)."""
        return await self._pool.request("POST", f"{self.base_url}/chat/completions", json=body, headers=headers)

    @contextlib.asynccontextmanager
    async def _slot(self, conversation: str | None, messages: Sequence[Message],
                    body: dict[str, Any]) -> AsyncIterator[SlotUse | None]:
        """With slot affinity: the request's slot (`id_slot` in `body`), made ready for it (`SlotMoves.prepare`)."""
        if self.slot_moves is None:
            yield None
            return
        use = await self.slot_moves.acquire(conversation, messages)
        try:
            body["id_slot"] = use.slot
            if await self.slot_moves.prepare(use):
                body["cache_prompt"] = False  # nothing of what the slot holds is this conversation's
            yield use
        finally:
            self.slot_moves.release(use)

    def _slot_failed(self, use: SlotUse | None) -> None:
        """A failed request may have cleared its slot (llama-server clears a slot whose decode failed)."""
        if use is not None and self.slots is not None:
            self.slots.forget(use.slot)

    async def erase_slot(self, slot: int) -> bool:
        """Drop a slot's KV state in the hosted engine (`POST /slots/N?action=erase`); False when it refused."""
        return await slot_action(self._engine_post, slot, "erase")

    async def forget_conversations(self, conversations: Sequence[str]) -> None:
        """Erase every state the hosted engine holds of these conversations (`SlotMoves.forget`); nothing to do for
        a server the runtime does not host."""
        if self.slot_moves is not None:
            await self.slot_moves.forget(conversations)

    async def _engine_post(self, path: str, params: Mapping[str, str] | None,
                           body: Mapping[str, Any]) -> EngineAnswer | None:
        """A POST to the engine's root (slot actions); None when it did not answer."""
        root = self.base_url.removesuffix("/v1")
        try:
            timeout = aiohttp.ClientTimeout(total=SLOT_ACTION_TIMEOUT_S)
            async with await self._pool.request("POST", f"{root}{path}", params=params, json=body,
                                                headers=self._headers, timeout=timeout) as response:
                return EngineAnswer(response.status, await response.read())
        except (aiohttp.ClientError, TimeoutError):
            return None

    def stream_chat(self, messages: Sequence[Message], **options: Unpack[ChatCallOptions]) -> ChatStream:
        """A streamed chat completion; ends with a `FinishDelta` or raises (never truncates silently).

        Raises `ModelStalledError` when no text comes for `first_text_s` / `text_gap_s`, and
        `ModelUnavailableError` past `deadline_s`; either way the HTTP stream is closed, which stops
        the generation on the hosted server. `conversation`: as in `chat`.
        """
        self.check_available()
        return ChatStream(self._stream(messages, options))

    async def _stream(self, messages: Sequence[Message], options: ChatCallOptions) -> AsyncIterator[StreamDelta]:
        conversation = options.get("conversation")
        body = await self._request_body(messages, True, options)
        body.setdefault("stream_options", {"include_usage": True})
        forced = self._forced(body)
        headers = self._named(body, conversation)
        translate = ForcedCallStream(forced) if forced is not None else None
        if self.llama_server:
            # Every chunk then carries the prompt's counts: a stream closed early (the output cap) still has them.
            body.setdefault("timings_per_token", True)
        finished = done = seen_text = False
        loop = asyncio.get_running_loop()
        began = loop.time()
        end = began + self.deadline_s if self.deadline_s is not None else None
        text_by = began + self.first_text_s if self.first_text_s is not None else None
        # The limit is armed only while we wait for the server, so the cancel never lands in the
        # consumer's code; the deadline is absolute, the text gap counts only time spent waiting.
        limit = asyncio.timeout(None)
        try:
            async with limit, self._slot(conversation, messages, body) as use:
                model_call_sent()
                with self._transport_errors():
                    async with self._open_stream(body, headers) as response:
                        if response.status >= 400:
                            self._slot_failed(use)
                            raise error_from_response(response.status, await response.read())
                        lines, decoder = SSELines(), SSEDecoder()
                        read = response.content.readany
                        while True:
                            limit.reschedule(_earliest(end, text_by))
                            chunk = await read()
                            limit.reschedule(None)
                            if done:  # past [DONE]: read to the body's end, so the connection is kept for reuse
                                if not chunk:
                                    break
                                continue
                            events = decoder.events(lines.feed(chunk) if chunk else lines.flush())
                            if not chunk:
                                events += [data for data in [decoder.flush()] if data is not None]
                            received: list[StreamDelta] = []
                            for data in events:
                                if data.strip() == "[DONE]":
                                    done = True
                                    # The body ends right after; a server that keeps it open loses the connection.
                                    end = text_by = loop.time() + DRAIN_AFTER_DONE_S
                                    break
                                received += parse_chunk(self._json(data))
                            if translate is not None:
                                received = [out for delta in received for out in translate.feed(delta)]
                            got_text = any(isinstance(delta, TextDelta | ToolCallDelta) for delta in received)
                            if got_text:
                                model_text_received()  # before the consumer relays it; only the first counts
                            for delta in received:
                                finished = finished or isinstance(delta, FinishDelta)
                                yield delta
                            if got_text and self.text_gap_s is not None:
                                text_by = loop.time() + self.text_gap_s  # after the consumer took the pieces
                                seen_text = True
                            if not chunk:
                                break
        except TimeoutError:
            if not limit.expired():
                raise
            if done:
                pass  # the body did not end after [DONE]: its connection was closed, the reply is whole
            elif end is not None and loop.time() >= end:
                log.warning("model call stopped at its deadline (%g s)", self.deadline_s)
                raise self._deadline_error() from None
            else:
                waited = self.text_gap_s if seen_text else self.first_text_s
                log.warning("generation stopped: the model sent no text for %g s", waited)
                raise ModelStalledError(
                    f"the model sent no text for {waited:g} s; the generation was stopped"
                ) from None
        if not finished:
            how = "[DONE]" if done else "the end of the stream"
            raise IncompleteStreamError(f"model server sent {how} without a finish_reason; the reply was cut")

    @contextlib.asynccontextmanager
    async def _open_stream(self, body: Mapping[str, Any], headers: Mapping[str, str]
                           ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The streamed response. Left with its body read to the end, its connection goes back to the pool; left
        earlier (cancelled, stopped, failed), the connection is closed, which stops the generation."""
        response = await self._post(body, headers)
        try:
            yield response
        finally:
            if response.content.at_eof():
                response.release()
            else:
                response.close()
                await asyncio.sleep(0)  # the socket closes on the loop's next turn: before the caller goes on

    def check_available(self) -> None:
        """Raise `ModelUnavailableError` (with a retry hint) when the gate says the model is not ready."""
        if self.gate is not None:
            self.gate()

    def _deadline_error(self) -> ModelUnavailableError:
        return ModelUnavailableError(f"the model call did not finish within {self.deadline_s:g} s; it was stopped")

    async def _request_body(self, messages: Sequence[Message], stream: bool,
                            options: ChatCallOptions) -> dict[str, Any]:
        if self.model is None:
            ids = await self.models()
            if not ids:
                raise ModelUnavailableError("model server lists no models")
            self.model = ids[0]
        return build_chat_request(self.model, messages, stream=stream,
                                  json_schema_as_json_object=self._json_schema_as_json_object, **options)

    @staticmethod
    def _json(content: bytes | str) -> Mapping[str, Any]:
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise ModelError("model server sent a body that is not JSON") from exc
        if not isinstance(data, Mapping):
            raise ModelError("model server sent JSON that is not an object")
        return data

    @contextlib.contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """Map HTTP transport failures to `ModelUnavailableError` (names the server, not the request)."""
        try:
            yield
        except aiohttp.ClientConnectorError as exc:
            raise ModelUnavailableError(f"cannot connect to the model server at {self.base_url}") from exc
        except TimeoutError as exc:  # aiohttp's own (connect, read); the call's deadline arrives as a cancel here
            raise ModelUnavailableError(f"model server did not answer within {self._timeout:.0f} s") from exc
        except aiohttp.ClientError as exc:  # peer closed mid-body, connection reset, malformed HTTP, ...
            raise ModelUnavailableError("connection to the model server broke mid-request") from exc

    async def aclose(self) -> None:
        """Close the internal HTTP client (a passed-in one is left open)."""
        await self._pool.aclose()


def _earliest(*times: float | None) -> float | None:
    """The earliest of the given loop times (None: no limit)."""
    present = [t for t in times if t is not None]
    return min(present) if present else None


if TYPE_CHECKING:  # mypy holds the runtime's client to the seam the turn engine is typed against

    def _is_a_model_client(client: OpenAICompatClient) -> ModelClient:
        return client
