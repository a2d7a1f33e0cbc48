"""TLS for the two RPC ports, and the rule for listening beyond loopback: token AND TLS, or refuse to start.

A runtime on a real network address (a headless game server, remote mode for consoles and phones) is
reached by clients the player does not control: the bearer token proves the caller, TLS keeps that
token and the players' saves off the wire. Loopback may use TLS too; it never requires it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from pyruntime.errors import InvalidArgumentError
from pyruntime.net.auth import TOKEN_ENV, is_loopback_host


@dataclass(frozen=True)
class TlsFiles:
    """The PEM certificate (chain) and private key both RPC ports serve with."""

    cert: Path
    key: Path

    def check(self) -> None:
        """InvalidArgumentError naming --tls-cert/--tls-key when the files are missing or do not form a key pair."""
        for flag, path in (("--tls-cert", self.cert), ("--tls-key", self.key)):
            if not Path(path).is_file():
                raise InvalidArgumentError(f"{flag}: no such file")
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, OSError, ValueError):  # the reason would quote file contents or paths
            raise InvalidArgumentError(
                "--tls-cert and --tls-key must be a PEM certificate and its unencrypted PEM private key") from None

    def read(self) -> tuple[bytes, bytes]:
        """(private key, certificate chain) as PEM bytes, the pair grpc.ssl_server_credentials takes."""
        return Path(self.key).read_bytes(), Path(self.cert).read_bytes()


def tls_files(cert: Path | None, key: Path | None) -> TlsFiles | None:
    """The TLS files of --tls-cert/--tls-key: both or neither (InvalidArgumentError naming the one missing)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        missing = "--tls-cert" if cert is None else "--tls-key"
        raise InvalidArgumentError(f"TLS needs both --tls-cert and --tls-key: {missing} is missing")
    return TlsFiles(Path(cert), Path(key))


def check_listen(host: str, *, token_given: bool, tls: TlsFiles | None) -> None:
    """Refuse a non-loopback listen address without an explicit token and TLS; the message names what is missing."""
    if is_loopback_host(host):
        return
    missing = []
    if not token_given:
        missing.append(f"set {TOKEN_ENV} (a generated token is only for loopback)")
    if tls is None:
        missing.append("pass --tls-cert and --tls-key (the token must not cross a network in clear text)")
    if missing:
        raise InvalidArgumentError(f"--listen {host} is not loopback: " + "; ".join(missing))
