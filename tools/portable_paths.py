"""Every tracked path must check out on Windows and macOS: `git clone`, a CI runner and Unity's Package Manager
("Add package from git URL") all fail on a name Windows refuses, and silently merge two names a case-insensitive
file system cannot tell apart.

The rules (Microsoft's "Naming Files, Paths, and Namespaces"; APFS and NTFS are case-insensitive by default, APFS
also ignores Unicode normalization):

- no reserved character `<>:"|?*`, backslash or control character (0-31) in a name;
- no reserved device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, also COM¹²³/LPT¹²³), with or without an extension;
- no name ending in a dot or a space (Windows strips them: the checkout writes another name);
- no two paths (or folders) equal once case-folded and NFC-normalized;
- no path longer than what MAX_PATH leaves after the folder it lands in (see the two budgets below).

Usage: python tools/portable_paths.py [ROOT]   (prints each problem; exit status 1 when there is one)
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FOLDER = "unity_package"

RESERVED_CHARACTERS = frozenset('<>:"|?*\\') | frozenset(chr(c) for c in range(32))
RESERVED_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"{device}{n}" for device in ("COM", "LPT") for n in (*"0123456789", "\u00b9", "\u00b2", "\u00b3")]
)

# Windows' MAX_PATH is 260 characters with the terminating NUL: 259 for the path itself.
MAX_PATH = 259
# Where the package lands on a Unity developer's Windows machine: Package Manager clones a git URL into the project's
# Library/PackageCache/<name>@<hash> (10 hex digits of the commit in Unity 2021-2022; 12 allowed for a longer one).
# The user name is at most 20 characters (the SAM account name limit); 30 for the project's folder name is generous.
PACKAGE_PREFIX = ("C:\\Users\\{user:20}\\Documents\\Unity Projects\\{project:30}\\"
                  "Library\\PackageCache\\{package}@{hash:12}\\")
# Where a developer clones the repository (Visual Studio's default folder).
CLONE_PREFIX = "C:\\Users\\{user:20}\\source\\repos\\{repository:30}\\"


def prefix_length(template: str, **names: str) -> int:
    """The length of a prefix template: `{name:N}` counts N characters, `{name}` the length of names[name]."""
    length, rest = 0, template
    while "{" in rest:
        head, _, rest = rest.partition("{")
        field, _, rest = rest.partition("}")
        name, _, width = field.partition(":")
        length += len(head) + (int(width) if width else len(names[name]))
    return length + len(rest)


def package_name(root: Path = ROOT) -> str:
    """The UPM package's name (its package.json's `name`)."""
    manifest = json.loads((root / PACKAGE_FOLDER / "package.json").read_text(encoding="utf-8"))
    name = manifest["name"]
    assert isinstance(name, str)
    return name


def budgets(package: str) -> dict[str, int]:
    """The longest path allowed inside the package folder and inside the repository."""
    return {
        "package": MAX_PATH - prefix_length(PACKAGE_PREFIX, package=package),
        "repository": MAX_PATH - prefix_length(CLONE_PREFIX),
    }


def name_problems(name: str) -> list[str]:
    """Why Windows or macOS refuses (or rewrites) one path component; empty when it is fine."""
    problems = []
    bad = sorted({c for c in name if c in RESERVED_CHARACTERS})
    if bad:
        problems.append("reserved character " + ", ".join(repr(c) for c in bad))
    if name.endswith((".", " ")):
        problems.append("ends with a dot or a space (Windows strips it)")
    if name.split(".")[0].rstrip(" ").upper() in RESERVED_NAMES:
        problems.append("a reserved Windows device name")
    return problems


def _folders(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def collisions(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of distinct paths or folders that a case-insensitive, normalization-insensitive file system merges."""
    seen: dict[str, str] = {}
    found = []
    every = set(paths)
    for path in sorted(every | {folder for file in every for folder in _folders(file)}):
        key = unicodedata.normalize("NFC", path).casefold()
        if key in seen and seen[key] != path:
            found.append((seen[key], path))
        seen.setdefault(key, path)
    return found


def portability_problems(paths: Sequence[str], package: str, package_folder: str = PACKAGE_FOLDER) -> list[str]:
    """Every problem of the tracked paths (POSIX, relative to the repository), one line each."""
    limits = budgets(package)
    problems = []
    for path in paths:
        for part in path.split("/"):
            for problem in name_problems(part):
                problems.append(f"{path}: {part!r}: {problem}")
        if len(path) > limits["repository"]:
            problems.append(f"{path}: {len(path)} characters, over the {limits['repository']} a clone under "
                            f"{CLONE_PREFIX!r} leaves of Windows' MAX_PATH")
        inside = path.removeprefix(package_folder + "/") if path.startswith(package_folder + "/") else None
        if inside is not None and len(inside) > limits["package"]:
            problems.append(f"{path}: {len(inside)} characters inside the package, over the {limits['package']} that "
                            f"{PACKAGE_PREFIX!r} leaves of Windows' MAX_PATH")
    for first, second in collisions(paths):
        problems.append(f"{second}: the same path as {first} on a case-insensitive file system (Windows, macOS)")
    return problems


def tracked_paths(root: Path = ROOT) -> list[str]:
    """The repository's tracked files (`git ls-files`); outside a git checkout, the files .gitignore keeps."""
    try:
        result = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=False)
    except FileNotFoundError:  # no git installed
        result = None
    if result is not None and result.returncode == 0 and _is_top_level(root):
        return sorted(p for p in result.stdout.decode("utf-8", "surrogateescape").split("\0") if p)
    return walked_paths(root)


def _is_top_level(root: Path) -> bool:
    result = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                            check=False)
    return result.returncode == 0 and Path(result.stdout.strip()).resolve() == root.resolve()


def walked_paths(root: Path) -> list[str]:
    """The files under root that the root .gitignore does not ignore (its plain patterns: globs, `/` anchors)."""
    ignore = root / ".gitignore"
    patterns = [line.strip() for line in ignore.read_text(encoding="utf-8").splitlines()] if ignore.is_file() else []
    # .git: a folder, or a file in a worktree
    patterns = [p for p in patterns if p and not p.startswith(("#", "!"))] + [".git"]
    found = []
    for folder, dirs, files in os.walk(root):
        rel = PurePosixPath(Path(folder).relative_to(root).as_posix())
        dirs[:] = sorted(d for d in dirs if not _ignored(rel / d, True, patterns))
        found += [(rel / f).as_posix() for f in files if not _ignored(rel / f, False, patterns)]
    return sorted(found)


def _ignored(path: PurePosixPath, is_dir: bool, patterns: Sequence[str]) -> bool:
    text = str(path).removeprefix("./")
    for pattern in patterns:
        if pattern.endswith("/"):
            if not is_dir:
                continue
            pattern = pattern[:-1]
        if "/" in pattern:  # anchored at the root
            if fnmatch.fnmatchcase(text, pattern.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(path.name, pattern):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else ROOT
    problems = portability_problems(tracked_paths(root), package_name(root))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
