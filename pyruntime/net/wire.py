"""What the transports and the client share: the method-name mapping, the refusal text and the retry hint."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status

UNAUTHENTICATED_MESSAGE = "missing or wrong bearer token (send 'authorization: Bearer <token>')"


def python_method_name(rpc_name: str) -> str:
    """The service's method name of an RPC: `ApplyMemoryTool` -> `apply_memory_tool`."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in rpc_name).lstrip("_")


# The retry hint of a refusal travels as the standard `google.rpc.RetryInfo` detail: gRPC in the
# `grpc-status-details-bin` trailer (a `google.rpc.Status`, what grpcio-status writes), Connect in the error's
# `details` (`{"type": "google.rpc.RetryInfo", "value": <base64>}`), so any gRPC or Connect client can read it.
RETRY_INFO_TYPE = "google.rpc.RetryInfo"
GRPC_STATUS_DETAILS_KEY = "grpc-status-details-bin"


def retry_info(seconds: float) -> RetryInfo:
    """The `RetryInfo` detail for a retry after `seconds`."""
    info = RetryInfo()
    info.retry_delay.FromNanoseconds(max(0, round(seconds * 1e9)))
    return info


def retry_after_seconds(info: RetryInfo) -> float:
    """The delay a `RetryInfo` detail asks for, in seconds."""
    return float(info.retry_delay.ToNanoseconds()) / 1e9


def grpc_status_details(code: int, message: str, retry_after_s: float) -> bytes:
    """A serialized `google.rpc.Status` carrying a `RetryInfo` (the `grpc-status-details-bin` trailer's value)."""
    status = Status(code=code, message=message)
    status.details.add().Pack(retry_info(retry_after_s))
    return bytes(status.SerializeToString())


def retry_after_in_status(data: bytes) -> float | None:
    """The retry delay in a serialized `google.rpc.Status` (None: none, or not a status)."""
    try:
        status = Status.FromString(data)
    except DecodeError:
        return None
    for detail in status.details:
        info = RetryInfo()
        if detail.Unpack(info):  # False for a detail of another type
            return retry_after_seconds(info)
    return None
