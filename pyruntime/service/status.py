"""Transport-neutral call status: the code and message a failed RPC ends with, and how core errors map to it.

The codes are gRPC's (Connect uses the same set). Mapping, in one place:

| core error | status |
|---|---|
| InvalidArgumentError (blank role, bad scope, malformed arguments or snapshot) | INVALID_ARGUMENT |
| NotFoundError (unknown version, unknown key) | NOT_FOUND |
| MemoryUnreadableError (the document exists but cannot be read) | FAILED_PRECONDITION |
| ToolCallEndedError (a game-tool result after its call timed out or its turn ended) | FAILED_PRECONDITION |
| AlreadyExistsError (a second result for one game-tool call) | ALREADY_EXISTS |
| LimitExceededError (MaxMemoryChars, request size) | RESOURCE_EXHAUSTED |
| DiskFullError (the disk or quota is full; its message is the same on every path) | UNAVAILABLE |
| ModelError / PersistenceError / OSError (model down, disk failing) | UNAVAILABLE |
| anything else (a bug) | INTERNAL, with a generic message; the type is logged, never a trace on the wire |
"""

from __future__ import annotations

import logging
import traceback

from pyruntime.errors import (
    AlreadyExistsError,
    CoreAIError,
    DiskFullError,
    InvalidArgumentError,
    LimitExceededError,
    MemoryUnreadableError,
    NotFoundError,
    PersistenceError,
    ToolCallEndedError,
)
from pyruntime.status_code import StatusCode

__all__ = ["MAX_MESSAGE_CHARS", "ServiceError", "StatusCode", "status_for"]

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 1000
"""A status message longer than this is clipped (messages may echo a model's argument)."""




class ServiceError(Exception):
    """A call failed with `code`; `message` names the problem and is safe to send to the caller.

    `retry_after_s`: how long the caller should wait before it tries again, sent as the standard
    `google.rpc.RetryInfo` detail on both transports (None: no hint).
    """

    def __init__(self, code: StatusCode, message: str, *, retry_after_s: float | None = None) -> None:
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + f"…[+{len(message) - MAX_MESSAGE_CHARS} chars]"
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    def __repr__(self) -> str:
        return f"ServiceError({self.code.name}, {self.message!r})"


def _model_error_type() -> type[BaseException] | None:
    try:  # The model package is optional for a store-only runtime.
        from pyruntime.model.client.errors import ModelError
    except ImportError:  # pragma: no cover - depends on what is installed
        return None
    return ModelError


def status_for(exc: BaseException) -> ServiceError:
    """The status a core error becomes; an unexpected exception is INTERNAL with a generic message."""
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, InvalidArgumentError):
        return ServiceError(StatusCode.INVALID_ARGUMENT, str(exc))
    if isinstance(exc, NotFoundError):
        return ServiceError(StatusCode.NOT_FOUND, str(exc))
    if isinstance(exc, MemoryUnreadableError | ToolCallEndedError):
        return ServiceError(StatusCode.FAILED_PRECONDITION, str(exc))
    if isinstance(exc, AlreadyExistsError):
        return ServiceError(StatusCode.ALREADY_EXISTS, str(exc))
    if isinstance(exc, LimitExceededError):
        return ServiceError(StatusCode.RESOURCE_EXHAUSTED, str(exc))
    model_error = _model_error_type()
    if model_error is not None and isinstance(exc, model_error):
        return ServiceError(StatusCode.UNAVAILABLE, f"the model is unavailable: {exc}")
    if isinstance(exc, DiskFullError):
        return ServiceError(StatusCode.UNAVAILABLE, str(exc))  # the same words as the memory tool's
    if isinstance(exc, PersistenceError):
        return ServiceError(StatusCode.UNAVAILABLE, f"storage is unavailable: {exc}")
    if isinstance(exc, OSError):
        # The OS message can carry a path (a key stem): send only the errno name.
        return ServiceError(StatusCode.UNAVAILABLE, f"storage is unavailable ({type(exc).__name__}, errno {exc.errno})")
    if isinstance(exc, CoreAIError):
        return ServiceError(StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
    # Frames only: the exception's message (and so any content it quotes) stays out of the log.
    logger.error("unexpected %s while serving a call:\n%s", type(exc).__name__,
                 "".join(traceback.format_tb(exc.__traceback__)))
    return ServiceError(StatusCode.INTERNAL, f"internal error ({type(exc).__name__})")
