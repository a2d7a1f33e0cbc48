"""The UPM package as Unity imports it from a git URL, checked on the tracked paths alone.

`.meta` files. A git-URL package is immutable: Unity cannot write a missing `.meta`, so it ignores the asset ("has
no meta file, but it's in an immutable folder"), and it deletes (or warns about) a `.meta` whose asset is missing.
Unity ignores, and needs no `.meta` for, a file or folder whose name starts with `.` or ends with `~`, is named
`cvs`, or a file with the extension `.tmp` (the manual's "Hidden Assets"), and everything inside such a folder
(`Samples~`): there a `.meta` is optional, but one without its asset is still wrong (a sample is copied into
Assets/ on import, where Unity deletes it with a warning). A `.meta` of an ignored asset (`Samples~.meta`) is one
without its asset: Unity never sees the asset and warns about the `.meta`.

The engine stubs (a fake UnityEngine/UnityEditor for compiling and running the package outside Unity) must never
reach a user's build: no file of the package's runtime, editor or sample assemblies may reference them. Found by
rule, wherever the stubs live: stub sources are the `.cs` files that declare Unity's own namespaces
(`UnityEngine`, `UnityEditor` and theirs: Unity's real ones are compiled DLLs, never sources); stub-only types are
the types they declare named `Stub…`; the stub assembly is an asmdef whose folder holds stub sources or whose
define constraints name the stubs' define.

Usage: python tools/unity_assets.py [ROOT]   (prints each problem; exit status 1 when there is one)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from tools.portable_paths import PACKAGE_FOLDER, ROOT, tracked_paths

META = ".meta"
# The define the stub assembly is compiled under (never defined in Unity, so Unity never compiles it).
STUB_DEFINE = "COREAI_BUILD_UNITY_STUBS_OUTSIDE_UNITY"
UNITY_NAMESPACES = ("UnityEngine", "UnityEditor")
# What makes an asmdef a test assembly in Unity's Test Framework.
TEST_MARKERS = ("UNITY_INCLUDE_TESTS", "UnityEngine.TestRunner", "UnityEditor.TestRunner", "nunit.framework.dll")

Reader = Callable[[str], str]


def ignored_by_unity(name: str, is_folder: bool) -> bool:
    """Whether Unity's import skips a file or folder of this name (and, for a folder, everything inside)."""
    return (name.startswith(".") or name.endswith("~") or name.lower() == "cvs"
            or (not is_folder and name.lower().endswith(".tmp")))


def _inside_ignored_folder(parts: Sequence[str]) -> bool:
    return any(ignored_by_unity(part, True) for part in parts[:-1])


def meta_problems(paths: Sequence[str], package_folder: str = PACKAGE_FOLDER) -> list[str]:
    """Each asset of the package without its `.meta` and each `.meta` without its asset, one line each."""
    prefix = package_folder + "/"
    inside = [p[len(prefix):] for p in paths if p.startswith(prefix)]
    files = {p for p in inside if not p.endswith(META)}
    metas = {p for p in inside if p.endswith(META)}
    folders = {str(parent) for p in files for parent in PurePosixPath(p).parents if str(parent) != "."}
    problems = []
    for asset in sorted(files | folders):
        parts = asset.split("/")
        if _inside_ignored_folder(parts) or ignored_by_unity(parts[-1], asset in folders):
            continue
        if asset + META not in metas:
            kind = "folder" if asset in folders else "file"
            problems.append(f"{prefix}{asset}: a {kind} without {parts[-1]}{META} (Unity ignores it in a git package)")
    for meta in sorted(metas):
        asset = meta[: -len(META)]
        parts = asset.split("/")
        if asset not in files and asset not in folders:
            problems.append(f"{prefix}{meta}: a .meta without its asset {asset!r} (Unity warns and deletes it)")
        elif ignored_by_unity(parts[-1], asset in folders) and not _inside_ignored_folder(parts):
            problems.append(f"{prefix}{meta}: a .meta of {parts[-1]!r}, which Unity ignores (it warns about the .meta)")
    return problems


def _code(text: str) -> str:
    """C# source without its comments and string literals (what the compiler resolves names in)."""
    pattern = r'//[^\n]*|/\*.*?\*/|@"(?:[^"]|"")*"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, lambda m: '""' if m.group(0)[:1] in '"@\'' else " ", text, flags=re.S)


_UNITY_NAMESPACE = re.compile(r"^\s*namespace\s+(?:" + "|".join(UNITY_NAMESPACES) + r")\b", re.M)
_TYPE = re.compile(r"\b(?:class|struct|interface|enum|delegate\s+[\w<>\[\],.?]+)\s+(Stub\w*)")


def stub_sources(paths: Sequence[str], read: Reader) -> list[str]:
    """The tracked `.cs` files that declare Unity's own namespaces: the engine stubs."""
    return [p for p in paths if p.endswith(".cs") and _UNITY_NAMESPACE.search(_code(read(p)))]


def _asmdefs(paths: Sequence[str], read: Reader) -> dict[str, dict[str, object]]:
    found = {}
    for path in paths:
        if path.endswith(".asmdef"):
            value = json.loads(read(path))
            if isinstance(value, dict):
                found[path] = value
    return found


def _owner(path: str, folders: dict[str, str]) -> str | None:
    """The asmdef that compiles `path`: Unity's rule, the nearest folder up holding one."""
    for parent in PurePosixPath(path).parents:
        if str(parent) in folders:
            return folders[str(parent)]
    return None


def _strings(asmdef: dict[str, object], *keys: str) -> list[str]:
    found: list[str] = []
    for key in keys:
        value = asmdef.get(key)
        if isinstance(value, list):
            found += [str(v) for v in value]
    return found


def stub_reference_problems(paths: Sequence[str], read: Reader, package_folder: str = PACKAGE_FOLDER) -> list[str]:
    """Each file of the package's shipped (non-test) assemblies that references the engine stubs, one line each."""
    stubs = set(stub_sources(paths, read))
    declared = {name for path in stubs for name in _TYPE.findall(_code(read(path)))}
    stub_types = declared | {name.removesuffix("Attribute") for name in declared}  # [StubX] is StubXAttribute
    asmdefs = _asmdefs(paths, read)
    folders = {str(PurePosixPath(path).parent): path for path in asmdefs}
    owned: dict[str, list[str]] = {}
    for path in paths:
        if path.endswith(".cs") and (owner := _owner(path, folders)) is not None:
            owned.setdefault(owner, []).append(path)
    # The stub assembly: compiled under the stubs' define, or made of stub sources only (a stub that strays into a
    # shipped assembly must not make that assembly count as the stubs').
    stub_asmdefs = {path for path, a in asmdefs.items() if STUB_DEFINE in _strings(a, "defineConstraints")
                    or (owned.get(path) and set(owned[path]) <= stubs)}
    stub_names = {str(asmdefs[path].get("name")) for path in stub_asmdefs}
    defines = {STUB_DEFINE} | {d for path in stub_asmdefs for d in _strings(asmdefs[path], "defineConstraints")}

    def shipped(path: str) -> bool:
        owner = _owner(path, folders) if not path.endswith(".asmdef") else path
        if owner in stub_asmdefs:
            return False
        return owner is None or not any(m in _strings(asmdefs[owner], "references", "defineConstraints",
                                                      "precompiledReferences") for m in TEST_MARKERS)

    words = re.compile(r"\b(" + "|".join(map(re.escape, sorted(defines | stub_types))) + r")\b")
    problems = []
    for path in paths:
        if not path.startswith(package_folder + "/") or not shipped(path):
            continue
        if path.endswith(".asmdef"):
            for ref in _strings(asmdefs[path], "references"):
                if ref in stub_names or ref.removeprefix("GUID:") in _stub_guids(stub_asmdefs, paths, read):
                    problems.append(f"{path}: references the stub assembly {ref!r}")
            for define in set(_strings(asmdefs[path], "defineConstraints")) & defines:
                problems.append(f"{path}: compiled only under the stubs' define {define}")
        elif path.endswith(".cs"):
            if path in stubs:
                problems.append(f"{path}: declares Unity's own namespace (an engine stub) in a shipped assembly")
                continue
            for name in sorted(set(words.findall(_code(read(path))))):  # preprocessor lines included
                problems.append(f"{path}: references {name}, which only the engine stubs have")
    return problems


def _stub_guids(stub_asmdefs: set[str], paths: Sequence[str], read: Reader) -> set[str]:
    guids = set()
    for path in stub_asmdefs:
        if path + META in paths:
            match = re.search(r"^guid: ([0-9a-f]{32})$", read(path + META), re.M)
            if match:
                guids.add(match.group(1))
    return guids


def package_problems(root: Path = ROOT) -> list[str]:
    """Every `.meta` and stub-reference problem of the repository at root."""
    paths = tracked_paths(root)

    def read(path: str) -> str:
        return (root / path).read_text(encoding="utf-8-sig")

    return meta_problems(paths) + stub_reference_problems(paths, read)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    problems = package_problems(Path(args[0]) if args else ROOT)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
