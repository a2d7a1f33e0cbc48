"""Facts about the real machine, gathered for `plan` (which decides from them without touching anything)."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from .plan import Host

# The programs whose presence the plan asks about (package managers, compilers, build and test tools).
COMMANDS = ("apt-get", "dnf", "pacman", "zypper", "brew", "winget", "choco", "sudo", "cc", "c++", "gcc", "g++",
            "clang", "clang++", "cl", "cmake", "ninja", "mcs", "mono", "initdb", "nginx")
# Where tools/build_csharp.py and tests/support/postgres.py look (kept equal to them).
NEWTONSOFT = Path("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll")
POSTGRES_ROOT = Path("/usr/lib/postgresql")
NGINX = Path("/usr/sbin/nginx")  # not on a user's PATH on Debian


def probe(env: Mapping[str, str] | None = None) -> Host:
    """Look at this machine: OS, CPU, privileges, package managers, compilers and the tests' tools."""
    env = os.environ if env is None else env
    system = {"linux": "linux", "darwin": "darwin", "windows": "windows"}.get(platform.system().lower(), "linux")
    commands = frozenset(name for name in COMMANDS if shutil.which(name, path=env.get("PATH")))
    return Host(
        system=system,  # type: ignore[arg-type]
        machine=_machine(platform.machine()),
        python=tuple(sys.version_info[:3]),  # type: ignore[arg-type]
        is_root=hasattr(os, "geteuid") and os.geteuid() == 0,
        distro=_distro() if system == "linux" else (),
        commands=commands,
        cmake_version=cmake_version(shutil.which("cmake", path=env.get("PATH"))),
        msvc=_msvc(env) if system == "windows" else False,
        xcode_clt=_succeeds(["xcode-select", "-p"]) if system == "darwin" else False,
        ensurepip=all(importlib.util.find_spec(m) is not None for m in ("venv", "ensurepip")),
        newtonsoft=NEWTONSOFT.is_file(),
        postgres=_postgres(env, "initdb" in commands),
        nginx="nginx" in commands or NGINX.is_file() or bool(env.get("COREAI_NGINX")),
    )


def _machine(raw: str) -> str:
    raw = raw.lower()
    return {"amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(raw, raw or "unknown")


def _distro(os_release: Path = Path("/etc/os-release")) -> tuple[str, ...]:
    try:
        text = os_release.read_text(encoding="utf-8")
    except OSError:
        return ()
    fields = dict(re.findall(r'^(ID|ID_LIKE)="?([^"\n]*)"?$', text, re.M))
    words = [fields.get("ID", ""), *fields.get("ID_LIKE", "").split()]
    return tuple(word for word in dict.fromkeys(words) if word)


def cmake_version(cmake: str | None) -> tuple[int, ...] | None:
    """The version of this cmake binary, None when absent or unreadable."""
    if not cmake:
        return None
    try:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in found.groups() if g is not None) if found else None


def _msvc(env: Mapping[str, str]) -> bool:
    """Visual Studio (or its Build Tools) with the C++ compiler, as vswhere reports it."""
    if shutil.which("cl", path=env.get("PATH")):
        return True
    vswhere = Path(env.get("ProgramFiles(x86)", r"C:\Program Files (x86)")) / "Microsoft Visual Studio" / \
        "Installer" / "vswhere.exe"
    if not vswhere.is_file():
        return False
    try:
        out = subprocess.run([str(vswhere), "-latest", "-products", "*", "-requires",
                              "Microsoft.VisualStudio.Component.VC.Tools.x86.x64", "-property", "installationPath"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return bool(out.strip())


def _postgres(env: Mapping[str, str], initdb_on_path: bool) -> bool:
    folders = [Path(env["COREAI_PG_BIN"])] if env.get("COREAI_PG_BIN") else []
    folders += sorted(POSTGRES_ROOT.glob("*/bin"))
    exe = ".exe" if sys.platform == "win32" else ""
    return initdb_on_path or any((f / f"initdb{exe}").is_file() and (f / f"pg_ctl{exe}").is_file() for f in folders)


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
