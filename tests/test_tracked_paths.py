"""The repository checks out on Windows and macOS and imports into Unity: every tracked path passes
tools/portable_paths.py (reserved characters and names, trailing dots and spaces, case-insensitive collisions, the
MAX_PATH budgets) and tools/unity_assets.py (each package asset with its .meta and each .meta with its asset; no
shipped assembly referencing the engine stubs). Each rule is shown failing on a path planted in a scratch git
repository."""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from tools import portable_paths, unity_assets
from tools.portable_paths import budgets, package_name, portability_problems, tracked_paths
from tools.unity_assets import meta_problems, package_problems, stub_reference_problems

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "com.coreai.agent-memory"


def _repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository at root whose index holds `files` (path -> text)."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def _package(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal, valid package tree plus `extra`."""
    meta = "fileFormatVersion: 2\nguid: 0123456789abcdef0123456789abcdef\n"
    return {"unity_package/package.json": f'{{"name": "{PACKAGE}"}}', "unity_package/package.json.meta": meta,
            "README.md": "# x\n", **(extra or {})}


def _portability(root: Path) -> list[str]:
    return portability_problems(tracked_paths(root), package_name(root))


# ----------------------------------------------------------------------------------------------- this repository


def test_every_tracked_path_of_this_repository_checks_out_on_windows_and_macos() -> None:
    paths = tracked_paths(ROOT)
    assert "unity_package/package.json" in paths and len(paths) > 500
    assert portability_problems(paths, package_name(ROOT)) == []


def test_the_package_has_every_meta_and_no_shipped_assembly_references_the_stubs() -> None:
    assert package_problems(ROOT) == []
    assert portable_paths.main([str(ROOT)]) == 0 and unity_assets.main([str(ROOT)]) == 0


def test_the_path_budgets_leave_room_for_a_unity_project_on_windows() -> None:
    # 259 - len(r"C:\Users\<20>\Documents\Unity Projects\<30>\Library\PackageCache\com.coreai.agent-memory@<12>\")
    assert budgets(PACKAGE) == {"package": 259 - 144, "repository": 259 - 74}
    longest = max(len(p.removeprefix("unity_package/")) for p in tracked_paths(ROOT) if p.startswith("unity_package/"))
    assert longest < budgets(PACKAGE)["package"]


# ------------------------------------------------------------------------------------------ planted bad paths


@pytest.mark.parametrize(("planted", "reason"), [
    ("unity_package/Tests/Scenarios:.meta", "reserved character ':'"),
    ("docs/what?.md", "reserved character '?'"),
    ("docs/a<b>.md", "reserved character '<', '>'"),
    ('docs/say "hi".md', "reserved character '\"'"),
    ("docs/a|b.md", "reserved character '|'"),
    ("docs/glob*.md", "reserved character '*'"),
    ("docs/back\\slash.md", "reserved character '\\\\'"),
    ("docs/tab\there.md", "reserved character '\\t'"),
    ("docs/CON", "a reserved Windows device name"),
    ("docs/nul.txt", "a reserved Windows device name"),
    ("aux/readme.md", "a reserved Windows device name"),
    ("unity_package/Lpt9.cs", "a reserved Windows device name"),
    ("docs/com0.tar.gz", "a reserved Windows device name"),
    ("docs/COM\u00b9.md", "a reserved Windows device name"),
    ("docs/notes.", "ends with a dot or a space"),
    ("docs/notes /a.md", "ends with a dot or a space"),
])
def test_a_name_windows_refuses_is_reported(tmp_path: Path, planted: str, reason: str) -> None:
    root = _repo(tmp_path / "repo", _package({planted: "x"}))
    assert planted in tracked_paths(root)
    problems = _portability(root)
    assert len(problems) == 1 and problems[0].startswith(planted + ": ") and reason in problems[0], problems


def test_names_that_only_look_reserved_are_fine(tmp_path: Path) -> None:
    fine = ["docs/CONSOLE.md", "docs/com10.md", "docs/nul-device.md", "docs/.hidden", "docs/a.b.c", "docs/x~",
            "docs/Samples~/COMPANY.md"]
    root = _repo(tmp_path / "repo", _package({p: "x" for p in fine}))
    assert _portability(root) == []


@pytest.mark.parametrize("pair", [
    ("README.md", "ReadMe.md"),
    ("docs/Guide/a.md", "docs/guide/b.md"),  # two folders that become one
    (unicodedata.normalize("NFC", "docs/caf\u00e9.md"), unicodedata.normalize("NFD", "docs/caf\u00e9.md")),
])
def test_paths_a_case_insensitive_file_system_merges_are_reported(tmp_path: Path, pair: tuple[str, str]) -> None:
    root = _repo(tmp_path / "repo", _package({pair[1]: "x"}))
    (root / pair[0]).parent.mkdir(parents=True, exist_ok=True)
    (root / pair[0]).write_text("y", encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "--", pair[0]], check=True)
    problems = _portability(root)
    assert len(problems) == 1 and "the same path as" in problems[0] and "case-insensitive" in problems[0], problems


def test_a_path_over_the_windows_budget_is_reported(tmp_path: Path) -> None:
    limits = budgets(PACKAGE)
    inside = "unity_package/" + "d" * 50 + "/" + "f" * (limits["package"] - 51)  # exactly the budget: fine
    root = _repo(tmp_path / "repo", _package({inside: "x"}))
    assert _portability(root) == []
    too_long = inside + "x"
    (root / too_long).write_text("x", encoding="utf-8")
    outside = "e" * 100 + "/" + "g" * (limits["repository"] - 100)  # one over, outside the package
    (root / outside).parent.mkdir()
    (root / outside).write_text("x", encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    problems = _portability(root)
    assert len(problems) == 2, problems
    assert problems[0].startswith(outside + ": ") and f"over the {limits['repository']}" in problems[0]
    assert problems[1].startswith(too_long + ": ") and f"over the {limits['package']}" in problems[1]


def test_outside_a_git_checkout_the_walk_finds_what_git_tracks(tmp_path: Path) -> None:
    files = _package({".gitignore": "build/\n*.pyc\n/dist/\nunity_package/.build/\n", "src/a.py": "",
                      "src/sub/dist/kept.txt": "", "docs/a:b.md": ""})
    root = _repo(tmp_path / "repo", files)
    for ignored in ("build/x.o", "src/build/y.o", "src/a.pyc", "dist/z.tar.gz", "unity_package/.build/C.dll"):
        (root / ignored).parent.mkdir(parents=True, exist_ok=True)
        (root / ignored).write_text("", encoding="utf-8")
    tracked = tracked_paths(root)
    assert sorted(files) == tracked
    shutil.rmtree(root / ".git")  # an exported tree: no git checkout
    assert tracked_paths(root) == tracked
    assert len(_portability(root)) == 1  # the colon, found without git


# ---------------------------------------------------------------------------------------------------- .meta files

META = "fileFormatVersion: 2\nguid: {:032x}\n"


def _metas(*assets: str) -> dict[str, str]:
    return {f"unity_package/{a}.meta": META.format(i) for i, a in enumerate(assets)}


def test_a_complete_package_has_no_meta_problem() -> None:
    paths = sorted([*_metas("Runtime", "Runtime/A.cs", "README.md"), "unity_package/Runtime/A.cs",
                    "unity_package/README.md",
                    # Unity ignores these, so they need none:
                    "unity_package/.gitignore", "unity_package/Samples~/Demo/Demo.cs", "unity_package/Docs~/x.md",
                    "unity_package/Runtime/cvs/Entries", "unity_package/Runtime/B.cs.tmp",
                    # a sample may pin its GUIDs (copied into Assets/ with them on import)
                    "unity_package/Samples~/Demo.meta", "unity_package/Samples~/Demo/Demo.cs.meta"])
    assert meta_problems(paths) == []


@pytest.mark.parametrize(("paths", "expected"), [
    (["unity_package/Runtime/A.cs", *_metas("Runtime")], "unity_package/Runtime/A.cs: a file without A.cs.meta"),
    (["unity_package/Runtime/A.cs", *_metas("Runtime/A.cs")], "unity_package/Runtime: a folder without Runtime.meta"),
    ([*_metas("Old.cs")], "unity_package/Old.cs.meta: a .meta without its asset 'Old.cs'"),
    ([*_metas("Gone")], "unity_package/Gone.meta: a .meta without its asset 'Gone'"),  # a folder git cannot keep empty
    (["unity_package/Tests/Scenarios/A.cs", *_metas("Tests", "Tests/Scenarios", "Tests/Scenarios/A.cs",
                                                     "Tests/Scenarios:")],
     "unity_package/Tests/Scenarios:.meta: a .meta without its asset 'Tests/Scenarios:'"),
    (["unity_package/Samples~/Demo/A.cs", *_metas("Samples~")],
     "unity_package/Samples~.meta: a .meta of 'Samples~', which Unity ignores"),
    (["unity_package/Samples~/Demo/A.cs", *_metas("Samples~/Demo/B.cs")],
     "unity_package/Samples~/Demo/B.cs.meta: a .meta without its asset"),
])
def test_a_missing_or_orphan_meta_is_reported(paths: list[str], expected: str) -> None:
    problems = meta_problems(sorted(paths))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_the_meta_rules_run_on_the_tracked_files_of_a_checkout(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo", _package({"unity_package/Runtime/A.cs": "", **_metas("Runtime", "Orphan.cs")}))
    assert package_problems(root) == [
        "unity_package/Runtime/A.cs: a file without A.cs.meta (Unity ignores it in a git package)",
        "unity_package/Orphan.cs.meta: a .meta without its asset 'Orphan.cs' (Unity warns and deletes it)",
    ]
    assert unity_assets.main([str(root)]) == 1


# ----------------------------------------------------------------------------------------------- the engine stubs

STUB_ENGINE = """// Stub only.
namespace UnityEngine
{
    public sealed class StubEngineStateAttribute : System.Attribute { }
    public static class StubEngine { public static void BecomeMainThread() { } }
    public class MonoBehaviour { }
}
"""
STUB_ASMDEF = '{"name": "CoreAI.Tests.Stubs", "defineConstraints": ["COREAI_BUILD_UNITY_STUBS_OUTSIDE_UNITY"]}'
CLEAN = ("using UnityEngine;\nnamespace CoreAI.X\n{\n    // Tested with StubEngine outside Unity.\n"
         "    public class A : MonoBehaviour { string s = \"StubEngine\"; }\n}\n")


def _stubbed(extra: dict[str, str], stubs_at: str = "unity_package/Tests/Stubs") -> dict[str, str]:
    """A package with a runtime assembly, a test assembly, the stubs at `stubs_at`, plus `extra`."""
    files = {
        f"{stubs_at}/UnityEngine/StubEngine.cs": STUB_ENGINE,
        "unity_package/Runtime/CoreAI.Runtime.asmdef": '{"name": "CoreAI.Runtime", "references": []}',
        "unity_package/Runtime/A.cs": CLEAN,
        "unity_package/Tests/Runtime/CoreAI.Tests.Runtime.asmdef":
            '{"name": "CoreAI.Tests.Runtime", "references": ["CoreAI.Tests.Stubs"], '
            '"defineConstraints": ["UNITY_INCLUDE_TESTS"]}',
        "unity_package/Tests/Runtime/T.cs": "namespace CoreAI.Tests { class T { void F() { UnityEngine.StubEngine"
                                            ".BecomeMainThread(); } } }",
    }
    if stubs_at.startswith("unity_package/"):
        files[f"{stubs_at}/CoreAI.Tests.Stubs.asmdef"] = STUB_ASMDEF
        files[f"{stubs_at}/CoreAI.Tests.Stubs.asmdef.meta"] = "guid: 5ab0000000000000000000000000000f\n"
    return {**files, **extra}


def _stub_problems(files: dict[str, str]) -> list[str]:
    paths = sorted(files)
    return stub_reference_problems(paths, files.__getitem__)


@pytest.mark.parametrize("stubs_at", ["unity_package/Tests/Stubs", "tests/unity_stubs"])
def test_tests_may_use_the_stubs_and_shipped_code_only_unitys_names(stubs_at: str) -> None:
    assert _stub_problems(_stubbed({}, stubs_at)) == []


@pytest.mark.parametrize("stubs_at", ["unity_package/Tests/Stubs", "tests/unity_stubs"])
@pytest.mark.parametrize(("path", "text", "expected"), [
    ("unity_package/Runtime/B.cs", "namespace CoreAI.X { class B { void F() {"
                                   " UnityEngine.StubEngine.BecomeMainThread();"
                                   " } } }", "references StubEngine"),
    ("unity_package/Runtime/B.cs", "namespace CoreAI.X { [UnityEngine.StubEngineState] class B { } }",
     "references StubEngineState"),
    ("unity_package/Runtime/B.cs",
     "#if COREAI_BUILD_UNITY_STUBS_OUTSIDE_UNITY\nnamespace CoreAI.X { class B { } }\n#endif",
     "references COREAI_BUILD_UNITY_STUBS_OUTSIDE_UNITY"),
    ("unity_package/Runtime/Fake/Application.cs", "namespace UnityEngine { public static class Application { } }",
     "declares Unity's own namespace"),
    ("unity_package/Editor/CoreAI.Editor.asmdef", '{"name": "CoreAI.Editor", "references": ["CoreAI.Tests.Stubs"]}',
     None),
    ("unity_package/Editor/CoreAI.Editor.asmdef",
     '{"name": "CoreAI.Editor", "references": ["GUID:5ab0000000000000000000000000000f"]}', None),
    ("unity_package/Samples~/Demo/Demo.cs", "namespace Demo { class D { object o = typeof(UnityEngine.StubEngine); } }",
     "references StubEngine"),
])
def test_a_shipped_file_that_references_the_stubs_is_reported(stubs_at: str, path: str, text: str,
                                                               expected: str | None) -> None:
    problems = _stub_problems(_stubbed({path: text}, stubs_at))
    if expected is None:  # an asmdef reference: only meaningful while the stubs have an asmdef
        if not stubs_at.startswith("unity_package/"):
            assert problems == []
            return
        expected = "references the stub assembly"
    assert len(problems) == 1 and problems[0].startswith(path + ": ") and expected in problems[0], problems


def test_the_stub_rule_reads_the_tracked_files_of_a_checkout(tmp_path: Path) -> None:
    bad = "unity_package/Runtime/B.cs"
    root = _repo(tmp_path / "repo", _stubbed({bad: "namespace CoreAI.X { class B { object o = typeof(UnityEngine."
                                                  "StubEngine); } }"}))
    problems = stub_reference_problems(tracked_paths(root), lambda p: (root / p).read_text(encoding="utf-8"))
    assert problems == [f"{bad}: references StubEngine, which only the engine stubs have"]
