"""The pinned llama.cpp artifacts, built once per flag set into the cache: the llama-cpp-python wheel and llama-server.

One CMake build serves both. pip builds the wheel from the pinned sdist into a build folder we keep
(scikit-build-core's `build-dir`); that same build tree is then reconfigured with the server target added and
`llama-server` built on it, reusing every compiled ggml/llama/common object. The server ships with copies of
the very shared libraries the wheel ships, next to it (rpath `$ORIGIN/../lib/llama-server`).

Artifacts are assembled in a hidden staging folder and renamed into place only when complete and verified,
under a lock, so a killed or concurrent bootstrap never leaves (or uses) half an artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from . import plan
from .plan import Host
from .progress import StepFailed, duration, log, run_logged

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Artifacts:
    """A complete, verified artifact folder in the cache."""

    folder: Path
    key: str
    wheel: Path
    server_prefix: Path  # holds <bin>/llama-server and its libraries, laid out like the venv
    server_version: str


def load(folder: Path) -> Artifacts | None:
    """The artifacts in folder if it is complete and every file is intact (size and sha256), else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        for rel, meta in manifest["files"].items():
            path = folder / rel
            if path.is_symlink() or not path.is_file() or path.stat().st_size != meta["size"] \
                    or _sha256(path) != meta["sha256"]:
                return None
        for rel, target in manifest["links"].items():
            if os.readlink(folder / rel) != target:
                return None
        return Artifacts(folder, manifest["key"], folder / manifest["wheel"], folder / "server",
                         manifest["server_version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure(host: Host, cache: Path, cmake_args: Sequence[str], *, python: Path, tool_dirs: Sequence[Path],
           env: Mapping[str, str]) -> Artifacts:
    """The artifacts for this host and these flags: reused from the cache, or built there now (once)."""
    key = plan.artifact_key(host, cmake_args)
    final = cache / "llama.cpp" / key
    found = load(final)
    if found:
        log(f"llama.cpp {plan.LLAMA_CPP_PYTHON} (wheel + llama-server) from the cache: {final}")
        return found
    with BuildLock(cache / "llama.cpp" / f".{key}.lock"):
        found = load(final)  # built by another bootstrap while we waited
        if found:
            log(f"llama.cpp {plan.LLAMA_CPP_PYTHON} built by another bootstrap meanwhile: {final}")
            return found
        if final.exists():
            log(f"the cached artifacts in {final} are incomplete or damaged: rebuilding them")
            _remove(final)
        return _build(host, cache, key, cmake_args, python=python, tool_dirs=tool_dirs, env=env)


def _build(host: Host, cache: Path, key: str, cmake_args: Sequence[str], *, python: Path,
           tool_dirs: Sequence[Path], env: Mapping[str, str]) -> Artifacts:
    final = cache / "llama.cpp" / key
    staging = cache / "llama.cpp" / f".{key}.partial"
    work = cache / "build" / key.rsplit("-", 1)[-1]  # short: Windows paths of CMake objects get long
    logfile = cache / "logs" / f"llama.cpp-{key}.log"
    for leftover in (staging, work):
        _remove(leftover)
    logfile.parent.mkdir(parents=True, exist_ok=True)
    logfile.write_bytes(b"")
    build_env = plan.build_env(host, cmake_args, [str(d) for d in tool_dirs], env)
    log(f"building llama.cpp {plan.LLAMA_CPP_PYTHON} once into {final} (the wheel, then llama-server on the same "
        f"build); flags: {' '.join(cmake_args)}; log: {logfile}")
    started = time.monotonic()

    src = _fetch_sdist(python, work, logfile, build_env)
    wheel_s = run_logged(
        [python, "-m", "pip", "wheel", "--no-deps", "-v", src, "-w", staging / "wheel", "-C",
         f"build-dir={work / 'build'}"],
        logfile, "building the llama-cpp-python wheel", env=build_env, status=_ninja_status)
    wheel = _one(staging / "wheel", "llama_cpp_python-*.whl")
    log(f"llama-cpp-python wheel built in {wheel_s}: {wheel.name}")

    cmake = _cmake_of(work / "build") or "cmake"
    server_s = run_logged([cmake, "-S", src, "-B", work / "build", *plan.server_cmake_args(host)], logfile,
                          "configuring llama-server on the wheel's build", env=build_env)
    server_s += run_logged([cmake, "--build", work / "build", "--target", "llama-server", "--config", "Release",
                            "--parallel"], logfile, "building llama-server", env=build_env, status=_ninja_status)
    _collect_server(host, work / "build", staging / "server")
    _set_runpaths(host, cmake, staging / "server", work, logfile, build_env)
    binary_dir, _ = plan.server_tree(host)
    version = server_version(staging / "server" / binary_dir / f"llama-server{_exe(host)}", env)
    log(f"llama-server built in {server_s} on the same build: {version}")

    _write_manifest(staging, {
        "key": key, "llama_cpp_python": plan.LLAMA_CPP_PYTHON, "sdist_sha256": plan.LLAMA_SDIST_SHA256,
        "system": host.system, "machine": host.machine, "cmake_args": list(cmake_args),
        "server_cmake_args": list(plan.server_cmake_args(host)), "wheel": f"wheel/{wheel.name}",
        "server_version": version, "seconds": {"wheel": round(wheel_s.wall_s), "server": round(server_s.wall_s),
                                               "total": round(time.monotonic() - started)},
        "cpu_seconds": {"wheel": _round(wheel_s.cpu_s), "server": _round(server_s.cpu_s)}})
    shutil.copy2(logfile, staging / "build.log")
    os.replace(staging, final)  # atomic: the folder appears complete or not at all
    _remove(work)
    log(f"llama.cpp artifacts ready in {duration(time.monotonic() - started)}: {final}")
    found = load(final)
    if not found:
        raise StepFailed(f"the artifacts just built in {final} do not verify")
    return found


def _fetch_sdist(python: Path, work: Path, logfile: Path, env: Mapping[str, str]) -> Path:
    """Download the pinned sdist (through pip: its index, proxy and cache settings apply), check it, unpack it."""
    run_logged([python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                f"llama-cpp-python=={plan.LLAMA_CPP_PYTHON}", "-d", work / "sdist"],
               logfile, "downloading the llama-cpp-python sdist", env=env)
    sdist = _one(work / "sdist", "llama_cpp_python-*.tar.gz")
    digest = _sha256(sdist)
    if digest != plan.LLAMA_SDIST_SHA256:
        raise StepFailed(f"{sdist.name} has sha256 {digest}, not the pinned {plan.LLAMA_SDIST_SHA256}: refusing to "
                         "build it (a different or tampered upload)")
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work / "src", filter="data")
        else:  # Python < 3.11.4: members are still checked below
            _check_members(tar, work / "src")
            tar.extractall(work / "src")
    return _one(work / "src", "llama_cpp_python-*")


def _check_members(tar: tarfile.TarFile, dest: Path) -> None:
    root = dest.resolve()
    for member in tar.getmembers():
        if not (root / member.name).resolve().is_relative_to(root) or member.issym() or member.islnk():
            raise StepFailed(f"unsafe member in the sdist: {member.name}")


def _cmake_of(build: Path) -> str | None:
    """The cmake that configured this build tree (reconfiguring with another version would redo it)."""
    try:
        for line in (build / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("CMAKE_COMMAND:"):
                cmake = line.split("=", 1)[1]
                return cmake if Path(cmake).is_file() else None
    except OSError:
        pass
    return None


def _collect_server(host: Host, build: Path, prefix: Path) -> None:
    """Copy llama-server and every shared library of the build (those it needs: the same the wheel has)."""
    exe = _exe(host)
    found = sorted(build.glob(f"bin/llama-server{exe}")) + sorted(build.glob(f"bin/*/llama-server{exe}"))
    if not found:
        raise StepFailed(f"llama-server{exe} not found under {build / 'bin'} after the build")
    binary = found[0]
    binary_dir, lib_dir = plan.server_tree(host)
    (prefix / binary_dir).mkdir(parents=True, exist_ok=True)
    (prefix / lib_dir).mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, prefix / binary_dir / binary.name)
    for pattern in plan.shared_library_patterns(host):
        for lib in sorted(binary.parent.glob(pattern)):
            target = prefix / lib_dir / lib.name
            if lib.is_symlink():
                if not target.is_symlink():
                    target.symlink_to(os.readlink(lib))
            elif not target.exists():
                shutil.copy2(lib, target)


def _set_runpaths(host: Host, cmake: str, prefix: Path, work: Path, logfile: Path, env: Mapping[str, str]) -> None:
    """Give the shipped ELF files exact RUNPATHs (see plan.elf_runpaths), with CMake's own ELF editor."""
    runpaths = plan.elf_runpaths(host)
    if runpaths is None:
        return
    binary_dir, lib_dir = plan.server_tree(host)
    edits = [(prefix / binary_dir / "llama-server", runpaths[0])]
    edits += [(lib, runpaths[1]) for lib in sorted((prefix / lib_dir).iterdir()) if not lib.is_symlink()]
    script = work / "set-runpaths.cmake"
    script.write_text("".join(f'file(RPATH_SET FILE "{path.as_posix()}" NEW_RPATH "{rpath}")\n'
                              for path, rpath in edits), encoding="utf-8")
    run_logged([cmake, "-P", script], logfile, "setting llama-server's library paths", env=env)


def server_version(binary: Path, env: Mapping[str, str]) -> str:
    """`llama-server --version`, run with no library path set: proves it finds its libraries by itself."""
    clean = {k: v for k, v in env.items() if k not in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")}
    try:
        result = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=clean, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StepFailed(f"{binary} does not run: {exc}") from exc
    text = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or "version" not in text:
        raise StepFailed(f"{binary} --version failed (exit {result.returncode}): {text[-2000:]}")
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _write_manifest(folder: Path, fields: dict[str, object]) -> None:
    files: dict[str, dict[str, object]] = {}
    links: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            links[rel] = os.readlink(path)
        elif path.is_file():
            files[rel] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    (folder / MANIFEST).write_text(json.dumps({**fields, "files": files, "links": links}, indent=2), encoding="utf-8")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise StepFailed(f"expected one {pattern} in {folder}, found {[p.name for p in found]}")
    return found[0]


def _exe(host: Host) -> str:
    return ".exe" if host.system == "windows" else ""


def _round(value: float | None) -> int | None:
    return None if value is None else round(value)


def _ninja_status(log_tail: str) -> str:
    step = plan.ninja_progress(log_tail)
    return f"step {step[0]}/{step[1]} ({100 * step[0] // max(step[1], 1)} %)" if step else ""


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


class BuildLock:
    """An exclusive lock on one artifact key across processes; released by the OS if its holder dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def __enter__(self) -> BuildLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self._file = open(self.path, "a+b")  # held (and locked) until __exit__
        started = time.monotonic()
        announced = -1.0
        while not self._try_lock():
            waited = time.monotonic() - started
            if waited - announced >= 30:
                announced = waited
                log(f"waiting for another bootstrap that is building the same llama.cpp artifacts "
                    f"({self._holder()}; {duration(waited)}) ...")
            time.sleep(1)
        file.seek(0)
        file.truncate()
        file.write(f"pid {os.getpid()}\n".encode())
        file.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._file is not None
        self._unlock()
        self._file.close()
        self._file = None

    def _holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip() or "pid unknown"
        except OSError:
            return "pid unknown"

    def _try_lock(self) -> bool:
        assert self._file is not None
        try:
            if sys.platform == "win32":
                import msvcrt

                self._file.seek(0)
                msvcrt.locking(self._file.fileno(), msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False

    def _unlock(self) -> None:
        assert self._file is not None
        if sys.platform == "win32":
            import msvcrt

            self._file.seek(0)
            msvcrt.locking(self._file.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
