"""The package compiles under both of Unity's API compatibility levels without the user adding references:
".NET Framework" (no System.Net.Http) by compiling against that level's reference set, ".NET Standard 2.1" by
checking every framework type used against the netstandard surface."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.build_csharp import (
    CLIENT,
    EDITOR,
    HOSTING,
    PACKAGE,
    UNITY,
    BuildError,
    build_client,
    build_editor,
    build_hosting,
    build_stubs,
    build_unity,
    compile_assembly,
    compile_for_api_level,
    net_standard_violations,
    sources,
)


def test_core_unity_layer_editor_and_sample_compile_at_the_net_framework_level(tmp_path: Path) -> None:
    stubs = build_stubs()
    core = compile_for_api_level(CLIENT, sources(PACKAGE / "Runtime" / "Client"), tmp_path)
    hosting = compile_for_api_level(HOSTING, sources(PACKAGE / "Runtime" / "Hosting"), tmp_path, [core])
    unity = compile_for_api_level(UNITY, sources(PACKAGE / "Runtime" / "Unity"), tmp_path, [core, hosting, *stubs])
    editor = compile_for_api_level(EDITOR, sources(PACKAGE / "Editor"), tmp_path, [core, hosting, *stubs, unity])
    sample = compile_for_api_level("CoreAI.Samples.BlacksmithNpc", sources(PACKAGE / "Samples~" / "BlacksmithNpc"),
                                   tmp_path, [core, *stubs, unity])
    assert all(p.exists() for p in (core, hosting, unity, editor, sample))


def test_the_net_framework_set_really_lacks_system_net_http(tmp_path: Path) -> None:
    # What the package used before: it must fail here, or the test above proves nothing.
    probe = tmp_path / "Probe.cs"
    probe.write_text("namespace P { public static class Q { public static object C() { "
                     "return new System.Net.Http.HttpClient(); } } }")
    with pytest.raises(BuildError, match="System.Net.Http"):
        compile_for_api_level("Probe", [probe], tmp_path)


def test_every_framework_type_used_is_in_net_standard() -> None:
    for dll in (build_client(), build_hosting(), build_unity(), build_editor()):
        assert dll is not None
        assert net_standard_violations(dll) == [], dll.name


def test_the_net_standard_check_flags_a_framework_only_type(tmp_path: Path) -> None:
    probe = tmp_path / "Remoting.cs"
    probe.write_text("namespace P { public static class R { public static object Get() { "
                     "return System.Runtime.Remoting.Messaging.CallContext.LogicalGetData(\"x\"); } } }")
    dll = compile_assembly("Remoting", [probe], tmp_path)
    assert "System.Runtime.Remoting.Messaging.CallContext" in net_standard_violations(dll)


def test_build_cli_defaults_to_all_and_refuses_unknown_targets(capsys) -> None:
    from tools.build_csharp import main

    assert main([]) == 0  # failed before: argparse checked the empty default against `choices`
    assert f"{EDITOR}.dll" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["bogus"])
    assert info.value.code == 2
