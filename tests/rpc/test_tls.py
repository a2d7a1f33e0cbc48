"""Remote mode's runtime side: TLS on both RPC ports, the token over TLS, and the refusal to listen beyond
loopback without them. Real sockets on loopback, a CA and server certificate made by openssl in the test."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from pyruntime.client import RuntimeCallError, RuntimeClient, UnauthenticatedError
from pyruntime.errors import InvalidArgumentError
from pyruntime.rpc import RpcConfig, start_rpc_servers
from pyruntime.rpc.tls import TlsFiles, check_listen, tls_files
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import LoadStatus
from tests.model.test_serve_cli import RPC_ANY_PORT, Serve
from tests.rpc.conftest import TOKEN, Runtime, start_runtime
from tests.rpc.test_auth import session_services
from tests.support.tls import TestCertificates, make_certificates

SCOPE = AgentMemoryScope(user_id="player-1")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_runtime(tmp_path: Path, certificates: TestCertificates):
    runtime = start_runtime(tmp_path / "data", tls_cert=certificates.server_cert, tls_key=certificates.server_key)
    yield runtime
    runtime.handle.stop(0.5)


def _urls(runtime: Runtime) -> dict[str, str]:
    return {"grpc": f"grpcs://localhost:{runtime.handle.grpc_port}",
            "connect": f"https://localhost:{runtime.handle.connect_port}"}


@pytest.mark.parametrize("transport", ["grpc", "connect"])
def test_both_transports_serve_tls_with_the_token(tls_runtime: Runtime, certificates: TestCertificates,
                                                   transport: str) -> None:
    url = _urls(tls_runtime)[transport]
    with RuntimeClient(url, token=TOKEN, ca_cert=certificates.ca_cert, timeout=60) as client:
        assert client.health().ready
        result = client.apply_memory_tool("Teacher", {"action": "append", "content": "likes swords"}, scope=SCOPE)
        assert result.success
        loaded = client.load_state("Teacher", scope=SCOPE)
        assert loaded.status is LoadStatus.LOADED and loaded.state is not None
        assert "likes swords" in loaded.state.memory
    with RuntimeClient(url, token="wrong-token-0123456789", ca_cert=certificates.ca_cert.read_bytes(),
                       timeout=60) as stranger:
        with pytest.raises(UnauthenticatedError):
            stranger.load_state("Teacher", scope=SCOPE)
        assert stranger.health().ready  # health needs no token, over TLS as well


def test_connect_port_refuses_plain_http_and_untrusted_clients(tls_runtime: Runtime,
                                                                certificates: TestCertificates) -> None:
    port = tls_runtime.handle.connect_port
    assert tls_runtime.handle.connect_url.startswith("https://")
    with pytest.raises(httpx.HTTPError):  # a plain-HTTP request to a TLS port gets no HTTP answer
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    with pytest.raises(httpx.ConnectError):  # the system's roots do not know the private CA
        httpx.get(f"https://localhost:{port}/healthz", timeout=10)
    trust = ssl.create_default_context(cafile=certificates.ca_cert)
    answer = httpx.get(f"https://localhost:{port}/healthz", timeout=10, verify=trust)
    assert answer.status_code == 200 and answer.json()["ready"] is True
    missing = httpx.post(f"https://localhost:{port}/coreai.v1.Orchestrator/ListRoles", json={}, timeout=10,
                         verify=trust)
    assert missing.status_code == 401  # no token at all


@pytest.mark.parametrize("transport", ["grpc", "connect"])
def test_a_client_without_the_ca_cannot_call(tls_runtime: Runtime, transport: str) -> None:
    with RuntimeClient(_urls(tls_runtime)[transport], token=TOKEN, timeout=20) as client:
        with pytest.raises(RuntimeCallError):
            client.load_state("Teacher", scope=SCOPE)


def test_a_tls_connection_that_never_says_hello_is_closed_on_both_ports(tmp_path: Path,
                                                                      certificates: TestCertificates) -> None:
    # asyncio's own TLS handshake timeout is 60 s; the runtime's request timeout (0.5 s here) must apply instead.
    from pyruntime.net.limits import TransportLimits
    from tests.rpc.test_connection_limits import SHORT_S, closed_by_server, connect

    runtime = start_runtime(tmp_path / "data", tls_cert=certificates.server_cert, tls_key=certificates.server_key,
                            limits=TransportLimits(request_timeout_s=SHORT_S, idle_timeout_s=SHORT_S))
    try:
        for port in (runtime.handle.connect_port, runtime.handle.grpc_port):
            assert closed_by_server(connect(port), within=20.0), port
        with RuntimeClient(f"https://localhost:{runtime.handle.connect_port}", token=TOKEN,
                           ca_cert=certificates.ca_cert, timeout=60) as client:
            assert client.health().ready  # a real client still gets through
    finally:
        runtime.handle.stop(0.5)


def test_listening_beyond_loopback_needs_token_and_tls(certificates: TestCertificates, monkeypatch) -> None:
    monkeypatch.delenv("COREAI_RUNTIME_TOKEN", raising=False)
    tls = TlsFiles(certificates.server_cert, certificates.server_key)
    with pytest.raises(InvalidArgumentError, match="--tls-cert and --tls-key"):
        start_rpc_servers(session_services(), RpcConfig(host="0.0.0.0", grpc_port=0, connect_port=0,
                                                        token="server-build-token-0123"))
    with pytest.raises(InvalidArgumentError, match="requires an explicit token"):
        start_rpc_servers(session_services(), RpcConfig(host="0.0.0.0", grpc_port=0, connect_port=0, tls=tls))
    # Both given: accepted (checked without binding a non-loopback address; tests stay on loopback).
    check_listen("0.0.0.0", token_given=True, tls=tls)
    check_listen("192.0.2.10", token_given=True, tls=tls)
    check_listen("127.0.0.1", token_given=False, tls=None)  # loopback needs neither
    with pytest.raises(InvalidArgumentError, match="set COREAI_RUNTIME_TOKEN.*--tls-cert and --tls-key"):
        check_listen("::", token_given=False, tls=None)


def test_tls_files_are_checked_before_anything_starts(certificates: TestCertificates, tmp_path: Path) -> None:
    assert tls_files(None, None) is None
    with pytest.raises(InvalidArgumentError, match="--tls-key is missing"):
        tls_files(certificates.server_cert, None)
    with pytest.raises(InvalidArgumentError, match="--tls-cert is missing"):
        tls_files(None, certificates.server_key)
    with pytest.raises(InvalidArgumentError, match="--tls-key: no such file"):
        TlsFiles(certificates.server_cert, tmp_path / "nowhere.key").check()
    with pytest.raises(InvalidArgumentError, match="must be a PEM certificate and its"):
        TlsFiles(certificates.server_cert, certificates.ca_cert).check()  # not the matching key
    TlsFiles(certificates.server_cert, certificates.server_key).check()
    with pytest.raises(ssl.SSLError):  # the ssl module itself agrees the pair above is wrong
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certificates.server_cert,
                                                                             certificates.ca_cert)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--listen", "0.0.0.0"), {"COREAI_RUNTIME_TOKEN": "server-build-token-0123"},
         "--listen 0.0.0.0 is not loopback: pass --tls-cert and --tls-key"),
        (("--listen", "0.0.0.0"), {"COREAI_RUNTIME_TOKEN": ""}, "set COREAI_RUNTIME_TOKEN"),
        (("--tls-cert", "CERT"), {}, "--tls-key is missing"),
        (("--tls-cert", "CERT", "--tls-key", "CERT"), {}, "must be a PEM certificate"),
        (("--host", "0.0.0.0"), {}, "--host must be loopback"),
    ],
)
def test_serve_refuses_unsafe_listening(tmp_path: Path, certificates: TestCertificates, args, env, message) -> None:
    args = tuple(str(certificates.server_cert) if a == "CERT" else a for a in args)
    serve = Serve(tmp_path, "--no-model", "--session-only", *RPC_ANY_PORT, *args, env=env)
    assert serve.wait() == 2
    assert message in serve.err
    assert serve.stdout_lines() == []


def test_serve_over_tls_end_to_end(tmp_path: Path, certificates: TestCertificates) -> None:
    serve = Serve(tmp_path, "--no-model", "--data-dir", str(tmp_path / "data"), *RPC_ANY_PORT,
                  "--tls-cert", str(certificates.server_cert), "--tls-key", str(certificates.server_key),
                  env={"COREAI_RUNTIME_TOKEN": TOKEN})
    try:
        ready = serve.ready()
        for url in (f"grpcs://localhost:{ready['grpc_port']}", f"https://localhost:{ready['connect_port']}"):
            with RuntimeClient(url, token=TOKEN, ca_cert=certificates.ca_cert, timeout=60) as client:
                assert client.apply_memory_tool("Teacher", {"action": "append", "content": "tls"}, scope=SCOPE).success
        assert "TLS" in serve.err
    finally:
        serve.process.terminate()
        assert serve.wait() == 0
