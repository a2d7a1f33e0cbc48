"""The package as Unity sees it: everything compiles with mcs -langversion:7.2 (the Unity layer, the
editor and the sample against the stubs), the manifest, the assembly definitions and .meta files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.unity_layer.dotnet import ROOT
from tools.build_csharp import (
    CLIENT,
    EDITOR,
    HOSTING,
    STUBS,
    TEST_FOLDERS,
    UNITY,
    BuildError,
    assembly_of_tests,
    build,
    build_client,
    build_stubs,
    build_unity,
    compile_assembly,
)

PACKAGE = ROOT / "unity_package"
OWN_FOLDERS = ["Runtime", "Editor", "Tests"]
OWN_CODE = ["Runtime/Unity", "Runtime/Hosting", "Editor", "Samples~/BlacksmithNpc", "Tests/Editor", "Tests/Runtime"]


def test_core_unity_layer_and_editor_compile() -> None:
    built = {p.name for p in build(("client", "hosting", "unity", "editor"))}
    assert {f"{CLIENT}.dll", f"{HOSTING}.dll", f"{UNITY}.dll", f"{EDITOR}.dll"} <= built


def test_the_sample_compiles_against_the_package(tmp_path: Path) -> None:
    refs = [build_client(), *build_stubs(), build_unity()]
    files = sorted((PACKAGE / "Samples~" / "BlacksmithNpc").rglob("*.cs"))
    assert compile_assembly("CoreAI.Samples.BlacksmithNpc", files, tmp_path, refs).exists()


def test_a_compile_error_fails_the_build(tmp_path: Path) -> None:
    bad = tmp_path / "Bad.cs"
    # A C# 8 switch expression: Unity's older compilers and mcs refuse it, so must the build.
    bad.write_text("namespace X { public class Y { object F(object o) => o switch { _ => o }; } }")
    with pytest.raises(BuildError):
        compile_assembly("Bad", [bad], tmp_path)


def _own_sources() -> list[Path]:
    return [f for folder in OWN_CODE for f in sorted((PACKAGE / folder).rglob("*.cs"))]


def test_no_async_void_and_every_type_in_a_namespace() -> None:
    sources = _own_sources() + sorted(STUBS.rglob("*.cs"))
    assert sources
    for path in sources:
        text = path.read_text()
        assert not re.search(r"\basync\s+void\b", text), f"async void in {path.name}"
        declares = re.search(r"^\s*(?:public|internal)?\s*(?:static |sealed |abstract |partial )*(?:class|struct|enum|interface) ", text, re.M)
        assert not declares or re.search(r"^namespace \S+", text, re.M), f"{path.name} declares types outside a namespace"


_PUBLIC_TYPE = re.compile(
    r"^    public\s+(?:(?:static|sealed|abstract|partial|readonly)\s+)*(?:class|struct|interface|enum|delegate)\s+(\w+)", re.M)


def test_one_public_type_per_file_named_after_it() -> None:
    # Unity finds a MonoBehaviour or ScriptableObject only in a file of its name; for every other type it is how a
    # reader finds it. Internal helpers may share their file; generated code (*.g.cs) is exempt.
    checked = 0
    for folder in ("Runtime", "Editor", "Samples~", "Tests/Editor", "Tests/Runtime"):
        for path in sorted((PACKAGE / folder).rglob("*.cs")):
            rel = path.relative_to(PACKAGE).as_posix()
            if path.name.endswith(".g.cs") or "/Scenarios/" in rel:
                continue
            public = _PUBLIC_TYPE.findall(path.read_text(encoding="utf-8"))
            assert public in ([], [path.stem]), f"{rel} declares {public}"
            checked += 1
    assert checked > 100


def test_manifest() -> None:
    manifest = json.loads((PACKAGE / "package.json").read_text())
    assert re.fullmatch(r"com\.[a-z0-9-]+\.[a-z0-9.-]+", manifest["name"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"])
    assert "com.unity.nuget.newtonsoft-json" in manifest["dependencies"]
    assert re.fullmatch(r"\d{4}\.\d", manifest["unity"])
    [sample] = manifest["samples"]
    assert sample["path"] == "Samples~/BlacksmithNpc" and (PACKAGE / sample["path"] / "BlacksmithNpc.cs").exists()


def test_assembly_definitions() -> None:
    def asmdef(rel: str) -> dict:
        return json.loads((PACKAGE / rel).read_text())

    client = asmdef("Runtime/Client/CoreAI.Client.asmdef")
    assert client["name"] == CLIENT and client["references"] == [] and client["includePlatforms"] == []
    assert client["noEngineReferences"]
    # The launcher, spawning and downloads: only where a runtime can be started (desktop editors and players).
    hosting = asmdef("Runtime/Hosting/CoreAI.Hosting.asmdef")
    assert hosting["name"] == HOSTING and hosting["references"] == [CLIENT] and hosting["noEngineReferences"]
    assert set(hosting["includePlatforms"]) == {"Editor", "LinuxStandalone64", "macOSStandalone", "WindowsStandalone32",
                                                "WindowsStandalone64"}
    unity = asmdef("Runtime/Unity/CoreAI.Runtime.Unity.asmdef")
    assert unity["name"] == UNITY and unity["references"] == [CLIENT, HOSTING]
    editor = asmdef("Editor/CoreAI.Editor.asmdef")
    assert editor["name"] == EDITOR and editor["includePlatforms"] == ["Editor"]
    assert set(editor["references"]) == {CLIENT, HOSTING, UNITY}
    sample = asmdef("Samples~/BlacksmithNpc/CoreAI.Samples.BlacksmithNpc.asmdef")
    assert set(sample["references"]) == {CLIENT, UNITY}
    # The stubs (fake UnityEngine types) are test-only: outside the package, so nothing of them ships or is imported.
    assert STUBS.is_dir() and not (PACKAGE / "Tests" / "Stubs").exists()
    assert not list(PACKAGE.rglob("Stub*.cs"))
    # The NUnit test assemblies, as Unity's Test Framework expects them: compiled only with UNITY_INCLUDE_TESTS (the
    # project lists the package under "testables"), NUnit as a precompiled reference, the test runner referenced.
    for folder in TEST_FOLDERS:
        tests = asmdef(f"Tests/{folder}/{assembly_of_tests(folder)}.asmdef")
        assert tests["defineConstraints"] == ["UNITY_INCLUDE_TESTS"] and not tests["autoReferenced"]
        assert tests["overrideReferences"] and "nunit.framework.dll" in tests["precompiledReferences"]
        assert {"UnityEngine.TestRunner", CLIENT} <= set(tests["references"])
    editor_tests = asmdef(f"Tests/Editor/{assembly_of_tests('Editor')}.asmdef")
    assert editor_tests["includePlatforms"] == ["Editor"] and "UnityEditor.TestRunner" in editor_tests["references"]


def test_internals_are_visible_to_the_test_assemblies_by_their_asmdef_names() -> None:
    # Unity names an assembly after its asmdef; build_csharp names the test assemblies the same way, so one
    # InternalsVisibleTo list holds in Unity and here (plus the Unity layer's static-state reset and the pytest
    # harness's own scenario assembly).
    from tests.unity_layer.conftest import SCENARIOS

    def declared(rel: str) -> list[str]:
        info = (PACKAGE / rel).read_text()
        return sorted(re.findall(r'^\[assembly: InternalsVisibleTo\("([^"]+)"\)\]', info, re.M))

    tests = [assembly_of_tests(f) for f in TEST_FOLDERS]
    assert declared("Runtime/Client/AssemblyInfo.cs") == sorted([HOSTING, UNITY, *tests, SCENARIOS])
    assert declared("Runtime/Hosting/AssemblyInfo.cs") == sorted([assembly_of_tests("Editor"), SCENARIOS])


def test_every_own_file_and_folder_has_a_unique_meta() -> None:
    # A git-URL package is immutable: Unity ignores any asset without a .meta file.
    paths = [PACKAGE / p for p in ("package.json", "README.md", "CHANGELOG.md", "Runtime", "Tests")]
    for folder in OWN_FOLDERS:
        paths += [p for p in (PACKAGE / folder).rglob("*") if p.suffix != ".meta"]
    paths += [PACKAGE / f for f in OWN_FOLDERS if PACKAGE / f not in paths]
    guids = {}
    for path in paths:
        meta = path.with_name(path.name + ".meta")
        assert meta.exists(), f"missing {meta.relative_to(PACKAGE)}"
        guid = re.search(r"^guid: ([0-9a-f]{32})$", meta.read_text(), re.M)
        assert guid, f"no guid in {meta.name}"
        assert guid.group(1) not in guids, f"{meta.name} repeats the guid of {guids.get(guid.group(1))}"
        guids[guid.group(1)] = meta.name
        assert ("folderAsset: yes" in meta.read_text()) == path.is_dir()


# Pinned: a sample's GUIDs must never change (Unity re-links every reference to a sample asset by GUID, and
# an import of a newer package version must overwrite the same assets, not add copies).
SAMPLE_GUIDS = {
    "Samples~/BlacksmithNpc": "383b2f052dae8b7b06e374c0622031d9",
    "Samples~/BlacksmithNpc/BlacksmithNpc.cs": "a158d4c24fe25eb8afc64d72f94ea146",
    "Samples~/BlacksmithNpc/BlacksmithShop.cs": "94d7f06e6548415ba0fcfc844dc650fc",
    "Samples~/BlacksmithNpc/Ware.cs": "4f640b335544400886842dc052ab79d5",
    "Samples~/BlacksmithNpc/WareArgs.cs": "758059ce3fc8493cb440f2c9e86a7bed",
    "Samples~/BlacksmithNpc/CoreAI.Samples.BlacksmithNpc.asmdef": "eaf345e77a2571b13ef05d4edc610808",
    "Samples~/BlacksmithNpc/README.md": "06e03262668df01bd032f7e1fa78ce28",
}


def test_every_sample_asset_has_a_meta_with_its_pinned_guid() -> None:
    found = {}
    for path in sorted((PACKAGE / "Samples~").rglob("*")):
        if path.suffix == ".meta":
            assert path.with_name(path.name[: -len(".meta")]).exists(), f"orphan {path.name}"
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        meta = path.with_name(path.name + ".meta")
        assert meta.exists(), f"missing {rel}.meta (Unity would give it a new GUID on every import)"
        text = meta.read_text()
        guid = re.search(r"^guid: ([0-9a-f]{32})$", text, re.M)
        assert guid, f"no guid in {rel}.meta"
        found[rel] = guid.group(1)
        assert ("folderAsset: yes" in text) == path.is_dir()
    # A new sample asset needs its GUID pinned here too (a new GUID is fine, a changed one is not).
    assert found == SAMPLE_GUIDS


# Segments that would shadow Unity's own names for code inside `CoreAI.*` (`Editor` hides UnityEditor.Editor,
# `Unity` hides the `Unity.*` namespaces such as Unity.Collections).
SHADOWING = {"Unity", "Editor", "UnityEngine", "UnityEditor", "Unity.Collections"}


def test_no_namespace_shadows_unitys() -> None:
    namespaces = set()
    for path in _own_sources() + sorted((PACKAGE / "Runtime").rglob("*.cs")):
        namespaces.update(re.findall(r"^namespace (\S+)", path.read_text(), re.M))
    assert "CoreAI.UnityIntegration" in namespaces and "CoreAI.EditorTools" in namespaces
    for ns in namespaces:
        assert not set(ns.split(".")) & SHADOWING, f"namespace {ns} shadows a Unity name"
    for rel in ("Runtime/Unity/CoreAI.Runtime.Unity.asmdef", "Editor/CoreAI.Editor.asmdef"):
        root = json.loads((PACKAGE / rel).read_text())["rootNamespace"]
        assert not set(root.split(".")) & SHADOWING, f"{rel} rootNamespace {root}"


def test_the_linker_callback_hands_over_the_packages_link_xml(assemblies, tmp_path: Path) -> None:
    import os

    from CoreAI.EditorTools import CoreAILinkXml

    # In Unity the current directory is the project and Packages/<name>/ resolves to the package: mirror that.
    name = json.loads((PACKAGE / "package.json").read_text())["name"]
    project = tmp_path / "Project"
    (project / "Packages").mkdir(parents=True)
    (project / "Packages" / name).symlink_to(PACKAGE)
    before = os.getcwd()
    os.chdir(project)
    try:
        path = Path(CoreAILinkXml().GenerateAdditionalLinkXmlFile(None, None))
    finally:
        os.chdir(before)
    assert path.is_absolute() and path.read_text() == (PACKAGE / "Runtime" / "Client" / "link.xml").read_text()
    assert "CoreAI.V1.*" in path.read_text()


# What Unity defines for players that cannot start processes; CoreAI.Hosting is not compiled there (its asmdef's platforms).
NO_HOSTING = {
    "iOS": ["UNITY_5_3_OR_NEWER", "UNITY_IOS"],
    "Android": ["UNITY_5_3_OR_NEWER", "UNITY_ANDROID"],
    "WebGL": ["UNITY_5_3_OR_NEWER", "UNITY_WEBGL"],
    "PS5": ["UNITY_5_3_OR_NEWER", "UNITY_PS5"],
}


@pytest.mark.parametrize("platform", sorted(NO_HOSTING))
def test_the_unity_layer_and_the_sample_compile_without_hosting(platform: str, tmp_path: Path) -> None:
    # Users who connect to a remote runtime compile no launcher: the Unity layer leaves out what needs CoreAI.Hosting
    # (its asmdef reference is dropped on these platforms), and the game code (the sample) still compiles against it.
    defines = NO_HOSTING[platform]
    client = compile_assembly(CLIENT, sorted((PACKAGE / "Runtime" / "Client").rglob("*.cs")), tmp_path, defines=defines)
    stubs = build_stubs()
    unity = compile_assembly(UNITY, sorted((PACKAGE / "Runtime" / "Unity").rglob("*.cs")), tmp_path, [client, stubs[0]],
                             defines=defines)
    sample = compile_assembly("CoreAI.Samples.BlacksmithNpc", sorted((PACKAGE / "Samples~" / "BlacksmithNpc").rglob("*.cs")),
                              tmp_path, [client, stubs[0], unity], defines=defines)
    assert sample.exists()
