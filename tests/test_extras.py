"""`pip install coreai-runtime` gives the Python client and the saves CLI without the hosted runtime's packages.

The hosted runtime (llama.cpp, uvicorn, Prometheus, ...), the PostgreSQL store and shipping are extras.
A child process whose imports of every extra's package fail, as in an environment where they are not
installed, uses the client against a real runtime and runs the saves commands on real files; `serve`
there says which extra to install.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.rpc.conftest import TOKEN, spawn_runtime

ROOT = Path(__file__).resolve().parents[1]

# Top-level import names of what the extras install (and their own dependencies that the base lacks).
EXTRA_MODULES = {
    "serve": ["llama_cpp", "uvicorn", "h11", "httpx", "aiohttp", "multidict", "yarl", "jinja2", "prometheus_client",
              "jsonschema", "referencing", "numpy", "grpc_health", "grpc_reflection", "starlette", "fastapi",
              "sse_starlette", "uvloop"],
    "server": ["psycopg", "psycopg_pool"],
    "ship": ["PyInstaller"],
}
BASE_REQUIREMENTS = {"pydantic", "grpcio", "protobuf", "filelock", "connectrpc", "pyqwest", "googleapis-common-protos"}

CHILD = '''
import importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
connect_url, grpc_url, token, data = sys.argv[2:6]
report = {}

from pyruntime.client import AsyncRuntimeClient, RuntimeClient
for url in (connect_url, grpc_url):
    with RuntimeClient(url, token=token) as client:
        result = client.apply_memory_tool("BlacksmithNPC", {"action": "append", "content": "Likes axes " + url[:4]})
        report[url[:4]] = [result.success, [v.version for v in client.list_versions("BlacksmithNPC")]]

import os
os.makedirs(data + "/game")
from pyruntime.cli import main
saves = ["--data-dir", data + "/game", "--role", "BlacksmithNPC", "--user", "alex"]
report["append"] = main(["memory", "append", *saves, "--content", "Owes 3 gold"])
report["versions"] = main(["memory", "versions", *saves])
report["history"] = main(["history", "show", *saves])
report["export"] = main(["export", "--out", data + "/slot1.json", "--data-dir", data + "/game", "--user", "alex"])
report["import"] = main(["import", data + "/slot1.json", "--data-dir", data + "/game", "--into-user", "bob"])
report["read_bob"] = main(["memory", "read", "--data-dir", data + "/game", "--role", "BlacksmithNPC", "--user", "bob"])
report["serve"] = main(["serve", "--no-model", "--data-dir", data + "/game"])
try:
    main(["--help"])
except SystemExit as exc:
    report["help"] = exc.code
report["loaded"] = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
print("REPORT " + json.dumps(report))
'''


def test_client_and_saves_cli_run_without_the_extras(tmp_path: Path) -> None:
    runtime = spawn_runtime(tmp_path / "served")
    try:
        blocked = sorted(m for modules in EXTRA_MODULES.values() for m in modules)
        run = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(blocked), f"http://127.0.0.1:{runtime.connect_port}",
             f"grpc://127.0.0.1:{runtime.grpc_port}", TOKEN, str(tmp_path)],
            capture_output=True, text=True, timeout=240, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        assert runtime.terminate() == 0
    lines = [line for line in run.stdout.splitlines() if line.startswith("REPORT ")]
    assert lines, run.stderr[-3000:]
    report = json.loads(lines[-1][len("REPORT "):])
    assert report["http"] == [True, [1]] and report["grpc"] == [True, [1, 2]]
    assert {k: report[k] for k in ("append", "versions", "history", "export", "import", "read_bob")} == dict.fromkeys(
        ("append", "versions", "history", "export", "import", "read_bob"), 0)
    assert '"Memory":"Owes 3 gold"' in run.stdout  # bob got alex's memory through the snapshot
    assert report["help"] == 0
    assert report["loaded"] == []
    # serve needs the hosted runtime: a clear refusal that names the extra, not a traceback.
    assert report["serve"] == 2
    assert "pip install 'coreai-runtime[serve]'" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_base_install_requires_only_what_the_client_and_saves_cli_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(requirements: list[str]) -> set[str]:
        found = set()
        for requirement in requirements:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement)
            assert name is not None, requirement
            found.add(name.group(0).lower())
        return found

    assert names(project["dependencies"]) == BASE_REQUIREMENTS
    extras = {name: names(reqs) for name, reqs in project["optional-dependencies"].items()}
    assert "llama-cpp-python" in extras["serve"] and {"uvicorn", "prometheus-client"} <= extras["serve"]
    assert "psycopg" in extras["server"] and "pyinstaller" in extras["ship"]


def test_bootstrap_installs_every_extra_the_tests_need() -> None:
    # tools/bootstrap.py installs the project with plan.PROJECT_EXTRAS (one line, in its pure plan).
    from tools.coreai_bootstrap import plan

    assert {"serve", "server", "ship", "dev"} <= set(plan.PROJECT_EXTRAS)
    assert plan.InstallStamp("k", "h").extras == plan.PROJECT_EXTRAS  # what install_project passes to pip


def test_the_readme_says_which_extra_is_which() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("pip install coreai-runtime", "pip install 'coreai-runtime[serve]'",
                    "pip install 'coreai-runtime[server]'", "pip install 'coreai-runtime[ship]'"):
        assert command in readme, command
