"""A private CA and a server certificate it signed (for localhost and 127.0.0.1), made with the openssl CLI.

The real shape of a remote runtime's TLS: clients trust the CA, the server presents a leaf the CA signed
(a self-signed leaf is the degenerate case of the same check). Keys are unencrypted PEM, valid one day.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL_TIMEOUT_S = 60


@dataclass(frozen=True)
class TestCertificates:
    """Paths of the CA certificate, the server's certificate and the server's private key (PEM)."""

    __test__ = False  # not a pytest test class

    ca_cert: Path
    server_cert: Path
    server_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)


def make_certificates(folder: Path, *, names: str = "DNS:localhost,IP:127.0.0.1") -> TestCertificates:
    """A fresh CA and a server certificate for `names` (subjectAltName syntax) under folder."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is needed to make test certificates (apt install openssl)")
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=CoreAI Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=folder)
    (folder / "server.ext").write_text(
        f"subjectAltName={names}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n", encoding="ascii")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "1", "-extfile", "server.ext", cwd=folder)
    return TestCertificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")
