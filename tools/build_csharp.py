"""Compile the Unity package's C# with Mono's `mcs` (C# 7.2, the subset Unity also compiles).

Assemblies, written to `unity_package/.build/` (git-ignored) next to a copy of Newtonsoft.Json.dll:

- `CoreAI.Client.dll`         from `Runtime/Client/**/*.cs`: API, transport, generated code (every platform, no
                              UnityEngine)
- `CoreAI.Hosting.dll`        from `Runtime/Hosting/**/*.cs` against Client: launcher, process spawning, runtime and
                              model downloads (desktop editors and players only, by its asmdef's platforms)
- stub `UnityEngine.dll`      from `tests/unity_stubs/**/*.cs`, outside the package (a sub-folder whose name is not
                              `UnityEngine` becomes its own `<Name>.dll`, e.g. `UnityEditor`); Unity never sees them
- `CoreAI.Runtime.Unity.dll`  from `Runtime/Unity/**/*.cs` against Client, Hosting and the stubs
- `CoreAI.Editor.dll`         from `Editor/**/*.cs` against all of the above (when present)
- the package's NUnit test assemblies (target `tests`), each named by its asmdef as Unity names it, so the package's
  InternalsVisibleTo means the same assembly here and in Unity: `CoreAI.Tests.Runtime` from `Tests/Runtime/**/*.cs`
  (Client, the stubs), `CoreAI.Tests.Editor` from `Tests/Editor/**/*.cs` (all of the above), both against Debian's
  NUnit 2.6.4 framework (Unity's is NUnit 3: the tests keep to what both have; docs/unity.md#testing-your-game)

An assembly is rebuilt only when its sources, references or flags changed. Any compile error fails
the build with mcs's full output.

Unity's API compatibility levels (`compile_for_api_level`, `net_standard_violations`): the ".NET Framework"
level is mirrored by compiling with -nostdlib against Mono's 4.7.1 reference assemblies that Unity references
at that level (no System.Net.Http); ".NET Standard 2.1" by checking that every framework type the compiled
assembly uses is one the netstandard facade forwards (2.0's list, a subset of 2.1's: stricter, never laxer).

Usage: python tools/build_csharp.py [client|hosting|unity|editor|tests|all] [--out DIR]   (default: all)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "unity_package"
DEFAULT_OUT = PACKAGE / ".build"
NEWTONSOFT = Path("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll")
# NUnit 2.6.4's framework, which mono-devel brings (libmono-cil-dev needs libnunit-cil-dev); no NUnit 3 is installable.
NUNIT = Path("/usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll")
LANG_VERSION = "7.2"
# No System.Net.Http: Unity's ".NET Framework" level lacks it (see compile_for_api_level).
FRAMEWORK_REFS = ("System", "System.Core", "System.Runtime.Serialization", "System.Xml")
# What Unity 2021.3+ references at the ".NET Framework" level: System.Net.Http is not among them.
NET_FRAMEWORK_API = Path("/usr/lib/mono/4.7.1-api")
NET_FRAMEWORK_REFS = ("mscorlib", "System", "System.Core", "System.Runtime.Serialization", "System.Xml",
                      "System.Xml.Linq", "System.Numerics", "System.Data")
NETSTANDARD_FACADE = NET_FRAMEWORK_API / "Facades" / "netstandard.dll"
CLIENT = "CoreAI.Client"
HOSTING = "CoreAI.Hosting"
# The stub UnityEngine/UnityEditor sources: test-only, outside the package users import.
STUBS = ROOT / "tests" / "unity_stubs"
TARGETS = ("client", "hosting", "unity", "editor", "tests")
UNITY = "CoreAI.Runtime.Unity"
EDITOR = "CoreAI.Editor"
# The package's test folders with an asmdef; the assembly name is the asmdef's (assembly_of_tests).
TEST_FOLDERS = ("Runtime", "Editor")


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
    framework: Sequence[str | Path] | None = None,
) -> Path:
    """Compile files into out_dir/<name>.dll (skipped when nothing changed); raises BuildError.

    framework: full paths of the only framework assemblies to reference (-nostdlib), e.g. an API level's set;
    None: mcs's defaults plus FRAMEWORK_REFS.
    """
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
        *_framework_args(framework),
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


def _framework_args(framework: Sequence[str | Path] | None) -> list[str]:
    if framework is None:
        return [f"-r:{ref}" for ref in FRAMEWORK_REFS]
    return ["-nostdlib", *[f"-r:{ref}" for ref in framework]]


def net_framework_refs() -> list[Path]:
    """The reference assemblies of Unity's ".NET Framework" API level (Mono's 4.7.1 reference set)."""
    refs = [NET_FRAMEWORK_API / f"{name}.dll" for name in NET_FRAMEWORK_REFS]
    missing = [str(r) for r in refs if not r.exists()]
    if missing:
        raise BuildError(f"missing reference assemblies {missing}: install mono-devel")
    return refs


def compile_for_api_level(name: str, files: Sequence[Path], out_dir: Path, references: Sequence[Path] = ()) -> Path:
    """Compile against only what Unity's ".NET Framework" level references; raises BuildError."""
    return compile_assembly(name, files, out_dir, references, framework=net_framework_refs())


def _ikdasm(dll: Path) -> str:
    result = subprocess.run(["ikdasm", str(dll)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"ikdasm failed on {dll.name}: {result.stderr.strip()}")
    return result.stdout


def netstandard_types() -> set[str]:
    """Full names of the types the netstandard facade forwards (the .NET Standard surface)."""
    return set(re.findall(r"^\.class extern forwarder (\S+)", _ikdasm(NETSTANDARD_FACADE), re.M))


def framework_type_refs(dll: Path) -> set[str]:
    """Framework types (outside Newtonsoft, Unity and this package) that dll references."""
    own = ("Newtonsoft.Json", "UnityEngine", "UnityEditor", "CoreAI.")
    refs = set()
    for assembly, type_name in re.findall(r"\[([A-Za-z][\w.]*)\]([A-Za-z_][\w.`]*)", _ikdasm(dll)):
        if not assembly.startswith(own):
            refs.add(type_name)
    return refs


def net_standard_violations(dll: Path) -> list[str]:
    """Framework types dll uses that .NET Standard lacks (empty: fine at the ".NET Standard 2.1" level)."""
    return sorted(framework_type_refs(dll) - netstandard_types())


def build_client(out_dir: Path = DEFAULT_OUT, *, defines: Sequence[str] = ()) -> Path:
    """CoreAI.Client.dll."""
    return compile_assembly(CLIENT, sources(PACKAGE / "Runtime" / "Client"), out_dir, defines=defines)


def build_hosting(out_dir: Path = DEFAULT_OUT, *, defines: Sequence[str] = ()) -> Path:
    """CoreAI.Hosting.dll (against CoreAI.Client)."""
    client = build_client(out_dir, defines=defines)
    return compile_assembly(HOSTING, sources(PACKAGE / "Runtime" / "Hosting"), out_dir, [client], defines=defines)


def build_stubs(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """The stub Unity assemblies from tests/unity_stubs (UnityEngine.dll first)."""
    stubs = STUBS
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
    refs = [build_client(out_dir), build_hosting(out_dir), *_engine_stubs(out_dir)]
    return compile_assembly(UNITY, files, out_dir, refs)


def build_editor(out_dir: Path = DEFAULT_OUT) -> Path | None:
    """CoreAI.Editor.dll (None when Editor/ has no sources)."""
    files = sources(PACKAGE / "Editor")
    if not files:
        return None
    refs = [build_client(out_dir), build_hosting(out_dir), *build_stubs(out_dir)]
    unity = build_unity(out_dir)
    if unity is not None:
        refs.append(unity)
    return compile_assembly(EDITOR, files, out_dir, refs)


def assembly_of_tests(folder: str) -> str:
    """The assembly name of the package's test folder `Tests/<folder>`, as its asmdef gives it to Unity."""
    [asmdef] = sorted((PACKAGE / "Tests" / folder).glob("*.asmdef"))
    return str(json.loads(asmdef.read_text(encoding="utf-8"))["name"])


def build_tests(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """The package's NUnit test assemblies (Tests/Runtime, Tests/Editor), named by their asmdefs."""
    nunit = _copy_beside(NUNIT, out_dir, "install libnunit-cil-dev (Debian's mono-devel depends on it)")
    client, stubs = build_client(out_dir), _engine_stubs(out_dir)
    built = [compile_assembly(assembly_of_tests("Runtime"), sources(PACKAGE / "Tests" / "Runtime"), out_dir,
                              [client, stubs[0], nunit])]
    editor_refs = [client, build_hosting(out_dir), *stubs, nunit]
    editor_refs += [p for p in (build_unity(out_dir), build_editor(out_dir)) if p is not None]
    editor_files = sources(PACKAGE / "Tests" / "Editor")
    built.append(compile_assembly(assembly_of_tests("Editor"), editor_files, out_dir, editor_refs))
    return built


def build(targets: Sequence[str] = ("all",), out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Build the named targets (client, hosting, unity, editor, tests, all); returns the assemblies built."""
    wanted = set(TARGETS) if "all" in targets else set(targets)
    built: list[Path] = []
    if "client" in wanted:
        built.append(build_client(out_dir))
    if "hosting" in wanted:
        built.append(build_hosting(out_dir))
    if "unity" in wanted:
        built += [p for p in (build_unity(out_dir),) if p is not None]
    if "editor" in wanted:
        built += [p for p in (build_editor(out_dir),) if p is not None]
    if "tests" in wanted:
        built += build_tests(out_dir)
    return built


def _engine_stubs(out_dir: Path) -> list[Path]:
    stubs = build_stubs(out_dir)
    if not stubs:
        raise BuildError("Runtime/Unity needs the stub UnityEngine sources under tests/unity_stubs")
    return stubs


def _newtonsoft(out_dir: Path) -> Path:
    return _copy_beside(NEWTONSOFT, out_dir, "install libnewtonsoft-json-cil-dev")


def _copy_beside(dll: Path, out_dir: Path, fix: str) -> Path:
    # A copy beside the assemblies lets Mono (and pythonnet) resolve it without a GAC entry.
    if not dll.exists():
        raise BuildError(f"{dll} is missing: {fix}")
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = out_dir / dll.name
    if not copy.exists() or copy.stat().st_size != dll.stat().st_size:
        shutil.copyfile(dll, copy)
    return copy


def _digest(args: Sequence[str], inputs: Sequence[Path]) -> str:
    h = hashlib.sha256("\0".join(args).encode())
    for path in inputs:
        h.update(str(path).encode() + b"\0" + Path(path).read_bytes())
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: prints the built assemblies, or mcs's errors and exits 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # No argparse `choices` here: with nargs="*" Python 3.11 checks the empty default against them and fails.
    parser.add_argument("targets", nargs="*", help="client, hosting, unity, editor, tests or all (default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in (*TARGETS, "all")]
    if unknown:
        parser.error(f"unknown target(s) {unknown}: choose from {', '.join(TARGETS)}, all")
    try:
        for path in build(args.targets or ["all"], args.out):
            print(path)
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
