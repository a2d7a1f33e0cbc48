"""The bootstrap's command line and the scripts over it, run as a user runs them (nothing installed by these)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tools.coreai_bootstrap import host, plan

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "tools" / "bootstrap.py"


def _run(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, **env})


def test_doctor_reports_every_requirement_of_this_machine_and_fails_only_when_one_is_missing() -> None:
    result = _run(sys.executable, str(BOOTSTRAP), "doctor")
    reqs = plan.requirements(host.probe())
    for req in reqs:
        assert req.name in result.stdout
    blocked = bool(plan.missing(reqs, "test")[0])
    assert result.returncode == (1 if blocked else 0), result.stdout + result.stderr
    assert ("MISSING" in result.stdout) == blocked


def test_where_prints_the_paths_the_runtime_and_ci_use(tmp_path: Path) -> None:
    this = host.probe()
    venv = tmp_path / "venv"
    layout = plan.venv_layout(this, venv)
    out = {what: _run(sys.executable, str(BOOTSTRAP), "--venv", str(venv), "--cache-dir", str(tmp_path / "c"),
                      "where", what).stdout.strip() for what in ("llama-server", "python", "artifacts")}
    assert out["llama-server"] == str(layout.llama_server)
    assert out["python"] == str(layout.python)
    assert Path(out["artifacts"]).parent == tmp_path / "c" / "llama.cpp"
    assert not venv.exists()  # `where` installs nothing


def test_the_bash_wrapper_finds_a_python_and_passes_its_arguments_and_the_venv_through(tmp_path: Path) -> None:
    result = _run("bash", "scripts/bootstrap.sh", "where", "venv", COREAI_VENV=str(tmp_path / "v"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "v")


def test_a_relative_venv_is_inside_the_repository_as_before() -> None:
    result = _run(sys.executable, str(BOOTSTRAP), "where", "venv", COREAI_VENV=".venv-x")
    assert result.stdout.strip() == str(ROOT / ".venv-x")


def test_unknown_commands_and_options_are_refused_with_the_usage() -> None:
    for argv in (["frobnicate"], ["--colour", "x"], ["--venv"]):
        result = _run(sys.executable, str(BOOTSTRAP), *argv)
        assert result.returncode == 2 and "usage: python3 tools/bootstrap.py" in result.stderr


def test_the_scripts_are_thin_wrappers_over_the_same_bootstrap_on_every_os() -> None:
    scripts = ROOT / "scripts"
    assert "tools/bootstrap.py" in (scripts / "bootstrap.sh").read_text()
    assert 'bootstrap.sh" run "$@"' in (scripts / "run.sh").read_text()
    assert 'bootstrap.sh" test "$@"' in (scripts / "test.sh").read_text()
    assert r"tools\bootstrap.py" in (scripts / "bootstrap.cmd").read_text()
    assert 'bootstrap.cmd" run %*' in (scripts / "run.cmd").read_text()
    assert 'bootstrap.cmd" test %*' in (scripts / "test.cmd").read_text()
    for cmd in scripts.glob("*.cmd"):
        assert b"\r\n" in cmd.read_bytes() and b"\n" not in cmd.read_bytes().replace(b"\r\n", b"")  # CRLF only
