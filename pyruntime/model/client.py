"""One async client for any OpenAI-compatible chat server (the hosted llama.cpp, LM Studio, Ollama, ...)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import httpx

from pyruntime.model.compat import (
    Message,
    build_chat_request,
    error_from_response,
    parse_chunk,
    parse_completion,
)
from pyruntime.model.errors import IncompleteStreamError, ModelError, ModelUnavailableError
from pyruntime.model.sse import SSEDecoder
from pyruntime.model.types import ChatCompletion, FinishDelta, StreamDelta

DEFAULT_TIMEOUT_S = 300.0  # a long non-streamed reply on a slow CPU
CONNECT_TIMEOUT_S = 5.0


class ChatStream:
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

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class OpenAICompatClient:
    """Chat completions and model listing over the OpenAI HTTP API; errors become `ModelError`s.

    `base_url` includes the version prefix, e.g. `http://127.0.0.1:13333/v1`. Without `model`, the
    first model the server lists is used.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        json_schema_as_json_object: bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        """Configure the client; `http_client` (not closed by us) replaces the internal one."""
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._timeout = timeout
        self._json_schema_as_json_object = json_schema_as_json_object
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S))

    async def models(self) -> list[str]:
        """Ids of the models the server offers (`GET /models`)."""
        with self._transport_errors():
            response = await self._http.get(f"{self.base_url}/models", headers=self._headers)
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content)
        data = self._json(response.content)
        return [str(m.get("id")) for m in data.get("data") or [] if isinstance(m, Mapping)]

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatCompletion:
        """One non-streamed chat completion."""
        body = await self._request_body(
            messages, False, tools, tool_choice, response_format, temperature, max_tokens, extra
        )
        with self._transport_errors():
            response = await self._http.post(
                f"{self.base_url}/chat/completions", json=body, headers=self._headers
            )
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content)
        return parse_completion(self._json(response.content))

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatStream:
        """A streamed chat completion; ends with a `FinishDelta` or raises (never truncates silently)."""
        return ChatStream(
            self._stream(messages, tools, tool_choice, response_format, temperature, max_tokens, extra)
        )

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        response_format: Mapping[str, Any] | None,
        temperature: float | None,
        max_tokens: int | None,
        extra: Mapping[str, Any] | None,
    ) -> AsyncIterator[StreamDelta]:
        body = await self._request_body(
            messages, True, tools, tool_choice, response_format, temperature, max_tokens, extra
        )
        body.setdefault("stream_options", {"include_usage": True})
        finished = done = False
        with self._transport_errors():
            async with self._http.stream(
                "POST", f"{self.base_url}/chat/completions", json=body, headers=self._headers
            ) as response:
                if response.status_code >= 400:
                    raise error_from_response(response.status_code, await response.aread())
                decoder = SSEDecoder()
                async for line in response.aiter_lines():
                    data = decoder.feed(line)
                    if data is None:
                        continue
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    for delta in parse_chunk(self._json(data.encode())):
                        finished = finished or isinstance(delta, FinishDelta)
                        yield delta
                else:
                    tail = decoder.flush()
                    if tail is not None and tail.strip() != "[DONE]":
                        for delta in parse_chunk(self._json(tail.encode())):
                            finished = finished or isinstance(delta, FinishDelta)
                            yield delta
        if not finished:
            how = "[DONE]" if done else "the end of the stream"
            raise IncompleteStreamError(f"model server sent {how} without a finish_reason; the reply was cut")

    async def _request_body(
        self,
        messages: Sequence[Message],
        stream: bool,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: str | Mapping[str, Any] | None,
        response_format: Mapping[str, Any] | None,
        temperature: float | None,
        max_tokens: int | None,
        extra: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        if self.model is None:
            ids = await self.models()
            if not ids:
                raise ModelUnavailableError("model server lists no models")
            self.model = ids[0]
        return build_chat_request(
            self.model,
            messages,
            stream=stream,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
            extra=extra,
            json_schema_as_json_object=self._json_schema_as_json_object,
        )

    @staticmethod
    def _json(content: bytes) -> Mapping[str, Any]:
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise ModelError("model server sent a body that is not JSON") from exc
        if not isinstance(data, Mapping):
            raise ModelError("model server sent JSON that is not an object")
        return data

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """Map httpx transport failures to `ModelUnavailableError` (names the server, not the request)."""
        try:
            yield
        except httpx.ConnectError as exc:
            raise ModelUnavailableError(f"cannot connect to the model server at {self.base_url}") from exc
        except httpx.TimeoutException as exc:
            raise ModelUnavailableError(f"model server did not answer within {self._timeout:.0f} s") from exc
        except httpx.TransportError as exc:  # peer closed mid-body, connection reset, ...
            raise ModelUnavailableError("connection to the model server broke mid-request") from exc

    async def aclose(self) -> None:
        """Close the internal HTTP client (a passed-in one is left open)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> OpenAICompatClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
