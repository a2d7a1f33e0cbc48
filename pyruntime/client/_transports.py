"""How calls travel: gRPC (grpcio stubs) or Connect (connectrpc's generated clients), sync and async.

Every transport takes (service, RPC name, request) and returns the response message, raising the
`pyruntime.client.errors` exception of a failed call's status.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import grpc
from connectrpc.errors import ConnectError
from google.protobuf.message import DecodeError, Message
from google.rpc.error_details_pb2 import RetryInfo
from grpc import aio
from pyqwest import Client, HTTPTransport, SyncClient, SyncHTTPTransport

from coreai.v1 import memory_store_pb2_grpc, orchestrator_pb2_grpc
from coreai.v1.memory_store_connect import MemoryStoreClient, MemoryStoreClientSync
from coreai.v1.orchestrator_connect import OrchestratorClient, OrchestratorClientSync
from pyruntime.client.errors import RuntimeCallError, error_for, status_code_named
from pyruntime.errors import InvalidArgumentError
from pyruntime.net.wire import (
    GRPC_STATUS_DETAILS_KEY,
    RETRY_INFO_TYPE,
    python_method_name,
    retry_after_in_status,
    retry_after_seconds,
)

MEMORY_STORE = "MemoryStore"
ORCHESTRATOR = "Orchestrator"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # responses (snapshots) may be large; requests are limited by the server
AFFINITY_HEADER = "coreai-affinity"
"""The header (gRPC metadata) naming the conversation a call is about: a load balancer in front of several
runtimes hashes it to keep each conversation on one runtime (docs/operations/scale-out.md)."""


CaCert = bytes | str | Path
"""A PEM CA certificate (or a self-signed server certificate) to trust: its bytes, or a path to it."""


def parse_runtime_url(url: str) -> tuple[str, str]:
    """("grpc" | "grpcs", "host:port") for `grpc(s)://host:port`; ("connect", "http(s)://host:port") for http(s)."""
    parts = urlsplit(url.strip())
    if parts.scheme in ("grpc", "grpcs") and parts.netloc:
        return parts.scheme, parts.netloc
    if parts.scheme in ("http", "https") and parts.netloc:
        return "connect", f"{parts.scheme}://{parts.netloc}"
    raise InvalidArgumentError("runtime URL must be grpc://HOST:PORT or grpcs://HOST:PORT (gRPC, grpcs over TLS), "
                               "or http://HOST:PORT or https://HOST:PORT (Connect)")


def _pem(ca_cert: CaCert | None) -> bytes | None:
    """The PEM bytes of ca_cert (bytes as given, a str or Path read as a file)."""
    if ca_cert is None or isinstance(ca_cert, bytes):
        return ca_cert
    return Path(ca_cert).read_bytes()


def _grpc_credentials(kind: str, ca_cert: CaCert | None) -> grpc.ChannelCredentials | None:
    """TLS credentials for grpcs:// (ca_cert, else the system's roots); None for plain grpc://."""
    if kind != "grpcs":
        if ca_cert is not None:
            raise InvalidArgumentError("ca_cert needs a TLS URL (grpcs:// or https://)")
        return None
    return grpc.ssl_channel_credentials(root_certificates=_pem(ca_cert))


def _tls_options(base_url: str, ca_cert: CaCert | None) -> dict[str, Any]:
    """pyqwest transport options for https (ca_cert only when given: a pinned private CA; else the system's roots);
    empty for plain http."""
    https = base_url.startswith("https://")
    if ca_cert is not None and not https:
        raise InvalidArgumentError("ca_cert needs a TLS URL (grpcs:// or https://)")
    if not https:
        return {}
    pem = _pem(ca_cert)
    return {"tls_ca_cert": pem} if pem is not None else {"tls_include_system_certs": True}


def _grpc_error(exc: grpc.RpcError) -> RuntimeCallError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else None
    trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    status = None
    for item in trailers or ():
        pair: tuple[Any, ...] = tuple(item)  # type: ignore[arg-type]  # (key, value): typeshed types it otherwise
        if pair[0] == GRPC_STATUS_DETAILS_KEY and isinstance(pair[1], bytes):
            status = pair[1]
    return error_for(status_code_named(code.name if code is not None else "UNKNOWN"), details or "call failed",
                     retry_after_in_status(status) if status is not None else None)


def _connect_error(exc: ConnectError) -> RuntimeCallError:
    retry_after = None
    for detail in exc.details:
        if detail.type_name == RETRY_INFO_TYPE:
            with contextlib.suppress(DecodeError):
                retry_after = retry_after_seconds(RetryInfo.FromString(detail.message_bytes))
    return error_for(status_code_named(exc.code.name), exc.message, retry_after)


class AsyncTransport(Protocol):
    """Async calls to one runtime."""

    async def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response (affinity: the conversation id sent as AFFINITY_HEADER, "" for none)."""
        ...

    def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> AsyncIterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class SyncTransport(Protocol):
    """Blocking calls to one runtime."""

    def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response (affinity: the conversation id sent as AFFINITY_HEADER, "" for none)."""
        ...

    def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> Iterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


_GRPC_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]


def _grpc_stubs(channel: Any) -> dict[str, Any]:
    """Both services' stubs on one channel (blocking or grpc.aio: the stubs take either)."""
    return {MEMORY_STORE: memory_store_pb2_grpc.MemoryStoreStub(channel),
            ORCHESTRATOR: orchestrator_pb2_grpc.OrchestratorStub(channel)}


def _grpc_metadata(metadata: tuple[tuple[str, str], ...], affinity: str) -> tuple[tuple[str, str], ...]:
    return (*metadata, (AFFINITY_HEADER, affinity)) if affinity else metadata


def _connect_headers(headers: dict[str, str], affinity: str) -> dict[str, str]:
    return {**headers, AFFINITY_HEADER: affinity} if affinity else headers


class AsyncGrpcTransport:
    """grpc.aio channel with both stubs."""

    def __init__(self, target: str, token: str, timeout: float | None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._channel = (aio.insecure_channel(target, options=_GRPC_OPTIONS) if credentials is None
                         else aio.secure_channel(target, credentials, options=_GRPC_OPTIONS))
        self._stubs = _grpc_stubs(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    async def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response."""
        try:
            return await getattr(self._stubs[service], rpc)(request, metadata=_grpc_metadata(self._metadata, affinity),
                                                            timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    async def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> AsyncIterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        call = getattr(self._stubs[service], rpc)(request, metadata=_grpc_metadata(self._metadata, affinity),
                                                  timeout=self._timeout)
        try:
            async for message in call:
                yield message
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None
        finally:
            call.cancel()

    async def aclose(self) -> None:
        """Close the channel."""
        await self._channel.close()


class GrpcTransport:
    """Blocking grpc channel with both stubs."""

    def __init__(self, target: str, token: str, timeout: float | None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._channel = (grpc.insecure_channel(target, options=_GRPC_OPTIONS) if credentials is None
                         else grpc.secure_channel(target, credentials, options=_GRPC_OPTIONS))
        self._stubs = _grpc_stubs(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout

    def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response."""
        try:
            return getattr(self._stubs[service], rpc)(request, metadata=_grpc_metadata(self._metadata, affinity),
                                                      timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> Iterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        call = getattr(self._stubs[service], rpc)(request, metadata=_grpc_metadata(self._metadata, affinity),
                                                  timeout=self._timeout)
        try:
            yield from call
        except grpc.RpcError as exc:
            raise _grpc_error(exc) from None
        finally:
            call.cancel()

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()


def _timeout_ms(timeout: float | None) -> int | None:
    return None if timeout is None else max(1, int(timeout * 1000))


class AsyncConnectTransport:
    """connectrpc's async clients over one pyqwest connection pool (binary protobuf)."""

    def __init__(self, base_url: str, token: str, timeout: float | None, ca_cert: CaCert | None = None) -> None:
        # A pool of its own, closed by aclose(): connectrpc's close() leaves the HTTP client open, and pyqwest's
        # default pool is the process's, kept after the client closes.
        self._pool = HTTPTransport(**_tls_options(base_url, ca_cert))
        self._http = Client(self._pool)
        options: dict[str, Any] = {"timeout_ms": _timeout_ms(timeout), "http_client": self._http,
                                   "read_max_bytes": MAX_MESSAGE_BYTES}
        self._clients = {MEMORY_STORE: MemoryStoreClient(base_url, **options),
                         ORCHESTRATOR: OrchestratorClient(base_url, **options)}
        self._headers = {"authorization": f"Bearer {token}"}

    async def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response."""
        try:
            return await getattr(self._clients[service], python_method_name(rpc))(
                request, headers=_connect_headers(self._headers, affinity))
        except ConnectError as exc:
            raise _connect_error(exc) from None

    async def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> AsyncIterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        events = getattr(self._clients[service], python_method_name(rpc))(
            request, headers=_connect_headers(self._headers, affinity))
        try:
            async for message in events:
                yield message
        except ConnectError as exc:
            raise _connect_error(exc) from None
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    async def aclose(self) -> None:
        """Close the clients and their connection pool."""
        for client in self._clients.values():
            await client.close()
        await self._pool.aclose()


class ConnectTransport:
    """connectrpc's blocking clients over one pyqwest connection pool (binary protobuf)."""

    def __init__(self, base_url: str, token: str, timeout: float | None, ca_cert: CaCert | None = None) -> None:
        self._pool = SyncHTTPTransport(**_tls_options(base_url, ca_cert))  # its own, as the async transport's
        self._http = SyncClient(self._pool)
        options: dict[str, Any] = {"timeout_ms": _timeout_ms(timeout), "http_client": self._http,
                                   "read_max_bytes": MAX_MESSAGE_BYTES}
        self._clients = {MEMORY_STORE: MemoryStoreClientSync(base_url, **options),
                         ORCHESTRATOR: OrchestratorClientSync(base_url, **options)}
        self._headers = {"authorization": f"Bearer {token}"}

    def unary(self, service: str, rpc: str, request: Message, affinity: str = "") -> Any:
        """One request, one response."""
        try:
            return getattr(self._clients[service], python_method_name(rpc))(
                request, headers=_connect_headers(self._headers, affinity))
        except ConnectError as exc:
            raise _connect_error(exc) from None

    def stream(self, service: str, rpc: str, request: Message, affinity: str = "") -> Iterator[Any]:
        """One request, a stream of responses; closing the iterator cancels the call."""
        events = getattr(self._clients[service], python_method_name(rpc))(
            request, headers=_connect_headers(self._headers, affinity))
        try:
            yield from events
        except ConnectError as exc:
            raise _connect_error(exc) from None
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        """Close the clients and their connection pool."""
        for client in self._clients.values():
            client.close()
        self._pool.close()


def async_transport(url: str, token: str, timeout: float | None, ca_cert: CaCert | None = None) -> AsyncTransport:
    """The async transport a runtime URL names (ca_cert: the CA to trust for grpcs:// or https://)."""
    kind, address = parse_runtime_url(url)
    if kind == "connect":
        return AsyncConnectTransport(address, token, timeout, ca_cert)
    return AsyncGrpcTransport(address, token, timeout, _grpc_credentials(kind, ca_cert))


def sync_transport(url: str, token: str, timeout: float | None, ca_cert: CaCert | None = None) -> SyncTransport:
    """The blocking transport a runtime URL names (ca_cert: the CA to trust for grpcs:// or https://)."""
    kind, address = parse_runtime_url(url)
    if kind == "connect":
        return ConnectTransport(address, token, timeout, ca_cert)
    return GrpcTransport(address, token, timeout, _grpc_credentials(kind, ca_cert))
