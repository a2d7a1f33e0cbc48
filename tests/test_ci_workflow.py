"""The GitHub Actions workflows cannot run here: parse them and check that the frozen-runtime and release matrices build
the four desktop archives the Unity package fetches (Windows x64, macOS arm64 and x64, Linux x64), that every
repository script they run exists, and that they get llama.cpp, the project and the system packages through
tools/bootstrap.py (one recipe, not two that drift apart); actionlint and zizmor check every workflow."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
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


def _platforms(job: dict) -> list[tuple[str, str]]:
    return sorted((i["platform"], i["arch"]) for i in job["strategy"]["matrix"]["include"])


def test_the_workflow_builds_every_desktop_archive_each_on_its_own_runner() -> None:
    from tools.package_runtime import PLATFORMS

    job = _job()
    assert _platforms(job) == sorted(PLATFORMS) == [("linux", "x64"), ("macos", "arm64"), ("macos", "x64"),
                                                    ("windows", "x64")]
    runners = {(i["platform"], i["arch"]): i["os"] for i in job["strategy"]["matrix"]["include"]}
    # Native runners (PyInstaller does not cross-compile; each build is smoke-tested on its own CPU): the Intel macOS
    # image for x64, Apple silicon for arm64, the oldest Ubuntu Unity supports for the lowest glibc floor.
    assert runners == {("linux", "x64"): "ubuntu-22.04", ("windows", "x64"): "windows-2025",
                       ("macos", "arm64"): "macos-15", ("macos", "x64"): "macos-15-intel"}
    assert job["runs-on"] == "${{ matrix.os }}" and job["strategy"]["fail-fast"] is False
    assert job["defaults"]["run"]["shell"] == "bash"  # the same commands on Windows
    assert isinstance(job["timeout-minutes"], int)
    assert job["env"]["MACOSX_DEPLOYMENT_TARGET"] == "13.3"  # a macOS build runs on older macOS than the runner's


def test_every_script_the_workflow_runs_exists_in_the_repository() -> None:
    scripts = [word for command in _commands(_job()) for word in command if re.fullmatch(r"[\w./-]+\.(py|sh)", word)]
    assert "tools/build_runtime.py" in scripts and "tools/smoke_runtime.py" in scripts
    for script in scripts:
        assert (ROOT / script).is_file(), f"the workflow runs {script}, which does not exist"
    build = scripts.index("tools/build_runtime.py")
    assert build < scripts.index("tools/smoke_runtime.py")  # smoke-tests what it just built


def test_the_artifact_is_the_packed_archive_named_by_os_and_cpu() -> None:
    upload = [s for s in _job()["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(upload) == 1
    assert upload[0]["with"]["path"] == "dist/release/*"
    assert upload[0]["with"]["if-no-files-found"] == "error"
    assert upload[0]["with"]["name"] == "coreai-runtime-${{ matrix.platform }}-${{ matrix.arch }}"  # one per archive


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
    for part in ("matrix.platform", "matrix.arch", "env.MACOSX_DEPLOYMENT_TARGET"):  # per archive and build floor
        assert part in cache[0]["with"]["key"]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'llama-cpp-python=={plan.LLAMA_CPP_PYTHON}' in pyproject
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
    assert on == {"push": {"tags": ["v*"]}}  # no manual runs: a release is always a tag's
    assert workflow["permissions"] == {}
    jobs = workflow["jobs"]
    assert {name: job["permissions"] for name, job in jobs.items()} == {
        "version": {"contents": "read"}, "build": {"contents": "read"}, "publish": {"contents": "write"}}


def test_the_release_checks_the_tag_is_the_package_version_before_building() -> None:
    jobs = _release()["jobs"]
    assert jobs["build"]["needs"] == "version" and jobs["publish"]["needs"] == "build"
    assert _runs(jobs["version"]) == ['python tools/package_version.py --check --tag "$GITHUB_REF_NAME"']


def test_the_release_builds_every_desktop_archive_with_the_names_the_unity_package_fetches() -> None:
    from tools.package_runtime import PLATFORMS, archive_name

    build = _release()["jobs"]["build"]
    assert build["strategy"] == _job()["strategy"] and build["runs-on"] == "${{ matrix.os }}"
    assert _platforms(build) == sorted(PLATFORMS)
    csharp = (ROOT / "unity_package" / "Runtime" / "Hosting" / "Downloads" / "RuntimeArchive.cs").read_text(
        encoding="utf-8")
    assert '"coreai-runtime-" + os + "-" + arch + ".tar.gz"' in csharp  # the name the C# side builds ...
    assert [archive_name(*p) for p in sorted(PLATFORMS)] == [  # ... is the one the packer writes, for every archive
        "coreai-runtime-linux-x64.tar.gz", "coreai-runtime-macos-arm64.tar.gz", "coreai-runtime-macos-x64.tar.gz",
        "coreai-runtime-windows-x64.tar.gz"]
    assert all(os_name in ("windows", "macos", "linux") and arch in ("x64", "arm64") for os_name, arch in PLATFORMS)
    upload = [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload[0]["with"]["path"] == "dist/release/*" and upload[0]["with"]["if-no-files-found"] == "error"


def test_the_release_builds_exactly_as_the_frozen_runtime_workflow_then_packs_what_it_smoke_tested() -> None:
    build = _release()["jobs"]["build"]
    frozen = _job()
    assert build["env"] == frozen["env"]  # the same llama-cpp-python and SmolLM2 versions, the same macOS floor
    assert _runs(build) == _runs(frozen), "release.yml's build steps drifted from frozen-runtime.yml's"
    assert not [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/cache@")]  # from source only
    [package] = [s for s in build["steps"] if "package_runtime.py" in s.get("run", "")]
    assert package["run"] == 'python tools/package_runtime.py --os "$PLATFORM" --arch "$ARCH" --out dist/release'
    assert package["env"] == {"PLATFORM": "${{ matrix.platform }}", "ARCH": "${{ matrix.arch }}"}
    runs = _runs(build)
    assert runs.index("python tools/smoke_runtime.py") < runs.index(package["run"])
    scripts = [w for line in runs for w in shlex.split(line) if re.fullmatch(r"[\w./-]+\.(py|sh)", w)]
    for script in scripts:
        assert (ROOT / script).is_file(), f"the release runs {script}, which does not exist"


def test_the_release_publishes_every_archive_with_its_checksum() -> None:
    publish = _release()["jobs"]["publish"]
    download = [s for s in publish["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert download[0]["with"] == {"pattern": "coreai-runtime-*", "path": "release", "merge-multiple": True}
    [create] = [shlex.split(run) for run in _runs(publish)]
    assert create[:4] == ["gh", "release", "create", "$GITHUB_REF_NAME"]
    assert "release/*.tar.gz" in create and "release/*.tar.gz.sha256" in create and "--verify-tag" in create


# --------------------------------------------------------------------------------------- actionlint and zizmor

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _tool(name: str) -> str:
    """A dev-extra tool's executable, beside this Python (the bootstrap's venv)."""
    path = Path(sys.executable).parent / (name + (".exe" if sys.platform == "win32" else ""))
    assert path.is_file(), f"{name} is missing: the bootstrap installs it with the dev extra"
    return str(path)


def _actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    # shellcheck from the dev extra checks every run: script (the same version everywhere); no pyflakes (no Python
    # steps)
    return subprocess.run([_tool("actionlint"), "-no-color", "-shellcheck", _tool("shellcheck"), "-pyflakes=",
                           *map(str, paths)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def _zizmor(*paths: Path) -> subprocess.CompletedProcess[str]:
    # --offline: no GitHub API here (the online audits - impostor commits, known-vulnerable actions - need one);
    # pedantic: every audit, including the concurrency and pinning ones.
    return subprocess.run([_tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", *map(str, paths)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def test_every_workflow_passes_actionlint_and_zizmor() -> None:
    assert [p.name for p in WORKFLOWS] == ["fast-tests.yml", "frozen-runtime.yml", "release.yml"]
    lint = _actionlint(*WORKFLOWS)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    audit = _zizmor(*WORKFLOWS)
    assert audit.returncode == 0, audit.stdout + audit.stderr


BAD_WORKFLOW = """on:
  pull_request:
jobs:
  build:
    runs-on: macos-13
    steps:
      - uses: actions/checkout@v4
      - run: echo ${{ github.event.pull_request.title }} $UNQUOTED
"""


def test_the_linters_fail_on_what_they_guard_against(tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BAD_WORKFLOW, encoding="utf-8")
    lint = _actionlint(bad)
    assert lint.returncode == 1
    for finding in ('label "macos-13" is unknown', "github.event.pull_request.title", "SC2086"):
        assert finding in lint.stdout, lint.stdout
    audit = _zizmor(bad)
    assert audit.returncode != 0
    for finding in ("unpinned-uses", "artipacked", "template-injection", "excessive-permissions"):
        assert finding in audit.stdout + audit.stderr, audit.stdout + audit.stderr
