"""Who may call the runtime: the bearer token, and the Host/Origin checks that keep web pages out.

A web page in the player's browser can send requests to 127.0.0.1; it cannot read our token file
and cannot set an `Authorization` header cross-origin without a preflight we never allow. On top,
HTTP requests whose `Host` is not loopback with our port (DNS rebinding) or that carry a
non-loopback `Origin` (CSRF) are refused before anything else happens.
"""

from __future__ import annotations

import enum
import errno
import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from pyruntime.errors import InvalidArgumentError
from pyruntime.stores import confined, fileio

TOKEN_ENV = "COREAI_RUNTIME_TOKEN"
TOKEN_RELATIVE_PATH = Path("CoreAI") / "runtime" / "token"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def default_token_file(data_dir: Path) -> Path:
    """`<data-dir>/CoreAI/runtime/token`."""
    return Path(data_dir) / TOKEN_RELATIVE_PATH


def generate_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """token, refused when it is too short to be a secret or not printable ASCII (it travels in a header)."""
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidArgumentError(f"the runtime token must be at least {MIN_TOKEN_CHARS} characters")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise InvalidArgumentError("the runtime token must be printable ASCII without spaces")
    return token


MAX_TOKEN_FILE_BYTES = 4096


def write_token_file(path: Path, token: str, *, root: Path | None = None) -> Path:
    """Write token to path, readable by this user only (0600, folder 0700), replacing any older file atomically.

    root: the data folder path is in (`<data-dir>/CoreAI`): no link below it is followed, so a planted
    link can neither receive the token nor have its target's rights changed. The temp file is new
    (O_EXCL | O_NOFOLLOW, 0600 from its creation), so a file planted under its name is never written.
    """
    path = Path(path)
    with confined.open_folder(path.parent, root, create=True) as folder:
        folder.chmod(0o700)
    fileio.atomic_write(path, token.encode("ascii"), root=root, limit=MAX_TOKEN_FILE_BYTES)
    return path


def read_token_file(path: Path) -> str:
    """The token a running runtime wrote (for clients on the same machine); a FIFO or device is never opened."""
    # The path is the caller's: links the user made are followed, but only to a small regular file.
    try:
        data = fileio.read_bytes(Path(os.path.realpath(path)), limit=MAX_TOKEN_FILE_BYTES, what="token file")
    except confined.UnsafeSaveError as exc:
        raise OSError(errno.EINVAL, str(exc)) from None  # an OSError, like any token file that cannot be read
    if data is None:
        raise FileNotFoundError(errno.ENOENT, "the token file does not exist")
    return data.decode("ascii").strip()


def resolve_token(explicit: str | None = None) -> tuple[str, bool]:
    """(token, was_given): the launcher's token, else $COREAI_RUNTIME_TOKEN, else a fresh one."""
    given = explicit if explicit else os.environ.get(TOKEN_ENV, "")
    if given:
        return check_token(given.strip()), True
    return generate_token(), False


def bearer_matches(header: str | None, token: str) -> bool:
    """True when header is `Bearer <token>` (constant-time comparison)."""
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode("ascii"))


def is_loopback_host(host: str) -> bool:
    """True for localhost and loopback IP literals (with or without brackets)."""
    name = host.strip().lower().strip("[]")
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HeaderCheck(enum.Enum):
    """The verdict on a Host or Origin header."""

    ALLOWED = "allowed"
    FOREIGN = "foreign"  # well-formed, but not loopback (or not our port)
    MALFORMED = "malformed"  # cannot be parsed at all (`[`, `http://[`, `[127.0.0.1]:P`): a 400, never a crash


def check_host_header(host: str | None, port: int) -> HeaderCheck:
    """Whether the Host header names a loopback host with our port (browsers always send the port)."""
    if not host:
        return HeaderCheck.FOREIGN
    if any(ch in host for ch in "/?#@\\ "):  # a Host is `name[:port]`: anything else is not one
        return HeaderCheck.MALFORMED
    try:
        parts = urlsplit(f"//{host.strip()}")
        hostname, given_port = parts.hostname, parts.port
    except ValueError:
        return HeaderCheck.MALFORMED
    if not hostname:
        return HeaderCheck.MALFORMED
    return HeaderCheck.ALLOWED if is_loopback_host(hostname) and given_port == port else HeaderCheck.FOREIGN


def check_origin(origin: str | None) -> HeaderCheck:
    """Allowed without an Origin header, or with an http(s) loopback origin."""
    if origin is None:
        return HeaderCheck.ALLOWED
    try:
        parts = urlsplit(origin.strip())
        hostname = parts.hostname
        parts.port  # noqa: B018 - parsed for its ValueError on a malformed port
    except ValueError:
        return HeaderCheck.MALFORMED
    if parts.scheme in ("http", "https") and hostname is not None and is_loopback_host(hostname):
        return HeaderCheck.ALLOWED
    return HeaderCheck.FOREIGN


def host_header_allowed(host: str | None, port: int) -> bool:
    """True when the Host header names a loopback host with our port (malformed: False, never an exception)."""
    return check_host_header(host, port) is HeaderCheck.ALLOWED


def origin_allowed(origin: str | None) -> bool:
    """True when there is no Origin header, or it is an http(s) loopback origin (malformed: False)."""
    return check_origin(origin) is HeaderCheck.ALLOWED
