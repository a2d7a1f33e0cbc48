"""Remote mode against a server certificate signed through an intermediate CA: a private PKI
rarely signs servers with its root. The server sends its chain (leaf + intermediate); the game trusts the root only.
The intermediate links the leaf to the root; it never becomes an authority of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.model.test_serve_cli import RPC_ANY_PORT, Serve
from tests.support.tls import make_certificates

TOKEN = "remote-chain-token-0123456789"


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def _pki_with_an_intermediate(folder: Path) -> tuple[Path, Path, Path, Path]:
    """(root CA, chain the server sends: leaf + intermediate, the leaf alone, the leaf's key)."""
    folder.mkdir(parents=True)
    _openssl(folder, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "root.key", "-out", "root.pem",
             "-days", "1", "-subj", "/CN=CoreAI Test Root", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    (folder / "ca.ext").write_text(
        "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n")
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "intermediate.key", "-out", "intermediate.csr",
             "-subj", "/CN=CoreAI Test Intermediate")
    _openssl(folder, "x509", "-req", "-in", "intermediate.csr", "-CA", "root.pem", "-CAkey", "root.key",
             "-CAcreateserial", "-out", "intermediate.pem", "-days", "1", "-extfile", "ca.ext")
    (folder / "leaf.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                     "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr",
             "-subj", "/CN=localhost")
    _openssl(folder, "x509", "-req", "-in", "leaf.csr", "-CA", "intermediate.pem", "-CAkey", "intermediate.key",
             "-CAcreateserial", "-out", "leaf.pem", "-days", "1", "-extfile", "leaf.ext")
    chain = folder / "chain.pem"
    chain.write_text((folder / "leaf.pem").read_text() + (folder / "intermediate.pem").read_text())
    return folder / "root.pem", chain, folder / "leaf.pem", folder / "leaf.key"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    return _pki_with_an_intermediate(tmp_path_factory.mktemp("pki") / "ca")


def _serve(folder: Path, cert: Path, key: Path) -> Serve:
    return Serve(folder, "--no-model", "--session-only", *RPC_ANY_PORT, "--tls-cert", str(cert), "--tls-key", str(key),
                 env={"COREAI_RUNTIME_TOKEN": TOKEN})


def _connect(port: int, trusted: Path):
    from CoreAI.Launcher import RemoteRuntime, RemoteRuntimeOptions
    from System import TimeSpan

    options = RemoteRuntimeOptions()
    options.Url, options.Token = f"https://localhost:{port}", TOKEN
    options.TrustedCertificatePem = trusted.read_text()
    options.ConnectTimeout = TimeSpan.FromSeconds(3)
    return RemoteRuntime(options)


def test_a_server_signed_through_an_intermediate_is_accepted_with_only_the_root_trusted(assemblies, pki,
                                                                                         tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLaunchException

    from tests.unity.conftest import wait

    root, chain, _, key = pki
    serve = _serve(tmp_path, chain, key)
    try:
        port = serve.ready()["connect_port"]
        remote = _connect(port, root)
        assert remote.Connect().IsRemote
        client = remote.CreateClient()
        try:
            assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        finally:
            client.Dispose()
        stranger = make_certificates(tmp_path / "stranger").ca_cert  # another PKI's root: still refused
        with pytest.raises(RuntimeLaunchException, match="did not answer"):
            _connect(port, stranger).Connect()
    finally:
        serve.process.terminate()
        serve.wait()


def test_a_server_that_does_not_send_its_intermediate_is_refused(assemblies, pki, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLaunchException

    root, _, leaf, key = pki
    serve = _serve(tmp_path, leaf, key)  # the leaf alone: nothing links it to the trusted root
    try:
        port = serve.ready()["connect_port"]
        with pytest.raises(RuntimeLaunchException, match="did not answer"):
            _connect(port, root).Connect()
    finally:
        serve.process.terminate()
        serve.wait()
