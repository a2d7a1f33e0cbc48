"""A light Connect client for load benchmarks: StreamTask over one kept-alive HTTP/1.1 connection, parsed by hand.

The public async client costs a few milliseconds of CPU per streamed turn (its HTTP and Connect layers in Python).
A benchmark that plays hundreds of players on the same two cores as `serve` would measure its own client as much
as the runtime: this one writes a prepared request and reads the chunked body's envelopes (binary protobuf) with
a few slices per event, well under a millisecond per turn. It speaks only what the benchmark needs: StreamTask,
`application/connect+proto`, a 200 answer with a chunked body, and the end-of-stream message (an error there is
a refusal, with its retry hint when it carries one).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from google.rpc import error_details_pb2

from coreai.v1 import orchestrator_pb2 as pb

STREAM_TASK_PATH = "/coreai.v1.Orchestrator/StreamTask"
END_STREAM = 0x02


@dataclass
class StreamOutcome:
    """What one StreamTask call gave: its final event, or the error code and retry hint of its end of stream."""

    final: pb.RunTaskResponse | None = None
    error_code: str = ""
    retry_after_s: float | None = None


class RefusedError(Exception):
    """The runtime answered the call with an error (its Connect code in `code`)."""

    def __init__(self, code: str, retry_after_s: float | None) -> None:
        super().__init__(code)
        self.code = code
        self.retry_after_s = retry_after_s


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("the runtime closed the connection")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class RawConnectPlayer:
    """One player's connection to a Connect port (`host`, `port`), StreamTask calls one after another."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self._head = (f"POST {STREAM_TASK_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                      f"Content-Type: application/connect+proto\r\nConnect-Protocol-Version: 1\r\n"
                      f"Authorization: Bearer {token}\r\n")
        self._conn: _Connection | None = None

    async def _connection(self) -> _Connection:
        if self._conn is None or self._conn.lost is not None:
            loop = asyncio.get_running_loop()
            _, self._conn = await loop.create_connection(_Connection, self.host, self.port)
        return self._conn

    async def _more(self, conn: _Connection) -> None:
        if conn.lost is not None:
            raise conn.lost
        conn.waiter = asyncio.get_running_loop().create_future()
        await conn.waiter
        if conn.lost is not None and not conn.buffer:
            raise conn.lost

    async def stream_task(self, request: pb.RunTaskRequest, affinity: str,
                          on_event: Callable[[pb.TurnEvent], None]) -> StreamOutcome:
        """One StreamTask call; `on_event` sees each event as it arrives."""
        conn = await self._connection()
        body = request.SerializeToString()
        envelope = b"\x00" + len(body).to_bytes(4, "big") + body
        assert conn.transport is not None
        conn.transport.write((self._head + f"coreai-affinity: {affinity}\r\nContent-Length: {len(envelope)}\r\n\r\n")
                             .encode() + envelope)
        buffer = conn.buffer
        while b"\r\n\r\n" not in buffer:
            await self._more(conn)
        end = buffer.index(b"\r\n\r\n")
        head = bytes(buffer[:end]).decode("latin-1").lower()
        del buffer[:end + 4]
        if not head.startswith("http/1.1 200"):
            raise RefusedError(head.split("\r\n", 1)[0], None)
        if "transfer-encoding: chunked" not in head:
            raise RefusedError("not a chunked stream", None)
        payload = bytearray()
        outcome = StreamOutcome()
        while True:
            while b"\r\n" not in buffer:
                await self._more(conn)
            line_end = buffer.index(b"\r\n")
            size = int(bytes(buffer[:line_end]).split(b";", 1)[0], 16)
            while len(buffer) < line_end + 2 + size + 2:
                await self._more(conn)
            payload += buffer[line_end + 2:line_end + 2 + size]
            del buffer[:line_end + 2 + size + 2]
            while len(payload) >= 5:
                length = int.from_bytes(payload[1:5], "big")
                if len(payload) < 5 + length:
                    break
                flags, message = payload[0], bytes(payload[5:5 + length])
                del payload[:5 + length]
                if flags & END_STREAM:
                    _read_end(message, outcome)
                    continue
                event = pb.TurnEvent.FromString(message)
                if event.HasField("final"):
                    outcome.final = event.final
                on_event(event)
            if size == 0:
                if outcome.error_code:
                    raise RefusedError(outcome.error_code, outcome.retry_after_s)
                return outcome

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None and self._conn.transport is not None:
            self._conn.transport.close()


def _read_end(message: bytes, outcome: StreamOutcome) -> None:
    """The end-of-stream message: `{}`, or `{"error": {"code": ..., "details": [RetryInfo, ...]}}`."""
    error = json.loads(message or b"{}").get("error")
    if not error:
        return
    outcome.error_code = str(error.get("code") or "unknown")
    for detail in error.get("details") or ():
        if str(detail.get("type", "")).endswith("RetryInfo"):
            value = str(detail.get("value", ""))
            info = error_details_pb2.RetryInfo.FromString(base64.b64decode(value + "=" * (-len(value) % 4)))
            outcome.retry_after_s = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
