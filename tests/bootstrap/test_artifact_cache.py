"""The llama.cpp artifact cache on real files: a folder counts only when complete and intact, a build of one key
is exclusive across processes, and a long step shows that it is alive."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.coreai_bootstrap import llama, plan, progress
from tools.coreai_bootstrap.plan import Host

HOST = Host("linux", "x86_64")


def _artifact(folder: Path, key: str = "k") -> Path:
    """An artifact folder laid out as the build leaves it (small files standing in for the big ones)."""
    (folder / "wheel").mkdir(parents=True)
    (folder / "wheel" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"wheel" * 100)
    (folder / "server" / "bin").mkdir(parents=True)
    (folder / "server" / "bin" / "llama-server").write_bytes(b"\x7fELF server")
    libs = folder / "server" / "lib" / "llama-server"
    libs.mkdir(parents=True)
    (libs / "libllama.so.0.5.0").write_bytes(b"\x7fELF lib")
    (libs / "libllama.so.0").symlink_to("libllama.so.0.5.0")
    llama._write_manifest(folder, {"key": key, "wheel": "wheel/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl",
                                   "server_version": "version: 1 (test)"})
    return folder


def test_a_complete_artifact_loads(tmp_path: Path) -> None:
    found = llama.load(_artifact(tmp_path / "a"))
    assert found is not None
    assert found.wheel.name.startswith("llama_cpp_python-0.3.36") and found.server_prefix == tmp_path / "a" / "server"


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "relink", "no-manifest", "bad-manifest"])
def test_a_damaged_or_partial_artifact_does_not_count(tmp_path: Path, damage: str) -> None:
    folder = _artifact(tmp_path / "a")
    server = folder / "server" / "bin" / "llama-server"
    link = folder / "server" / "lib" / "llama-server" / "libllama.so.0"
    if damage == "truncate":
        server.write_bytes(server.read_bytes()[:3])
    elif damage == "flip":
        server.write_bytes(b"\x7fELF sErver")  # same size, other bytes
    elif damage == "delete":
        server.unlink()
    elif damage == "relink":
        link.unlink()
        link.symlink_to("libelsewhere.so")
    elif damage == "no-manifest":
        (folder / llama.MANIFEST).unlink()
    else:
        (folder / llama.MANIFEST).write_text("{", encoding="utf-8")
    assert llama.load(folder) is None


def test_ensure_reuses_the_cached_artifact_of_this_key_without_building(tmp_path: Path) -> None:
    args = plan.llama_cmake_args(HOST)
    key = plan.artifact_key(HOST, args)
    _artifact(tmp_path / "llama.cpp" / key, key)
    # python points nowhere: any build attempt would fail loudly
    found = llama.ensure(HOST, tmp_path, args, python=tmp_path / "no-python", tool_dirs=[], env={})
    assert found.key == key and found.folder == tmp_path / "llama.cpp" / key


def test_the_build_lock_is_exclusive_and_freed_when_its_holder_dies(tmp_path: Path) -> None:
    lock_path = tmp_path / ".k.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
            from tools.coreai_bootstrap.llama import BuildLock
            with BuildLock(__import__("pathlib").Path({str(lock_path)!r})):
                print("held", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        contender = llama.BuildLock(lock_path)
        contender._file = open(lock_path, "a+b")
        try:
            assert not contender._try_lock()  # held by the other process
            assert f"pid {holder.pid}" in contender._holder()
            holder.kill()
            holder.wait()
            assert contender._try_lock()  # the OS released it with its holder
            contender._unlock()
        finally:
            contender._file.close()
    finally:
        holder.kill()
        holder.wait()
    with llama.BuildLock(lock_path):
        assert lock_path.read_text().strip() == f"pid {os.getpid()}"


def test_a_long_step_reports_ninja_progress_and_a_failure_shows_the_log(tmp_path: Path, capsys) -> None:
    script = "import time\nfor i in range(1, 5):\n    print(f'[{i}/4] step', flush=True); time.sleep(0.6)\n"
    log = tmp_path / "build.log"
    progress.run_logged([sys.executable, "-c", script], log, "building", heartbeat_s=0.9,
                        status=llama._ninja_status)  # the bootstrap's own: nothing until Ninja's first step
    err = capsys.readouterr().err
    assert "still building:" in err and "step " in err and "/4" in err
    assert "[4/4] step" in log.read_text()
    with pytest.raises(progress.StepFailed, match=r"failing failed \(exit 3\).*full log"):
        progress.run_logged([sys.executable, "-c", "print('the reason'); raise SystemExit(3)"], log, "failing")
    assert "the reason" in capsys.readouterr().err


def test_a_step_counts_the_cpu_time_of_its_whole_process_tree(tmp_path: Path) -> None:
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    grandchild = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}], check=True)\n"
    timing = progress.run_logged([sys.executable, "-c", grandchild], tmp_path / "log", "burning")
    if os.name == "nt":
        assert timing.cpu_s is None
    else:
        assert timing.cpu_s is not None and timing.cpu_s >= 0.5  # the grandchild's too, not just the child's
    assert timing.wall_s >= 0.5
