"""The bootstrap's command line (see tools/bootstrap.py for usage)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import host as host_probe
from . import llama, plan
from .install import ensure_venv, install_build_tools, install_project
from .plan import Host, Requirement
from .progress import StepFailed, duration, log, run_logged

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("install", "run", "test", "doctor", "where")
WHERE = ("venv", "scripts", "python", "llama-server", "cache", "artifacts")
USAGE = """usage: python3 tools/bootstrap.py [--venv DIR] [--cache-dir DIR] [COMMAND] [ARGS...]

  install (default)   set up what is missing: system packages (Debian/Ubuntu as root), the virtual environment,
                      build tools, the pinned llama.cpp (wheel + llama-server, built once into the cache), the project
  run [ARGS]          install, then `coreai-runtime serve` with the embedded model (ARGS go to serve)
  test [ARGS]         install, then every test (ARGS go to pytest)
  doctor              what this machine has and lacks, with the command that fixes each (installs nothing)
  where WHAT          print a path, installing nothing: venv, scripts (its bin folder), python, llama-server,
                      cache, artifacts (this build's folder in the cache)

environment: COREAI_VENV (default .venv), COREAI_CACHE_DIR (default: the OS's cache folder + /coreai),
CMAKE_ARGS (added to the llama.cpp build's flags, e.g. -DGGML_CUDA=ON), COREAI_DATA_DIR (run's saves)"""


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run one bootstrap command; returns the exit status (run and test replace this process)."""
    started = time.monotonic()
    env = dict(os.environ if env is None else env)
    try:
        venv, cache, command, rest = _parse(list(argv), env)
    except ValueError as exc:
        print(f"{exc}\n\n{USAGE}", file=sys.stderr)
        return 2
    if command == "help":
        print(USAGE)
        return 0
    host = host_probe.probe(env)
    layout = plan.venv_layout(host, venv)
    if command == "where":
        return _where(host, layout, cache, rest, env)
    if command == "doctor":
        return _doctor(host, plan.requirements(host))
    try:
        _install(host, layout, cache, command, env)
    except StepFailed as exc:
        log(f"error: {exc}")
        return 1
    log(f"ready in {duration(time.monotonic() - started)}: {layout.root}")
    if command == "run":
        data = plan.data_dir(host, env, Path.home())
        data.mkdir(parents=True, exist_ok=True)
        return _exec([str(layout.tool("coreai-runtime")), "serve", "--data-dir", str(data), *rest])
    if command == "test":
        os.chdir(ROOT)
        return _exec([str(layout.python), "-m", "pytest", *rest])
    return 0


def _parse(argv: list[str], env: Mapping[str, str]) -> tuple[Path, Path | None, str, list[str]]:
    venv = env.get("COREAI_VENV") or ".venv"
    cache = None
    while argv and argv[0].startswith("-"):
        flag = argv.pop(0)
        if flag in ("-h", "--help"):
            return Path(), None, "help", []
        if flag not in ("--venv", "--cache-dir") or not argv:
            raise ValueError(f"unknown option or missing value: {flag}")
        value = argv.pop(0)
        if flag == "--venv":
            venv = value
        else:
            cache = Path(value)
    command = argv.pop(0) if argv else "install"
    if command not in COMMANDS:
        raise ValueError(f"unknown command: {command}")
    path = Path(venv)
    return (path if path.is_absolute() else ROOT / path), cache, command, argv


def _cache(host: Host, cache: Path | None, env: Mapping[str, str]) -> Path:
    return cache if cache is not None else plan.cache_root(host, env, Path.home())


def _install(host: Host, layout: plan.VenvLayout, cache_dir: Path | None, purpose: str,
             env: Mapping[str, str]) -> None:
    cache = _cache(host, cache_dir, env)
    reqs = plan.requirements(host)
    apt = plan.apt_packages(host, reqs)
    if apt:
        log(f"installing system packages: {' '.join(apt)}")
        apt_env = {**env, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in plan.apt_commands(apt):
            run_logged(argv, cache / "logs" / "apt.log", f"running {' '.join(argv[:2])}", env=apt_env)
        host = host_probe.probe(env)
        reqs = plan.requirements(host)
    blockers, warnings = plan.missing(reqs, purpose)  # type: ignore[arg-type]
    for req in warnings:
        log(f"note: {req.name} is missing ({req.why}); fix: {req.fix}")
    if blockers:
        _explain(host, blockers)
        raise StepFailed("missing prerequisites (above): install them and rerun")

    ensure_venv(layout)
    install_build_tools(layout, [pkg for pkg in plan.pypi_build_tools(host, reqs)
                                 if not _in_venv(layout, pkg.split(">")[0])])
    cmake_args = plan.llama_cmake_args(host, env.get("CMAKE_ARGS", ""))
    artifacts = llama.ensure(host, cache, cmake_args, python=layout.python, tool_dirs=[layout.scripts], env=env)
    install_project(layout, ROOT, artifacts, host)


def _in_venv(layout: plan.VenvLayout, tool: str) -> bool:
    return layout.tool(tool).is_file()


def _explain(host: Host, blockers: Sequence[Requirement]) -> None:
    log(f"this {host.system} machine lacks what the bootstrap needs:")
    for req in blockers:
        log(f"  - {req.name}: {req.why}")
    log("to fix it, run:")
    for line in plan.fix_commands(host, blockers):
        log(f"    {line}")


def _doctor(host: Host, reqs: Sequence[Requirement]) -> int:
    print(f"{host.system} {host.machine} {' '.join(host.distro)}, Python {'.'.join(map(str, host.python))}"
          f"{', root' if host.is_root else ''}")
    for req in reqs:
        state = "ok" if req.present else ("from PyPI" if req.pypi else "MISSING")
        print(f"  {state:<10} {req.name:<46} {req.scope:<5}  {req.why}")
        if not req.present and not req.pypi:
            print(f"  {'':<10} fix: {req.fix}")
    blockers, _ = plan.missing(reqs, "test")
    return 1 if blockers else 0


def _where(host: Host, layout: plan.VenvLayout, cache: Path | None, rest: Sequence[str],
           env: Mapping[str, str]) -> int:
    if len(rest) != 1 or rest[0] not in WHERE:
        print(f"where what? one of: {', '.join(WHERE)}", file=sys.stderr)
        return 2
    root = _cache(host, cache, env)
    key = plan.artifact_key(host, plan.llama_cmake_args(host, env.get("CMAKE_ARGS", "")))
    paths = {"venv": layout.root, "scripts": layout.scripts, "python": layout.python,
             "llama-server": layout.llama_server, "cache": root, "artifacts": root / "llama.cpp" / key}
    print(paths[rest[0]])
    return 0


def _exec(argv: list[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # exec on Windows detaches from the console: wait instead, and pass Ctrl+C on
        try:
            return subprocess.call(argv)
        except KeyboardInterrupt:
            return 130
    os.execv(argv[0], argv)
    return 127  # not reached


