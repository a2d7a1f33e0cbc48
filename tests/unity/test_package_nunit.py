"""The package's own NUnit tests (unity_package/Tests/Runtime and Tests/Editor, what Unity's Test Runner shows), run
through Mono by tests/support/nunit.py: the Editor tests on their own, every Runtime test against a fresh runtime of
its own (COREAI_TEST_RUNTIME_URL / _TOKEN, as a developer sets them in Unity)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import nunit
from tests.unity.conftest import EDITOR_TESTS, RUNTIME_TESTS, TOKEN


def _frame() -> None:
    time.sleep(0.005)  # no Unity context in these tests: a frame is only time passing


@pytest.fixture
def runtime_under_test(runtime: Any) -> Iterator[Any]:
    """The test's runtime, where RuntimeUnderTest (C#) reads it."""
    os.environ["COREAI_TEST_RUNTIME_URL"], os.environ["COREAI_TEST_RUNTIME_TOKEN"] = runtime.url, TOKEN
    try:
        yield runtime
    finally:
        del os.environ["COREAI_TEST_RUNTIME_URL"], os.environ["COREAI_TEST_RUNTIME_TOKEN"]


@pytest.mark.parametrize("name", nunit.listed("Editor"))
def test_editor(assemblies: Path, name: str) -> None:
    nunit.run(assemblies / f"{EDITOR_TESTS}.dll", name, _frame)


@pytest.mark.parametrize("name", nunit.listed("Runtime"))
def test_runtime(runtime_under_test: Any, assemblies: Path, name: str) -> None:
    nunit.run(assemblies / f"{RUNTIME_TESTS}.dll", name, _frame)


def test_every_compiled_test_is_collected(assemblies: Path) -> None:
    # The source listing above is what pytest runs: it must find every [Test] and [UnityTest] the compiler saw.
    assert nunit.discovered(assemblies / f"{EDITOR_TESTS}.dll") == sorted(nunit.listed("Editor"))
    assert nunit.discovered(assemblies / f"{RUNTIME_TESTS}.dll") == sorted(nunit.listed("Runtime"))
    assert len(nunit.listed("Editor")) >= 8 and len(nunit.listed("Runtime")) >= 7


def test_a_failing_assert_and_an_ignore_fail_the_item(assemblies: Path, tmp_path: Path) -> None:
    # The runner must be able to fail: NUnit's own exceptions become pytest failures, an Ignore included.
    from tools.build_csharp import DEFAULT_OUT, compile_assembly

    source = tmp_path / "Failing.cs"
    source.write_text("""
using NUnit.Framework;
namespace CoreAI.Tests.Probe
{
    [TestFixture]
    public sealed class Failing
    {
        [Test] public void Fails() { Assert.AreEqual(1, 2); }
        [Test] public void Ignores() { Assert.Ignore("no runtime"); }
        [Test] public void Passes() { Assert.Pass(); }
    }
}
""")
    dll = compile_assembly("CoreAI.Tests.Probe", [source], tmp_path, [DEFAULT_OUT / "nunit.framework.dll"])
    with pytest.raises(pytest.fail.Exception, match="Expected: 1"):
        nunit.run(dll, "Failing.Fails", _frame)
    with pytest.raises(pytest.fail.Exception, match="IgnoreException: no runtime"):
        nunit.run(dll, "Failing.Ignores", _frame)
    nunit.run(dll, "Failing.Passes", _frame)
