"""Errors the client raises: one class per status, each also the core error of the same meaning.

`except InvalidArgumentError` catches a bad request whether the core raised it in-process or the
runtime answered INVALID_ARGUMENT over either transport; `except RuntimeCallError` catches every
failed call, with `.code` the transport-neutral status.
"""

from __future__ import annotations

from pyruntime.errors import (
    CoreAIError,
    InvalidArgumentError,
    LimitExceededError,
    MemoryUnreadableError,
    NotFoundError,
)
from pyruntime.status_code import StatusCode


class RuntimeCallError(CoreAIError):
    """A call to the runtime failed with `code`; the message is the runtime's.

    `retry_after`: seconds the runtime asks the caller to wait before trying again (its `google.rpc.RetryInfo`
    detail; a refused turn carries one), None when it gave no hint.
    """

    code: StatusCode = StatusCode.UNKNOWN

    def __init__(self, message: str, code: StatusCode | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.retry_after = retry_after


class RuntimeInvalidArgumentError(RuntimeCallError, InvalidArgumentError):
    """INVALID_ARGUMENT: the request was malformed; nothing was changed."""

    code = StatusCode.INVALID_ARGUMENT


class RuntimeNotFoundError(RuntimeCallError, NotFoundError):
    """NOT_FOUND: an unknown version or a key without a document."""

    code = StatusCode.NOT_FOUND


class RuntimeMemoryUnreadableError(RuntimeCallError, MemoryUnreadableError):
    """FAILED_PRECONDITION: the memory document exists but cannot be read."""

    code = StatusCode.FAILED_PRECONDITION


class RuntimeLimitExceededError(RuntimeCallError, LimitExceededError):
    """RESOURCE_EXHAUSTED: MaxMemoryChars, the request size limit, or a turn the runtime cannot take now
    (`retry_after` says when to send it again)."""

    code = StatusCode.RESOURCE_EXHAUSTED


class UnauthenticatedError(RuntimeCallError):
    """UNAUTHENTICATED: missing or wrong bearer token."""

    code = StatusCode.UNAUTHENTICATED


class PermissionDeniedError(RuntimeCallError):
    """PERMISSION_DENIED: refused (foreign Host or Origin)."""

    code = StatusCode.PERMISSION_DENIED


class RuntimeUnavailableError(RuntimeCallError):
    """UNAVAILABLE: the runtime, its model or its storage cannot serve the call now."""

    code = StatusCode.UNAVAILABLE


_BY_CODE: dict[StatusCode, type[RuntimeCallError]] = {
    cls.code: cls
    for cls in (RuntimeInvalidArgumentError, RuntimeNotFoundError, RuntimeMemoryUnreadableError,
                RuntimeLimitExceededError, UnauthenticatedError, PermissionDeniedError, RuntimeUnavailableError)
}


def error_for(code: StatusCode, message: str, retry_after: float | None = None) -> RuntimeCallError:
    """The exception of a failed call's status (and its retry hint, if it carried one)."""
    cls = _BY_CODE.get(code)
    # An unmapped code (DEADLINE_EXCEEDED, CANCELLED, INTERNAL, ...) is named in the message too.
    if cls is not None:
        return cls(message, retry_after=retry_after)
    return RuntimeCallError(f"{code.name}: {message}", code, retry_after=retry_after)


def status_code_named(name: str) -> StatusCode:
    """The StatusCode of a gRPC or Connect code name (`CANCELED` and `canceled` included)."""
    upper = name.upper()
    if upper == "CANCELED":
        return StatusCode.CANCELLED
    return StatusCode[upper] if upper in StatusCode.__members__ else StatusCode.UNKNOWN
