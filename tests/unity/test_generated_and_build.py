"""The generated C# matches proto/, and the build fails loudly on a compile error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.build_csharp import BuildError, compile_assembly
from tools.gen_csharp import DEFAULT_OUT as GENERATED
from tools.gen_csharp import csharp_name

ROOT = Path(__file__).resolve().parents[2]


def test_generated_csharp_is_current(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_csharp.py"), str(tmp_path)], check=True,
                   capture_output=True)
    fresh = sorted(p.name for p in tmp_path.glob("*.g.cs*"))
    committed = sorted(p.name for p in GENERATED.glob("*.g.cs*"))
    assert fresh == committed
    assert [n for n in fresh if n.endswith(".cs")] == ["Common.g.cs", "MemoryStore.g.cs", "Orchestrator.g.cs"]
    stale = [n for n in fresh if (tmp_path / n).read_bytes() != (GENERATED / n).read_bytes()]
    assert not stale, f"stale generated C# (run `python tools/gen_csharp.py`): {stale}"


def test_generated_csharp_covers_every_message_and_method() -> None:
    from coreai.v1 import common_pb2, memory_store_pb2, orchestrator_pb2

    text = "".join(p.read_text() for p in GENERATED.glob("*.g.cs"))
    for module in (common_pb2, memory_store_pb2, orchestrator_pb2):
        for message in module.DESCRIPTOR.message_types_by_name.values():
            assert f"public sealed partial class {csharp_name(message.name)}\n" in text
            for field in message.fields:
                assert f'[JsonProperty("{field.json_name}"' in text
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            for value in enum.values:
                assert f'[EnumMember(Value = "{value.name}")]' in text
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert f'ServiceName, "{method.name}"' in text


def test_every_runtime_file_and_folder_has_a_unique_unity_meta() -> None:
    # A git-URL package is immutable: Unity ignores any asset without a .meta file.
    core = ROOT / "unity_package" / "Runtime"
    own = [p for p in core.rglob("*") if p.suffix != ".meta"]
    paths = [core, *own]
    guids: dict[str, str] = {}
    for path in paths:
        meta = path.with_name(path.name + ".meta")
        assert meta.exists(), f"missing {meta.relative_to(core.parent)}"
        text = meta.read_text()
        guid = re.search(r"^guid: ([0-9a-f]{32})$", text, re.M)
        assert guid and guid.group(1) not in guids, f"{meta.name}: missing or repeated guid"
        guids[guid.group(1)] = meta.name
        assert ("folderAsset: yes" in text) == path.is_dir()
        assert ("AssemblyDefinitionImporter" in text) == (path.suffix == ".asmdef")


def test_compile_error_fails_with_mcs_output(tmp_path: Path) -> None:
    bad = tmp_path / "Bad.cs"
    bad.write_text("namespace CoreAI.Tests { public class Bad { public int X() { return \"no\"; } } }\n")
    with pytest.raises(BuildError) as info:
        compile_assembly("CoreAI.Tests.Bad", [bad], tmp_path / "out")
    assert "error CS0029" in str(info.value) and "Bad.cs(1," in str(info.value)
    assert not (tmp_path / "out" / "CoreAI.Tests.Bad.dll.stamp").exists()


def test_csharp_8_is_refused(tmp_path: Path) -> None:
    # Code must stay inside what Unity and mcs 7.2 both accept: a local function is C# 7.0 but a
    # switch expression (C# 8) must fail the build rather than slip into the package.
    newer = tmp_path / "Newer.cs"
    newer.write_text("namespace CoreAI.Tests { public static class N {\n"
                     "  public static int F(int x) => x switch { 1 => 2, _ => 0 }; } }\n")
    with pytest.raises(BuildError):
        compile_assembly("CoreAI.Tests.Newer", [newer], tmp_path / "out")


def test_build_script_exits_nonzero_on_errors(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build_csharp.py"), "client", "--out", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "CoreAI.Client.dll").exists()
    assert (tmp_path / "Newtonsoft.Json.dll").exists()
