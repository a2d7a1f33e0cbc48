"""The bootstrap's decisions per OS, from simulated machines: Debian as root (CI), Debian as a user, Fedora,
macOS (Intel and Apple silicon, with and without Homebrew), Windows (winget, choco, neither)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tools.coreai_bootstrap import plan
from tools.coreai_bootstrap.plan import Host

LINUX_TOOLS = frozenset({"apt-get", "cc", "c++", "gcc", "g++", "cmake", "ninja", "mcs", "mono"})


def debian(**kw) -> Host:
    facts: dict[str, Any] = dict(system="linux", machine="x86_64", is_root=True, distro=("debian",),
                                 commands=LINUX_TOOLS, cmake_version=(3, 25, 1), newtonsoft=True, postgres=True,
                                 nginx=True)
    facts.update(kw)
    return Host(**facts)


FRESH_DEBIAN = debian(commands=frozenset({"apt-get"}), cmake_version=None, ensurepip=False, newtonsoft=False,
                      postgres=False, nginx=False)
MAC = Host("darwin", "arm64", commands=frozenset({"brew", "clang", "clang++"}), xcode_clt=True)
WINDOWS = Host("windows", "x86_64", commands=frozenset({"winget"}), msvc=True)


def by_name(reqs, word):
    [req] = [r for r in reqs if r.name.lower().startswith(word.lower())]
    return req


# --- Debian/Ubuntu ----------------------------------------------------------------------------------------------


def test_a_fresh_debian_as_root_gets_todays_apt_packages_unattended() -> None:
    reqs = plan.requirements(FRESH_DEBIAN)
    packages = plan.apt_packages(FRESH_DEBIAN, reqs)
    assert set(packages) == {"python3-venv", "build-essential", "cmake", "mono-devel", "libnewtonsoft-json-cil-dev",
                             "postgresql", "nginx"}
    assert plan.apt_commands(packages) == [["apt-get", "update", "-qq"],
                                           ["apt-get", "install", "-y", "-qq", *packages]]


def test_nothing_is_installed_when_everything_is_there() -> None:
    host = debian()
    reqs = plan.requirements(host)
    assert all(r.present for r in reqs)
    assert plan.apt_packages(host, reqs) == ()
    assert plan.pypi_build_tools(host, reqs) == ()
    assert plan.missing(reqs, "test") == ([], [])


def test_ubuntu_is_debian_like() -> None:
    host = debian(distro=("ubuntu", "debian"), commands=frozenset({"apt-get"}), cmake_version=None)
    assert "build-essential" in plan.apt_packages(host, plan.requirements(host))


def test_as_a_user_the_bootstrap_installs_no_system_package_and_says_the_sudo_command() -> None:
    host = debian(is_root=False, commands=LINUX_TOOLS - {"mcs", "cc", "c++", "gcc", "g++"}, newtonsoft=False)
    reqs = plan.requirements(host)
    assert plan.apt_packages(host, reqs) == ()
    blockers, warnings = plan.missing(reqs, "install")
    assert [r.name for r in blockers] == ["C and C++ compiler"]
    assert {r.name for r in warnings} == {"Mono (mcs, the Mono runtime)", "Newtonsoft.Json for Mono"}
    assert plan.fix_commands(host, blockers) == ["sudo apt-get install -y build-essential"]
    # one apt line for everything missing
    assert plan.fix_commands(host, blockers + warnings) == [
        "sudo apt-get install -y build-essential mono-devel libnewtonsoft-json-cil-dev"]


def test_the_tests_needs_block_only_the_test_command() -> None:
    host = debian(is_root=False, postgres=False, nginx=False)
    reqs = plan.requirements(host)
    assert plan.missing(reqs, "install")[0] == [] and plan.missing(reqs, "run")[0] == []
    blockers, _ = plan.missing(reqs, "test")
    assert [r.name for r in blockers] == ["PostgreSQL server binaries (initdb, pg_ctl)", "nginx"]
    assert [r.fix for r in blockers] == ["sudo apt-get install -y postgresql", "sudo apt-get install -y nginx"]
    assert plan.fix_commands(host, blockers) == ["sudo apt-get install -y postgresql nginx"]


@pytest.mark.parametrize("cmake", [None, (3, 16, 3)])  # absent, or too old (Ubuntu 20.04's)
def test_cmake_and_ninja_come_from_pypi_when_the_os_has_none_and_never_block(cmake) -> None:
    host = debian(is_root=False, commands=LINUX_TOOLS - {"cmake", "ninja"}, cmake_version=cmake)
    reqs = plan.requirements(host)
    assert plan.pypi_build_tools(host, reqs) == ("cmake>=3.21", "ninja")
    assert plan.missing(reqs, "test") == ([], [])


def test_fedora_and_arch_get_their_own_package_manager_commands() -> None:
    fedora = Host("linux", "x86_64", distro=("fedora",), commands=frozenset({"dnf"}))
    fixes = {r.name: r.fix for r in plan.requirements(fedora)}
    assert fixes["C and C++ compiler"] == "sudo dnf install -y gcc gcc-c++ make"
    assert fixes["Mono (mcs, the Mono runtime)"] == "sudo dnf install -y mono-devel"
    assert plan.apt_packages(fedora, plan.requirements(fedora)) == ()
    arch = Host("linux", "x86_64", is_root=True, distro=("arch",), commands=frozenset({"pacman"}))
    assert by_name(plan.requirements(arch), "C and C++").fix == "pacman -S --needed base-devel"


# --- macOS ------------------------------------------------------------------------------------------------------


def test_macos_without_the_xcode_tools_is_told_to_install_them() -> None:
    host = Host("darwin", "arm64", commands=frozenset({"brew"}))
    blockers, _ = plan.missing(plan.requirements(host), "install")
    assert [(r.name, r.fix) for r in blockers] == [("Xcode command line tools (clang)", "xcode-select --install")]


def test_macos_gets_brew_commands_for_the_tests_and_homebrew_first_without_it() -> None:
    reqs = plan.requirements(MAC)
    assert plan.missing(reqs, "install")[0] == []
    assert by_name(reqs, "Mono").fix == "brew install mono"
    assert by_name(reqs, "PostgreSQL").fix == \
        'brew install postgresql@16 && export COREAI_PG_BIN="$(brew --prefix postgresql@16)/bin"'
    assert by_name(reqs, "nginx").fix == "brew install nginx"
    assert "Debian/Ubuntu" in by_name(reqs, "Newtonsoft").fix  # explained, not pretended
    no_brew = Host("darwin", "arm64", commands=frozenset({"clang", "clang++"}), xcode_clt=True)
    assert by_name(plan.requirements(no_brew), "Mono").fix == \
        "install Homebrew (https://brew.sh), then: brew install mono"
    assert plan.apt_packages(MAC, reqs) == ()


def test_macos_builds_with_pypi_cmake_and_ninja_and_portable_arm_flags() -> None:
    reqs = plan.requirements(MAC)
    assert plan.pypi_build_tools(MAC, reqs) == ("cmake>=3.21", "ninja")
    args = plan.llama_cmake_args(MAC)
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AVX2=ON" not in args
    assert "-DCMAKE_BUILD_RPATH=@loader_path/../lib/llama-server" in plan.server_cmake_args(MAC)


# --- Windows ----------------------------------------------------------------------------------------------------


def test_windows_without_msvc_is_told_the_winget_command() -> None:
    host = Host("windows", "x86_64", commands=frozenset({"winget"}))
    blockers, _ = plan.missing(plan.requirements(host), "install")
    assert [r.name for r in blockers] == ["Visual Studio C++ build tools"]
    assert blockers[0].fix.startswith("winget install -e --id Microsoft.VisualStudio.2022.BuildTools --override")
    assert "Microsoft.VisualStudio.Workload.VCTools" in blockers[0].fix


def test_windows_with_choco_only_or_neither() -> None:
    choco = Host("windows", "x86_64", commands=frozenset({"choco"}))
    assert by_name(plan.requirements(choco), "Mono").fix == "choco install -y mono"
    bare = Host("windows", "x86_64")
    assert by_name(plan.requirements(bare), "Mono").fix == (
        "winget install -e --id Mono.Mono  (or: choco install -y mono)")
    assert by_name(plan.requirements(WINDOWS), "PostgreSQL").fix == \
        r"winget install -e --id PostgreSQL.PostgreSQL.16 && set COREAI_PG_BIN=C:\Program Files\PostgreSQL\16\bin"


def test_windows_needs_no_ninja_and_no_rpath() -> None:
    reqs = plan.requirements(WINDOWS)
    assert not any(r.name == "Ninja" for r in reqs)
    assert plan.pypi_build_tools(WINDOWS, reqs) == ("cmake>=3.21",)
    assert not any(a.startswith("-DCMAKE_BUILD_RPATH=") for a in plan.server_cmake_args(WINDOWS))
    env = plan.build_env(WINDOWS, ("-DX=1",), [r"C:\v\Scripts"], {"PATH": r"C:\Windows"})
    assert env["PATH"] == r"C:\v\Scripts;C:\Windows" and "CMAKE_GENERATOR" not in env  # Visual Studio's own


def test_windows_layout_puts_the_server_and_its_dlls_in_scripts() -> None:
    layout = plan.venv_layout(WINDOWS, Path("v"))
    assert layout.python == Path("v/Scripts/python.exe")
    assert layout.llama_server == Path("v/Scripts/llama-server.exe")
    assert layout.server_libs == Path("v/Scripts")
    assert plan.server_tree(WINDOWS) == ("Scripts", "Scripts")
    assert plan.shared_library_patterns(WINDOWS) == ("*.dll",)


@pytest.mark.parametrize("host, env, cache, data", [
    (debian(), {}, "/home/u/.cache/coreai", "/home/u/.local/share/coreai-runtime"),
    (debian(), {"XDG_CACHE_HOME": "/x"}, "/x/coreai", "/home/u/.local/share/coreai-runtime"),
    (MAC, {}, "/home/u/Library/Caches/coreai", "/home/u/Library/Application Support/coreai-runtime"),
    (WINDOWS, {"LOCALAPPDATA": "/L"}, "/L/coreai/cache", "/L/coreai-runtime"),
    (WINDOWS, {"COREAI_CACHE_DIR": "/c", "COREAI_DATA_DIR": "/d"}, "/c", "/d"),
])
def test_cache_and_data_folders_follow_each_os(host, env, cache, data) -> None:
    assert plan.cache_root(host, env, Path("/home/u")) == Path(cache)
    assert plan.data_dir(host, env, Path("/home/u")) == Path(data)


# --- the llama.cpp build ----------------------------------------------------------------------------------------


def test_the_wheel_and_server_flags_are_portable_and_the_users_cmake_args_win() -> None:
    host = debian()
    args = plan.llama_cmake_args(host, "-DGGML_CUDA=ON -DGGML_AVX2=OFF")
    assert args[:6] == plan.PORTABLE_X86_64 and "-DGGML_NATIVE=OFF" in args
    assert args[-2:] == ("-DGGML_CUDA=ON", "-DGGML_AVX2=OFF")  # last wins in CMake
    assert shlex.split(plan.build_env(host, args, [], {})["CMAKE_ARGS"]) == list(args)


def test_the_server_is_added_to_the_wheels_build_with_an_origin_rpath_and_no_downloads() -> None:
    args = plan.server_cmake_args(debian())
    assert {"-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_USE_PREBUILT_UI=OFF"} <= set(args)
    assert "-DCMAKE_BUILD_RPATH=$ORIGIN/../lib/llama-server" in args
    layout = plan.venv_layout(debian(), Path("/v"))
    assert layout.llama_server == Path("/v/bin/llama-server")
    assert layout.server_libs == Path("/v/lib/llama-server")  # = $ORIGIN/../lib/llama-server from /v/bin


def test_the_cache_key_changes_with_what_shapes_the_binaries_and_only_that() -> None:
    host = debian()
    key = plan.artifact_key(host, plan.llama_cmake_args(host))
    assert key.startswith(f"{plan.LLAMA_CPP_PYTHON}-linux-x86_64-")
    assert key == plan.artifact_key(debian(is_root=False, postgres=False), plan.llama_cmake_args(host))
    assert key != plan.artifact_key(host, plan.llama_cmake_args(host, "-DGGML_CUDA=ON"))
    assert key != plan.artifact_key(debian(machine="arm64"), plan.llama_cmake_args(host))
    assert key != plan.artifact_key(MAC, plan.llama_cmake_args(host))


def test_the_build_env_puts_our_tools_first_and_drops_library_paths() -> None:
    env = plan.build_env(debian(), ("-DA=1",), ["/v/bin"], {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["PATH"] == "/v/bin:/usr/bin" and env["CMAKE_GENERATOR"] == "Ninja"
    assert "LD_LIBRARY_PATH" not in env and env["CMAKE_ARGS"] == "-DA=1"


def test_ninja_progress_is_the_last_step_printed() -> None:
    text = "  [1/140] g++ -c a.cpp\n  [2/140] g++ -c b.cpp\nwarning: x [3/9] in text\n[7/95] Linking CXX\n"
    assert plan.ninja_progress(text) == (7, 95)
    assert plan.ninja_progress("-- Configuring done\n") is None


def test_an_install_stamp_round_trips_and_refuses_garbage() -> None:
    stamp = plan.InstallStamp("k", "abc")
    assert plan.InstallStamp.from_json(stamp.to_json()) == stamp
    assert stamp.extras == plan.PROJECT_EXTRAS and plan.SMOLLM2 in stamp.packages
    assert plan.InstallStamp.from_json("{") is None and plan.InstallStamp.from_json("[]") is None


def test_shipped_elf_files_get_exact_runpaths_without_the_empty_entry_cmake_pads_with() -> None:
    runpaths = plan.elf_runpaths(debian())
    assert runpaths is not None
    binary, libs = runpaths
    assert binary == "$ORIGIN/../lib/llama-server:$ORIGIN" and libs == "$ORIGIN"
    assert "" not in binary.split(":") and "" not in libs.split(":")  # glibc reads "" as the current directory
    assert plan.elf_runpaths(MAC) is None and plan.elf_runpaths(WINDOWS) is None
