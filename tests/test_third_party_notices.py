"""LICENSE and THIRD_PARTY_NOTICES.md: every distribution a frozen build bundles is listed, and the build ships both."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from packaging.requirements import Requirement

from tools.build_runtime import NOTICES, copy_notices

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "coreai-runtime"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions(root: str = PROJECT, extras: frozenset[str] = frozenset({"serve"})) -> set[str]:
    """Installed distributions the frozen runtime carries: the transitive requirements of `root` with the hosted
    runtime's extra (not dev, not the server store, not PyInstaller)."""
    found: dict[str, set[str]] = {}
    pending: list[tuple[str, frozenset[str]]] = [(root, extras)]
    while pending:
        name, extras = pending.pop()
        key = _canonical(name)
        if key in found and extras <= found[key]:
            continue
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:  # an unmet optional marker, e.g. another platform's
            continue
        found[key] = found.get(key, set()) | extras
        for text in requires:
            req = Requirement(text)
            environments = [{"extra": extra} for extra in (extras or {""})]  # evaluate() adds this machine's
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                pending.append((req.name, frozenset(req.extras)))
    found.pop(_canonical(root))
    return set(found)


def test_every_bundled_distribution_is_in_the_notices() -> None:
    notices = (ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8").lower()
    bundled = runtime_distributions()
    assert {"llama-cpp-python", "grpcio", "numpy", "uvicorn"} <= bundled  # the walk really follows requirements
    missing = sorted(name for name in bundled if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", notices))
    assert missing == [], f"add these to THIRD_PARTY_NOTICES.md with their licence: {missing}"


def test_project_is_mit_licensed() -> None:
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    fields = importlib.metadata.metadata(PROJECT).json
    assert "MIT" in (fields.get("license_expression") or fields.get("license") or "")


def test_the_build_copies_the_notices_into_the_shipped_folder(tmp_path: Path) -> None:
    copy_notices(tmp_path)
    for name in NOTICES:
        assert (tmp_path / name).read_bytes() == (ROOT / name).read_bytes()
