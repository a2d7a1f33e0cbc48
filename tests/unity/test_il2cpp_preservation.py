"""IL2CPP stripping guard: every type and member that Newtonsoft reaches by reflection carries [Preserve] (which
Unity's linker honours by name), the backing field of every such auto-property too ([field: Preserve]), and every
such type is kept whole (preserve="all") by the package's link.xml (handed to the linker by the editor's
CoreAILinkXml: tests/unity_layer/test_package.py)."""

from __future__ import annotations

import fnmatch
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tools.build_csharp import PACKAGE, compile_assembly

LINK_XML = PACKAGE / "Runtime" / "Client" / "link.xml"
SERIALIZED = ("JsonPropertyAttribute", "DataMemberAttribute")


def _names(member: Any) -> set[str]:
    return {a.GetType().Name for a in member.GetCustomAttributes(False)}


def serialized_types(assembly: Any) -> dict[str, list[str]]:
    """Type full name -> what reflection reaches in it that has no [Preserve] ('' = the type itself; an auto-property's
    backing field by its compiler name, `<Name>k__BackingField`)."""
    from System.Reflection import BindingFlags

    flags = BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Instance | BindingFlags.Static \
        | BindingFlags.DeclaredOnly
    found: dict[str, list[str]] = {}
    converters = set()
    for t in assembly.GetTypes():
        members = [*t.GetProperties(flags), *t.GetFields(flags)]
        serialized = [m for m in members if _names(m) & set(SERIALIZED)]
        for m in members:
            for a in m.GetCustomAttributes(False):
                if a.GetType().Name == "JsonConverterAttribute":
                    converters.add(a.ConverterType.FullName)
        enum_names = t.IsEnum and any("EnumMemberAttribute" in _names(f) for f in t.GetFields(flags))
        if serialized or enum_names:
            missing = [] if "PreserveAttribute" in _names(t) else [""]
            missing += [m.Name for m in serialized if "PreserveAttribute" not in _names(m)]
            for m in serialized:
                backing = t.GetField(f"<{m.Name}>k__BackingField", flags)
                if backing is not None and "PreserveAttribute" not in _names(backing):
                    missing.append(backing.Name)
            found[t.FullName] = missing
    for t in assembly.GetTypes():
        if t.FullName in converters:
            found[t.FullName] = [] if "PreserveAttribute" in _names(t) else [""]
    return found


def _link_xml_patterns(assembly_name: str) -> list[str]:
    """The type patterns link.xml keeps whole (preserve="all": every member, compiler-made backing fields included)."""
    root = ET.parse(LINK_XML).getroot()
    [assembly] = [a for a in root.findall("assembly") if a.get("fullname") == assembly_name]
    return [t.attrib["fullname"] for t in assembly.findall("type") if t.get("preserve") == "all"]


def test_every_reflected_type_and_member_is_preserved(assemblies: Path) -> None:
    from System.Reflection import Assembly

    from tools.build_csharp import build_hosting

    found: dict[str, dict[str, list[str]]] = {}
    for dll in (assemblies / "CoreAI.Client.dll", build_hosting()):
        found[dll.stem] = serialized_types(Assembly.LoadFrom(str(dll)))
    assert "CoreAI.V1.RunTaskRequest" in found["CoreAI.Client"]
    assert "CoreAI.Launcher.RuntimeState" in found["CoreAI.Hosting"]
    assert "CoreAI.Runtime.ProtoInt64Converter" in found["CoreAI.Client"]
    for assembly, types in found.items():
        unpreserved = {name: missing for name, missing in types.items() if missing}
        assert unpreserved == {}, assembly
        patterns = _link_xml_patterns(assembly)
        for name in types:
            assert any(fnmatch.fnmatchcase(name, p) for p in patterns), f"{name} ({assembly}) is not in link.xml"


def test_hosting_is_optional_to_the_linker() -> None:
    # CoreAI.Hosting is compiled for desktop editors and players only: a mobile build's linker must not fail on it.
    root = ET.parse(LINK_XML).getroot()
    assemblies = {a.get("fullname"): a for a in root.findall("assembly")}
    assert assemblies["CoreAI.Hosting"].get("ignoreIfMissing") == "1"
    assert assemblies["CoreAI.Client"].get("ignoreIfMissing") is None


def test_the_guard_catches_a_serialized_type_added_without_preservation(assemblies: Path, tmp_path: Path) -> None:
    import clr

    probe = tmp_path / "Probe.cs"
    probe.write_text("""
using Newtonsoft.Json;
namespace Probe
{
    internal sealed class PreserveAttribute : System.Attribute { }
    public sealed class Forgotten { [JsonProperty("a")] public int A { get; set; } }
    [Preserve] public sealed class HalfDone { [JsonProperty("b")] public int B { get; set; } }
    [Preserve] public sealed class NoBackingField { [Preserve, JsonProperty("d")] public int D { get; set; } }
    [Preserve] public sealed class Done { [Preserve, JsonProperty("c")] [field: Preserve] public int C { get; set; } }
}
""")
    dll = compile_assembly("CoreAI.Tests.StrippingProbe", [probe], tmp_path)
    found = serialized_types(clr.AddReference(str(dll)))
    assert {k: list(v) for k, v in found.items()} == {
        "Probe.Forgotten": ["", "A", "<A>k__BackingField"], "Probe.HalfDone": ["B", "<B>k__BackingField"],
        "Probe.NoBackingField": ["<D>k__BackingField"], "Probe.Done": []}
    assert not any(fnmatch.fnmatchcase("Probe.Forgotten", p) for p in _link_xml_patterns("CoreAI.Client"))

