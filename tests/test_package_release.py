"""One version per release, and a package README that stands on its own.

tools/package_version.py: package.json's version is the one the generated C# (CoreAIPackage.g.cs), pyproject.toml,
the newest CHANGELOG entry, the git URLs of the package README and docs/unity-quickstart.md and the URLs in
package.json carry; the release workflow runs it with the tag. The package README is what Package Manager shows: no
link out of the package but absolute ones, no `pip install`, no placeholder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tools import package_version
from tools.package_version import GENERATED, QUICKSTART, git_url, problems, render_csharp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "unity_package"
REPOSITORY = "https://github.com/coreai-runtime/coreai-runtime"


def test_the_package_its_csharp_version_the_runtime_the_changelog_and_the_docs_agree() -> None:
    assert problems(ROOT) == []
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    assert manifest["repository"] == {"type": "git", "url": REPOSITORY + ".git", "directory": "unity_package"}
    assert git_url(ROOT) == f"{REPOSITORY}.git?path=unity_package#v{manifest['version']}"
    assert f'public const string Version = "{manifest["version"]}";' in (ROOT / GENERATED).read_text(encoding="utf-8")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files the check reads, in a scratch root that a test may change."""
    for rel in ("pyproject.toml", "unity_package/package.json", "unity_package/CHANGELOG.md", "unity_package/README.md",
                QUICKSTART.as_posix(), GENERATED.as_posix()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _version(root: Path) -> str:
    return str(json.loads((root / "unity_package/package.json").read_text(encoding="utf-8"))["version"])


def test_a_version_bump_in_package_json_alone_names_every_place_left_behind(copy: Path) -> None:
    old = _version(copy)
    _edit(copy, "unity_package/package.json", f'"version": "{old}"', '"version": "0.9.0"')
    found = problems(copy)
    for place in ("CoreAIPackage.g.cs: stale", "pyproject.toml: version", "CHANGELOG.md: the newest entry",
                  "package.json: documentationUrl", "package.json: changelogUrl", "package.json: licensesUrl",
                  "unity_package/README.md: does not give the git URL", "unity_package/README.md: gives the tag v",
                  "docs/unity-quickstart.md: does not give the git URL"):
        assert any(place in line for line in found), (place, found)
    assert package_version.main(["--root", str(copy)]) == 0  # regenerates the C#
    assert not any("CoreAIPackage.g.cs" in line for line in problems(copy))
    assert package_version.main(["--check", "--root", str(copy)]) == 1


def test_the_release_tag_must_be_the_version_and_its_changelog_entry_dated(copy: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    version = _version(copy)
    head = re.search(r"^## \[[^\]]+\] - (.+)$", (copy / "unity_package/CHANGELOG.md").read_text(), re.M)
    assert head is not None
    _edit(copy, "unity_package/CHANGELOG.md", head.group(0), f"## [{version}] - Unreleased")
    assert problems(copy) == []  # between releases
    assert package_version.main(["--tag", f"v{version}", "--root", str(copy)]) == 1
    assert "a release needs its date" in capsys.readouterr().err
    _edit(copy, "unity_package/CHANGELOG.md", f"## [{version}] - Unreleased", f"## [{version}] - 2026-12-06")
    assert package_version.main(["--tag", f"v{version}", "--root", str(copy)]) == 0
    assert package_version.main(["--tag", "v9.9.9", "--root", str(copy)]) == 1
    assert f"the tag v9.9.9 is not v{version}" in capsys.readouterr().err


def test_a_repository_that_is_not_on_github_is_refused(copy: Path) -> None:
    _edit(copy, "unity_package/package.json", REPOSITORY + ".git", "https://example.com/x.git")
    assert any("is not a GitHub repository" in line for line in problems(copy))


def test_the_generated_csharp_is_what_the_tool_writes() -> None:
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    assert (ROOT / GENERATED).read_text(encoding="utf-8") == render_csharp(manifest["name"], manifest["version"])
    assert (ROOT / GENERATED).with_name(GENERATED.name + ".meta").is_file()


# ------------------------------------------------------------------------------------- the README stands alone

PYTHON_STEP = re.compile(r"(?i)\b(?:pip3?|python3?)\s+(?:install|-m\b|\S+\.py)")
PLACEHOLDER = re.compile(r"<[^>\s]*>|\bOWNER/REPO\b|example\.(?:com|org)")


def _links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"https?://[^\s)`]+", text)
    return [link.rstrip(".,;:") for link in links]


def readme_problems(text: str) -> list[str]:
    """Why a package README does not stand on its own in Package Manager."""
    found = []
    if PYTHON_STEP.search(text):
        found.append("asks for Python, which a Unity user does not run")
    for link in _links(text):
        if PLACEHOLDER.search(link):
            found.append(f"placeholder in {link}")
        elif link.startswith("https://"):
            if not link.startswith(REPOSITORY):
                found.append(f"link to another site: {link}")
        elif link.startswith(("..", "/", "http:")) or not (PACKAGE / link).is_file():
            found.append(f"link out of the package: {link}")  # Package Manager has only the package's files
    return found


def test_the_package_readme_stands_on_its_own() -> None:
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    assert readme_problems(text) == []
    assert git_url(ROOT) in text and "release" in text
    # The steps name what the package really has.
    assert "CoreAI → **Fetch Runtime for This Editor**" in text and "CoreAI → **Models and Runtime**" in text
    menus = (PACKAGE / "Editor" / "ModelsWindow.cs").read_text(encoding="utf-8")
    assert '"CoreAI/Fetch Runtime for This Editor"' in menus and '"CoreAI/Models and Runtime"' in menus
    bootstrap = (PACKAGE / "Runtime" / "Unity" / "CoreAIRuntimeBootstrap.cs").read_text(encoding="utf-8")
    assert '[AddComponentMenu("CoreAI/CoreAI Runtime Bootstrap")]' in bootstrap
    assert "Add Component → CoreAI →\n   **CoreAI Runtime Bootstrap**" in text
    sample = (PACKAGE / "Samples~" / "BlacksmithNpc" / "BlacksmithNpc.cs").read_text(encoding="utf-8")
    assert '[AddComponentMenu("CoreAI/Samples/Blacksmith NPC")]' in sample
    assert "CoreAI → Samples → **Blacksmith NPC**" in text


def test_the_readme_check_catches_what_a_package_readme_cannot_have() -> None:
    bad = ("Install [the runtime](../docs/install.md) with `pip install coreai-runtime`, then add "
           "https://<your-git-host>/<repo>.git?path=/unity_package; see [notes](Docs/missing.md) and https://x.dev/")
    assert readme_problems(bad) == [
        "asks for Python, which a Unity user does not run", "link out of the package: ../docs/install.md",
        "link out of the package: Docs/missing.md", "placeholder in https://<your-git-host>/<repo>.git?path=/unity_package",
        "link to another site: https://x.dev/"]
