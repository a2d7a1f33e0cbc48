"""docs/seed-tests.md lists every ported CoreAI test, and says the truth about each: the test it names exists in
the file its section names, ports that CoreAI test, and departs exactly when its docstring says it does, citing
the contract."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "seed-tests.md"
SECTION = re.compile(r"^### `(\w+)`.*→ `(tests/seed/\w+\.py)`$")
ROW = re.compile(r"^\| `(\w+)` \| `(test_\w+)` \| (.+) \|$")


def _table() -> dict[tuple[str, str], tuple[str, str, str]]:
    """(file, test) -> (CoreAI class, CoreAI test, result) for every row of the doc's test tables."""
    rows: dict[tuple[str, str], tuple[str, str, str]] = {}
    section: tuple[str, str] | None = None
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if match := SECTION.match(line):
            section = (match.group(1), match.group(2))
        elif (match := ROW.match(line)) and section is not None:
            key = (section[1], match.group(2))
            assert key not in rows, f"{key} is listed twice"
            rows[key] = (section[0], match.group(1), match.group(3))
    return rows


def _ported() -> dict[tuple[str, str], str]:
    """(file, test) -> docstring of every seed test that ports a CoreAI test."""
    tests: dict[tuple[str, str], str] = {}
    for path in sorted((ROOT / "tests" / "seed").glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            doc = ast.get_docstring(node)
            if doc and "Ports " in doc:
                tests[(str(path.relative_to(ROOT)), node.name)] = doc
    return tests


def test_every_ported_test_is_listed_and_every_row_names_a_ported_test():
    assert set(_table()) == set(_ported())


def test_each_row_names_the_coreai_test_its_port_names():
    ported = _ported()
    for key, (coreai_class, coreai_test, _) in _table().items():
        assert f"Ports {coreai_class}.{coreai_test}." in ported[key] + ".", key


def test_a_row_departs_exactly_when_its_test_says_so_and_cites_the_contract():
    ported = _ported()
    for key, (_, _, result) in _table().items():
        says_departs = "departs" in ported[key].lower()
        assert ("departs" in result) == says_departs, key
        if says_departs:
            assert "contract" in result and "contract" in ported[key], key
