"""The GitHub Actions workflows cannot run here: parse them and check that the frozen-runtime matrix covers the
three desktop OSes, that every repository script they run exists, and that they get llama.cpp, the project and the
system packages through tools/bootstrap.py (one recipe, not two that drift apart)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from tools.coreai_bootstrap import plan

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "frozen-runtime.yml"
FAST_TESTS = ROOT / ".github" / "workflows" / "fast-tests.yml"


def _job(path: Path = WORKFLOW, name: str = "build") -> dict:
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(workflow["jobs"]) == {name}
    return workflow["jobs"][name]


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


def test_llama_cpp_and_the_project_come_from_the_bootstrap_on_every_os() -> None:
    job = _job()
    commands = _commands(job)
    assert ["python", "tools/bootstrap.py"] in commands
    assert ["python", "tools/bootstrap.py", "where", "scripts"] in [c[:4] for c in commands]  # its venv goes on PATH
    scripts = [c[1] for c in commands if len(c) > 1 and c[0] == "python" and c[1].endswith(".py")]
    assert scripts.index("tools/bootstrap.py") < scripts.index("tools/build_runtime.py")
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "pip wheel" not in text and "CMAKE_ARGS" not in text  # no second recipe for the llama.cpp build
    cache = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@")]
    assert len(cache) == 1
    assert job["env"]["COREAI_CACHE_DIR"] == "${{ github.workspace }}/.coreai-cache"
    assert cache[0]["with"]["path"] == ".coreai-cache/llama.cpp"  # where the bootstrap keeps its builds
    assert "hashFiles('tools/coreai_bootstrap/plan.py')" in cache[0]["with"]["key"]  # a new recipe, a new cache
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'llama-cpp-python[server]=={plan.LLAMA_CPP_PYTHON}' in pyproject
    assert "ship" in plan.PROJECT_EXTRAS and re.search(r"^ship = \[", pyproject, re.M)  # PyInstaller


def test_the_fast_tests_run_the_way_ci_runs_them_with_the_bootstraps_packages() -> None:
    job = _job(FAST_TESTS, "fast-tests")
    assert job["runs-on"] == "ubuntu-latest"
    commands = _commands(job)
    assert ["bash", "scripts/test.sh", "-q", "-m", "not slow"] in commands
    installs = [c for c in commands if c[:2] == ["sudo", "apt-get"] and "install" in c]
    assert len(installs) == 1
    # Every package the bootstrap would apt-get itself on a fresh Ubuntu (as root, which the runner is not).
    fresh = plan.Host("linux", "x86_64", is_root=True, distro=("ubuntu", "debian"), commands=frozenset({"apt-get"}),
                      ensurepip=False)
    wanted = set(plan.apt_packages(fresh, plan.requirements(fresh)))
    assert wanted and wanted <= set(installs[0]), wanted - set(installs[0])
    cache = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@")]
    linux = plan.cache_root(plan.Host("linux", "x86_64"), {}, Path("~"))
    assert cache[0]["with"]["path"] == f"{linux.as_posix()}/llama.cpp"  # the bootstrap's default cache
    assert "hashFiles('tools/coreai_bootstrap/plan.py')" in cache[0]["with"]["key"]
    assert (ROOT / "scripts" / "test.sh").is_file()


def test_ci_and_the_fast_tests_run_the_static_checks_before_the_tests() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert "set -euo pipefail" in ci  # a finding stops CI: lint.sh exits 1 when ruff or mypy finds something
    assert ci.index("bash scripts/lint.sh") < next(i for i, line in enumerate(ci) if "scripts/test.sh" in line)
    commands = _commands(_job(FAST_TESTS, "fast-tests"))
    fast_tests = ["bash", "scripts/test.sh", "-q", "-m", "not slow"]
    assert commands.index(["bash", "scripts/lint.sh"]) < commands.index(fast_tests)
    lint = (ROOT / "scripts" / "lint.sh").read_text(encoding="utf-8")
    assert '-m ruff check || status=1' in lint and '-m mypy || status=1' in lint and 'exit "$status"' in lint


RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def _release() -> dict:
    return yaml.safe_load(RELEASE.read_text(encoding="utf-8"))


def _runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_the_release_runs_for_version_tags_and_only_its_publish_job_may_write() -> None:
    workflow = _release()
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert on["push"] == {"tags": ["v*"]}
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["jobs"]["publish"]["permissions"] == {"contents": "write"}
    assert "permissions" not in workflow["jobs"]["build"]


def test_the_release_builds_an_archive_per_desktop_os_with_the_names_the_unity_package_fetches() -> None:
    from tools.package_runtime import ARCHES, OSES, archive_name

    build = _release()["jobs"]["build"]
    include = build["strategy"]["matrix"]["include"]
    assert sorted(i["platform"] for i in include) == sorted(OSES)
    runners = {i["platform"]: (i["os"], i["arch"]) for i in include}
    assert runners == {"linux": ("ubuntu-latest", "x64"), "windows": ("windows-latest", "x64"),
                       "macos": ("macos-latest", "arm64")}  # macos-latest runners are Apple silicon
    assert all(i["arch"] in ARCHES for i in include)
    assert build["runs-on"] == "${{ matrix.os }}" and build["strategy"]["fail-fast"] is False
    csharp = (ROOT / "unity_package" / "Runtime" / "Core" / "Downloads" / "RuntimeArchive.cs").read_text(encoding="utf-8")
    assert '"coreai-runtime-" + os + "-" + arch + ".tar.gz"' in csharp  # the name the C# side builds ...
    assert archive_name("linux", "x64") == "coreai-runtime-linux-x64.tar.gz"  # ... is the one the packer writes
    upload = [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload[0]["with"]["path"] == "dist/release/*" and upload[0]["with"]["if-no-files-found"] == "error"


def test_the_release_builds_exactly_as_the_frozen_runtime_workflow_then_packs_what_it_smoke_tested() -> None:
    build = _release()["jobs"]["build"]
    frozen = _job()
    assert build["env"] == frozen["env"]  # the same llama-cpp-python and SmolLM2 versions
    runs = _runs(build)
    assert runs[:len(_runs(frozen))] == _runs(frozen), "release.yml's build steps drifted from frozen-runtime.yml's"
    package = runs[len(_runs(frozen))]
    assert package.startswith("python tools/package_runtime.py ") and "--out dist/release" in package
    assert "--os ${{ matrix.platform }}" in package and "--arch ${{ matrix.arch }}" in package
    scripts = [w for line in runs for w in shlex.split(line) if re.fullmatch(r"[\w./-]+\.(py|sh)", w)]
    for script in scripts:
        assert (ROOT / script).is_file(), f"the release runs {script}, which does not exist"


def test_the_release_publishes_every_archive_with_its_checksum() -> None:
    publish = _release()["jobs"]["publish"]
    assert publish["needs"] == "build"
    download = [s for s in publish["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert download[0]["with"] == {"pattern": "coreai-runtime-*", "path": "release", "merge-multiple": True}
    [create] = [shlex.split(run) for run in _runs(publish)]
    assert create[:4] == ["gh", "release", "create", "$GITHUB_REF_NAME"]
    assert "release/*.tar.gz" in create and "release/*.tar.gz.sha256" in create
