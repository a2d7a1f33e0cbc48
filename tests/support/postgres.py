"""A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a temp folder, a unix socket only.

The server binaries come from the distribution's `postgresql` package (`/usr/lib/postgresql/<v>/bin`),
or `$COREAI_PG_BIN`. The cluster listens on no TCP port at all (`listen_addresses=''`): its unix
socket lives in its own temp folder, so parallel test runs never collide on a port. PostgreSQL
refuses to run as root, so as root the server runs as `nobody` (`runuser`, util-linux, on every
Debian): the folder is handed to that user. Missing binaries raise PostgresMissing, which the
fixtures (tests/conftest.py) turn into a failure (never a skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

SERVER_USER = "nobody"  # who runs the server when we are root
SUPERUSER = "coreai"


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bin_dir() -> Path:
    """The folder holding initdb, pg_ctl and postgres (newest installed version first)."""
    override = os.environ.get("COREAI_PG_BIN")
    candidates = [Path(override)] if override else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name),
                         reverse=True)
    which = shutil.which("initdb")
    if which:
        candidates.append(Path(which).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresMissing(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin, $COREAI_PG_BIN or PATH: "
        "install them (Debian/Ubuntu: apt-get install -y postgresql; scripts/bootstrap.sh does it)")


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


class PostgresCluster:
    """One started cluster; `database()` gives each test (or run) a fresh database URL."""

    def __init__(self, *, durable: bool = False, max_connections: int = 200) -> None:
        self.bin = find_bin_dir()
        self._as_root = os.geteuid() == 0
        # As root, under /tmp: a $TMPDIR in root's home would be closed to the server's user.
        self.folder = Path(tempfile.mkdtemp(prefix="coreai-pg-", dir="/tmp" if self._as_root else None))
        self.data = self.folder / "data"
        self.port = 5432  # names the socket file only: no TCP listener
        if self._as_root:
            shutil.chown(self.folder, SERVER_USER)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--no-instructions")
        settings = [f"-k {self.folder}", f"-p {self.port}", "-c listen_addresses=''",
                    f"-c max_connections={max_connections}"]
        if not durable:  # tests: what is measured is the client's behaviour, not the disk's
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", " ".join(settings),
                  "-w", "-t", "60", "start")

    def restart(self) -> None:
        """Stop the server (ending every connection) and start it again on the same socket."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-m", "fast", "-w", "restart")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self._as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.folder)
        if result.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr[-2000:]}\n{tail}")

    def url(self, database: str = "postgres") -> str:
        """The libpq URL of database (over the cluster's unix socket)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.folder}&port={self.port}"

    def database(self, prefix: str = "t") -> str:
        """Create a fresh, empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop the database of url (its connections are ended first)."""
        import psycopg

        name = url.split("/")[3].split("?")[0]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
