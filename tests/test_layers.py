"""The arrows between packages point down: the client needs nothing of the server side, the stores nothing above them.

Checked two ways: every import statement of a package's modules (lazy ones and type-only ones too,
since an arrow in a type is still an arrow), and what importing the package really loads.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyruntime"

# package -> the packages it must not import
RULES: dict[str, tuple[str, ...]] = {
    "pyruntime.client": ("pyruntime.turns", "pyruntime.service", "pyruntime.rpc", "pyruntime.model"),
    # What every local listener shares (keys, limits, the HTTP guard): below the transports and the model port.
    "pyruntime.net": ("pyruntime.rpc", "pyruntime.model", "pyruntime.turns", "pyruntime.service", "pyruntime.cli",
                      "pyruntime.app"),
    # The model's client, its child and its public port: below the turn engine and every transport.
    "pyruntime.model": ("pyruntime.turns", "pyruntime.service", "pyruntime.rpc", "pyruntime.cli", "pyruntime.app",
                        "pyruntime.settings"),
    "pyruntime.stores": ("pyruntime.turns", "pyruntime.service", "pyruntime.rpc", "pyruntime.cli"),
    # The turn engine knows nothing of the wire: the service converts (service/turn_runner.py) and the RPC serves.
    "pyruntime.turns": ("pyruntime.service", "pyruntime.rpc", "pyruntime.cli", "pyruntime.app", "pyruntime.settings"),
    "pyruntime.service": ("pyruntime.rpc", "pyruntime.cli", "pyruntime.app", "pyruntime.settings"),
    "pyruntime.settings": ("pyruntime.app", "pyruntime.cli"),  # plain values: read by the wiring, never above it
    "pyruntime.app": ("pyruntime.cli",),  # the runtime's wiring; the CLI is its user
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    files = [folder.with_suffix(".py")] if folder.with_suffix(".py").is_file() else sorted(folder.rglob("*.py"))
    assert files, f"{package} has no module"
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for path in files
        for line, module in _imports(path)
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    ]


@pytest.mark.parametrize(("package", "forbidden"), RULES.items(), ids=list(RULES))
def test_no_module_imports_a_layer_above(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []


# The turn engine (the orchestrator and its rooms) sits below the service and the transports, statement by
# statement, module by module (RULES holds the package to it too, and what importing it loads). The proto adapter
# the service calls is the service's (`service/turn_runner.py`), so no turns module is exempt.
TURN_ENGINE = sorted(f"pyruntime.turns.{p.stem}" for p in (PACKAGE / "turns").glob("*.py"))


@pytest.mark.parametrize("module", TURN_ENGINE)
def test_the_turn_engine_imports_no_layer_above(module: str) -> None:
    assert _violations(module, ("pyruntime.service", "pyruntime.rpc", "pyruntime.cli", "pyruntime.app")) == []


def test_the_check_sees_an_arrow_back_up(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from pyruntime.turns.rounds.registry import X\n"
                      "def f():\n    import pyruntime.service.status\n", encoding="utf-8")
    assert _imports(module)[1:] == [(3, "pyruntime.turns.rounds.registry"), (5, "pyruntime.service.status")]


@pytest.mark.parametrize(("package", "forbidden"), RULES.items(), ids=list(RULES))
def test_importing_the_package_loads_nothing_above_it(package: str, forbidden: tuple[str, ...]) -> None:
    # A fresh interpreter: what this test session already imported must not hide an arrow.
    prefixes = tuple(f + "." for f in forbidden)
    code = (f"import sys, json, {package}; print(json.dumps(sorted(m for m in sys.modules "
            f"if m in {forbidden!r} or m.startswith({prefixes!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout
    assert json.loads(out) == []
