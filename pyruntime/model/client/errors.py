"""Errors of talking to a model server; messages carry status codes and numbers, never prompts."""

from __future__ import annotations

from pyruntime.errors import CoreAIError


class ModelError(CoreAIError):
    """The model server failed a request: `status` is the HTTP status (None if not HTTP).

    `detail` is the server's own message, kept out of `str(error)` because it may quote the
    request; do not log it.
    """

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class ModelUnavailableError(ModelError):
    """The model server cannot be reached, died mid-request, or did not answer in time.

    `retry_after_s` is a hint when the server is expected back (a watchdog restart), else None.
    """

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message, status=status, detail=detail)
        self.retry_after_s = retry_after_s


class ModelStalledError(ModelError):
    """A generation produced no visible text for too long; the runtime stopped it."""


class ContextOverflowError(ModelError):
    """The request does not fit the model's context window; shrink the prompt or max_tokens."""


class IncompleteStreamError(ModelError):
    """A stream ended without a finish_reason: the reply was cut and must not be used as complete."""
