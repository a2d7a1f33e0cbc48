"""The token and the network rules: file mode, environment, non-loopback listening, Host/Origin parsing."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError
from pyruntime.net.auth import (
    TOKEN_ENV,
    bearer_matches,
    default_token_file,
    host_header_allowed,
    origin_allowed,
    read_token_file,
    resolve_token,
    write_token_file,
)
from pyruntime.rpc import RpcConfig, start_rpc_servers
from pyruntime.service import RuntimeServices
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores


def session_services() -> RuntimeServices:
    return RuntimeServices.create(open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None))


def test_generated_token_is_written_for_this_user_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    token_file = default_token_file(tmp_path)
    token_file.parent.mkdir(parents=True)
    token_file.write_text("stale")
    token_file.chmod(0o644)
    services = session_services()
    handle = start_rpc_servers(services, RpcConfig(grpc_port=0, connect_port=0, token_file=token_file))
    try:
        assert read_token_file(token_file) == handle.token and len(handle.token) >= 32
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert token_file == tmp_path / "CoreAI" / "runtime" / "token"
    finally:
        handle.stop(0.5)
        services.close()
    second = start_rpc_servers(services := session_services(), RpcConfig(grpc_port=0, connect_port=0))
    try:
        assert second.token != handle.token  # a fresh secret per start
    finally:
        second.stop(0.5)
        services.close()


def test_token_from_the_environment_or_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "env-token-0123456789")
    assert resolve_token() == ("env-token-0123456789", True)
    assert resolve_token("launcher-token-012345") == ("launcher-token-012345", True)
    with pytest.raises(InvalidArgumentError, match="at least 16"):
        resolve_token("short")


def test_listening_beyond_loopback_requires_an_explicit_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(InvalidArgumentError, match="requires an explicit token"):
        start_rpc_servers(session_services(), RpcConfig(host="0.0.0.0", grpc_port=0, connect_port=0))
    # With a token it still needs TLS; both together are accepted (tests/rpc/test_tls.py).


def test_bearer_header_parsing() -> None:
    token = "abcdefghijklmnop"
    assert bearer_matches(f"Bearer {token}", token) and bearer_matches(f"bearer  {token} ", token)
    for header in (None, "", token, f"Basic {token}", f"Bearer {token}x", "Bearer", f"Bearer {token[:-1]}"):
        assert not bearer_matches(header, token)


def test_host_and_origin_rules() -> None:
    assert host_header_allowed("127.0.0.1:8000", 8000) and host_header_allowed("localhost:8000", 8000)
    assert host_header_allowed("[::1]:8000", 8000)
    for host in (None, "", "127.0.0.1", "127.0.0.1:8001", "evil.test:8000", "127.0.0.1.evil.test:8000",
                 "localhost:abc", "[::1]"):
        assert not host_header_allowed(host, 8000), host
    assert origin_allowed(None) and origin_allowed("http://localhost:3000") and origin_allowed("https://127.0.0.1")
    for origin in ("null", "https://evil.test", "file://", "http://localhost.evil.test", "chrome-extension://x"):
        assert not origin_allowed(origin), origin


def test_a_planted_link_never_receives_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: the token used to be written through `.token.<pid>.tmp` opened with O_TRUNC (a link planted
    # under that name received it), and the runtime folder was chmod-ed through a link.
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    outside = tmp_path / "elsewhere"
    outside.mkdir(mode=0o755)
    (outside / "victim").write_text("keep me")
    token_file = default_token_file(tmp_path)
    token_file.parent.mkdir(parents=True)
    token_file.symlink_to(outside / "victim")
    (token_file.parent / f".token.{os.getpid()}.tmp").symlink_to(outside / "victim")
    services = session_services()
    handle = start_rpc_servers(services, RpcConfig(grpc_port=0, connect_port=0, token_file=token_file,
                                                   token_root=tmp_path / "CoreAI"))
    try:
        assert not token_file.is_symlink() and read_token_file(token_file) == handle.token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    finally:
        handle.stop(0.5)
        services.close()
    assert (outside / "victim").read_text() == "keep me"
    # A runtime folder that is a link is refused, and the folder it names keeps its rights.
    shutil.rmtree(token_file.parent)
    token_file.parent.symlink_to(outside, target_is_directory=True)
    with pytest.raises(MemoryUnreadableError, match="is a link"):
        write_token_file(token_file, "token-0123456789abcdef", root=tmp_path / "CoreAI")
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755 and sorted(p.name for p in outside.iterdir()) == ["victim"]


def test_a_token_file_that_is_a_fifo_or_too_large_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="FIFO"):
        read_token_file(fifo)  # never opened: it would block until a writer comes
    huge = tmp_path / "huge"
    with huge.open("wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(OSError, match="over its limit"):
        read_token_file(huge)


def test_token_file_write_replaces_atomically(tmp_path: Path) -> None:
    path = write_token_file(tmp_path / "t" / "token", "first-token-0123456")
    write_token_file(path, "second-token-012345")
    assert read_token_file(path) == "second-token-012345"
    assert [p.name for p in path.parent.iterdir()] == ["token"]
