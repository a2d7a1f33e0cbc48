"""A real nginx for tests: the distribution's binary, run in the foreground from a temp folder.

The binary comes from Debian's `nginx` package (`/usr/sbin/nginx`), `$COREAI_NGINX`, or PATH; missing,
it raises NginxMissing, which the tests turn into a failure (never a skip), as for PostgreSQL. The
test's site configuration (an http-block include, as in /etc/nginx/conf.d) is wrapped in a main
configuration that keeps every file nginx writes (pid, logs, temp bodies) in the folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 30.0


class NginxMissing(RuntimeError):
    """No nginx binary on this machine."""


def find_nginx() -> Path:
    """The nginx binary: $COREAI_NGINX, /usr/sbin/nginx, or the one on PATH."""
    candidates = [os.environ.get("COREAI_NGINX", ""), "/usr/sbin/nginx", shutil.which("nginx") or ""]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise NginxMissing("nginx not found in $COREAI_NGINX, /usr/sbin/nginx or PATH: install it "
                       "(Debian/Ubuntu: apt-get install -y nginx; scripts/bootstrap.sh does it)")


def _main_conf(folder: Path, site: Path) -> str:
    # As root the workers would switch to `nobody`, who cannot enter the test's private temp folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(f"    {kind}_temp_path {folder / 'temp' / kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"{user}daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\n"
            f"error_log {folder / 'error.log'} info;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n{temp}\n    access_log off;\n    include {site};\n}}\n")


class Nginx:
    """nginx serving `site` (the text of an http-block include) until `stop()`."""

    def __init__(self, folder: Path, site: str, ports: list[tuple[str, int]]) -> None:
        """Write the configuration under folder, check it (`nginx -t`), start, and wait until `ports` accept."""
        self.binary = find_nginx()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "temp").mkdir(exist_ok=True)
        self.site = folder / "site.conf"
        self.site.write_text(site, encoding="utf-8")
        self.conf = folder / "nginx.conf"
        self.conf.write_text(_main_conf(folder, self.site), encoding="utf-8")
        command = [str(self.binary), "-p", str(folder), "-c", str(self.conf), "-e", str(folder / "error.log")]
        check = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=60)
        if check.returncode != 0:
            raise RuntimeError(f"nginx refused the configuration:\n{check.stderr}")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for host, port in ports:
                self._wait_listening(host, port)
        except BaseException:
            self.stop()
            raise

    def _wait_listening(self, host: str, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited ({self.process.returncode}):\n{self.error_log()}")
            try:
                with socket.create_connection((host, port), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not listen on {host}:{port}:\n{self.error_log()}") from None
                time.sleep(0.05)

    def error_log(self) -> str:
        """The tail of nginx's error log (for a failure's message)."""
        path = self.folder / "error.log"
        return path.read_text(errors="replace")[-4000:] if path.is_file() else ""

    def stop(self) -> None:
        """Stop at once (SIGTERM: nginx's fast shutdown) and wait."""
        terminate(self.process)


def terminate(process: subprocess.Popen[Any]) -> None:
    """SIGTERM a child and wait for it; SIGKILL after 30 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
