"""Logging setup: text or JSON lines on stderr, with the trace id of the turn on every line logged inside it.

The trace id lives in a context variable: asyncio tasks (and `asyncio.to_thread`) copy it, so every
line logged while a turn runs carries it, whichever module logs. Only the trace id is added: never
player text, role ids or user ids (the runtime's own messages avoid them too).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import IO

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(trace_suffix)s: %(message)s"

_TRACE_ID: ContextVar[str] = ContextVar("coreai_trace_id", default="")
_PLAIN_TRACE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,64}")


def new_trace_id() -> str:
    """A fresh random trace id (16 hex digits) for a turn the client gave none."""
    return secrets.token_hex(8)


def loggable_trace_id(trace_id: str) -> str:
    """The trace id as logs show it: itself when it is a plain token, else a hash (a client may put text in it)."""
    if _PLAIN_TRACE_ID.fullmatch(trace_id):
        return trace_id
    return "h-" + hashlib.sha256(trace_id.encode("utf-8", "replace")).hexdigest()[:16]


def current_trace_id() -> str:
    """The trace id of the turn running in this context ("" outside a turn)."""
    return _TRACE_ID.get()


@contextlib.contextmanager
def trace_context(trace_id: str) -> Iterator[None]:
    """Every line logged in this block (and in tasks it starts) carries trace_id."""
    token = _TRACE_ID.set(loggable_trace_id(trace_id) if trace_id else "")
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # an async generator closed from another context: nothing to undo
            _TRACE_ID.reset(token)


class TraceIdFilter(logging.Filter):
    """Adds `trace_id` (and `trace_suffix` for the text format) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keeps the record; only annotates it."""
        trace = _TRACE_ID.get()
        record.trace_id = trace
        record.trace_suffix = f" [trace {trace}]" if trace else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, trace_id (inside a turn), exc (with a traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace = getattr(record, "trace_id", "")
        if trace:
            entry["trace_id"] = trace
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Replace the root handlers with one on stream (stderr): `fmt` is text or json, `level` a name."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}")
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(TraceIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
