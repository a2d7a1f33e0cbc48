"""Compile the Unity package's C# with Mono's `mcs` (C# 7.2, the subset Unity also compiles).

Assemblies, written to `unity_package/.build/` (git-ignored) next to a copy of Newtonsoft.Json.dll:

- `CoreAI.Runtime.Core.dll`   from `Runtime/Core/**/*.cs` (no UnityEngine reference)
- stub `UnityEngine.dll`      from `Tests/Stubs/**/*.cs` (a sub-folder `Tests/Stubs/<Name>/` whose name
                              is not `UnityEngine` becomes its own `<Name>.dll`, e.g. `UnityEditor`)
- `CoreAI.Runtime.Unity.dll`  from `Runtime/Unity/**/*.cs` against Core and the stubs
- `CoreAI.Editor.dll`         from `Editor/**/*.cs` against all of the above (when present)

An assembly is rebuilt only when its sources, references or flags changed. Any compile error fails
the build with mcs's full output.

Usage: python tools/build_csharp.py [core|unity|editor|all] [--out DIR]   (default: all)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "unity_package"
DEFAULT_OUT = PACKAGE / ".build"
NEWTONSOFT = Path("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll")
LANG_VERSION = "7.2"
FRAMEWORK_REFS = ("System", "System.Core", "System.Net.Http", "System.Runtime.Serialization", "System.Xml")
CORE = "CoreAI.Runtime.Core"
UNITY = "CoreAI.Runtime.Unity"
EDITOR = "CoreAI.Editor"


class BuildError(RuntimeError):
    """mcs refused the sources; the message holds its output."""


def sources(folder: Path) -> list[Path]:
    """Every .cs file under folder, sorted (so the build is reproducible)."""
    return sorted(folder.rglob("*.cs")) if folder.is_dir() else []


def compile_assembly(
    name: str,
    files: Sequence[Path],
    out_dir: Path,
    references: Sequence[Path] = (),
    *,
    defines: Sequence[str] = (),
) -> Path:
    """Compile files into out_dir/<name>.dll (skipped when nothing changed); raises BuildError."""
    if not files:
        raise BuildError(f"{name}: no C# sources")
    out_dir.mkdir(parents=True, exist_ok=True)
    newtonsoft = _newtonsoft(out_dir)
    target = out_dir / f"{name}.dll"
    args = [
        "mcs",
        f"-langversion:{LANG_VERSION}",
        "-target:library",
        "-debug",
        "-nowarn:1591",  # missing XML docs on generated members
        f"-out:{target}",
        *[f"-r:{ref}" for ref in FRAMEWORK_REFS],
        f"-r:{newtonsoft}",
        *[f"-r:{ref}" for ref in references],
        *[f"-define:{d}" for d in defines],
        *[str(f) for f in files],
    ]
    stamp = target.with_suffix(".dll.stamp")
    digest = _digest(args, [*files, *references])
    if target.exists() and stamp.exists() and stamp.read_text() == digest:
        return target
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not target.exists():
        stamp.unlink(missing_ok=True)
        raise BuildError(f"mcs failed to build {name}.dll (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    stamp.write_text(digest)
    return target


def build_core(out_dir: Path = DEFAULT_OUT) -> Path:
    """CoreAI.Runtime.Core.dll."""
    return compile_assembly(CORE, sources(PACKAGE / "Runtime" / "Core"), out_dir)


def build_stubs(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """The stub Unity assemblies from Tests/Stubs (UnityEngine.dll first)."""
    stubs = PACKAGE / "Tests" / "Stubs"
    if not stubs.is_dir():
        return []
    own = sorted(p for p in stubs.iterdir() if p.is_dir() and p.name != "UnityEngine")
    engine_files = [f for f in sources(stubs) if not any(d in f.parents for d in own)]
    built = [compile_assembly("UnityEngine", engine_files, out_dir)] if engine_files else []
    for folder in own:
        if sources(folder):
            built.append(compile_assembly(folder.name, sources(folder), out_dir, built[:1]))
    return built


def build_unity(out_dir: Path = DEFAULT_OUT) -> Path | None:
    """CoreAI.Runtime.Unity.dll (None when Runtime/Unity has no sources yet)."""
    files = sources(PACKAGE / "Runtime" / "Unity")
    if not files:
        return None
    core = build_core(out_dir)
    return compile_assembly(UNITY, files, out_dir, [core, *_engine_stubs(out_dir)])


def build_editor(out_dir: Path = DEFAULT_OUT) -> Path | None:
    """CoreAI.Editor.dll (None when Editor/ has no sources)."""
    files = sources(PACKAGE / "Editor")
    if not files:
        return None
    refs = [build_core(out_dir), *build_stubs(out_dir)]
    unity = build_unity(out_dir)
    if unity is not None:
        refs.append(unity)
    return compile_assembly(EDITOR, files, out_dir, refs)


def build(targets: Sequence[str] = ("all",), out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Build the named targets (core, unity, editor, all); returns the assemblies built."""
    wanted = {"core", "unity", "editor"} if "all" in targets else set(targets)
    built: list[Path] = []
    if "core" in wanted:
        built.append(build_core(out_dir))
    if "unity" in wanted:
        built += [p for p in (build_unity(out_dir),) if p is not None]
    if "editor" in wanted:
        built += [p for p in (build_editor(out_dir),) if p is not None]
    return built


def _engine_stubs(out_dir: Path) -> list[Path]:
    stubs = build_stubs(out_dir)
    if not stubs:
        raise BuildError("Runtime/Unity needs the stub UnityEngine sources under Tests/Stubs")
    return stubs


def _newtonsoft(out_dir: Path) -> Path:
    # A copy beside the assemblies lets Mono (and pythonnet) resolve it without a GAC entry.
    if not NEWTONSOFT.exists():
        raise BuildError(f"{NEWTONSOFT} is missing: install libnewtonsoft-json-cil-dev")
    copy = out_dir / NEWTONSOFT.name
    if not copy.exists() or copy.stat().st_size != NEWTONSOFT.stat().st_size:
        shutil.copyfile(NEWTONSOFT, copy)
    return copy


def _digest(args: Sequence[str], inputs: Sequence[Path]) -> str:
    h = hashlib.sha256("\0".join(args).encode())
    for path in inputs:
        h.update(str(path).encode() + b"\0" + Path(path).read_bytes())
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: prints the built assemblies, or mcs's errors and exits 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=["all"], choices=["core", "unity", "editor", "all"])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        for path in build(args.targets, args.out):
            print(path)
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
