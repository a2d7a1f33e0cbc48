"""Run the package's NUnit tests (unity_package/Tests/Editor and Tests/Runtime) from pytest, one pytest item each.

Unity runs these with its NUnit 3 (the Test Runner window); here they are compiled against Debian's NUnit 2.6.4
framework (the only NUnit installable: no NUnit 3 on PyPI, npm or apt) and run by this small runner in the pytest
process through pythonnet, so a Runtime test talks to the runtime a pytest fixture started. What it does is what the
tests use, in NUnit's order: a fresh fixture instance per test, every [SetUp], the test, every [TearDown] (also after
a failure). A [UnityTest] is a coroutine: each `yield return null` is one frame (`frame()`), and a yielded IEnumerator
runs nested, as Unity does. Assert failures fail the pytest item with NUnit's message; Assert.Ignore fails it too,
since here the harness gives every test what it needs (an ignored test would be a silent gap).

Tests are listed from the sources (one fixture per file, `[Test]` / `[UnityTest]` methods) so pytest can collect them
before Mono starts; `discovered()` lists them from the compiled assembly, and a test checks the two agree.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tools.build_csharp import PACKAGE

TEST = "NUnit.Framework.TestAttribute"
UNITY_TEST = "UnityEngine.TestTools.UnityTestAttribute"
SET_UP = "NUnit.Framework.SetUpAttribute"
TEAR_DOWN = "NUnit.Framework.TearDownAttribute"
_FIXTURE = re.compile(r"\[TestFixture\]\s*public\s+(?:sealed\s+)?class\s+(\w+)")
_METHOD = re.compile(r"\[(?:Test|UnityTest)\]\s*public\s+(?:void|IEnumerator)\s+(\w+)\s*\(\s*\)")


def listed(folder: str) -> list[str]:
    """`Fixture.Method` of every test in the sources of Tests/<folder> (namespace CoreAI.Tests)."""
    found = []
    for path in sorted((PACKAGE / "Tests" / folder).glob("*.cs")):
        text = path.read_text(encoding="utf-8")
        fixtures = _FIXTURE.findall(text)
        if not fixtures:
            continue
        assert len(fixtures) == 1, f"{path.name}: one fixture per file"
        found += [f"{fixtures[0]}.{m}" for m in _METHOD.findall(text)]
    return found


def _attributes(member: Any) -> set[str]:
    return {a.GetType().FullName for a in member.GetCustomAttributes(False)}


def discovered(assembly: Path) -> list[str]:
    """`Fixture.Method` of every [Test] / [UnityTest] in the compiled assembly."""
    from System.Reflection import Assembly, BindingFlags

    found = []
    for t in Assembly.LoadFrom(str(assembly)).GetTypes():
        for m in t.GetMethods(BindingFlags.Public | BindingFlags.Instance | BindingFlags.DeclaredOnly):
            if _attributes(m) & {TEST, UNITY_TEST}:
                found.append(f"{t.Name}.{m.Name}")
    return sorted(found)


def _call(method: Any, target: Any) -> Any:
    from System.Reflection import TargetInvocationException

    try:
        return method.Invoke(target, None)
    except TargetInvocationException as e:
        raise e.InnerException from None


def _drive(enumerator: Any, frame: Callable[[], None], timeout_s: float) -> None:
    """Run a coroutine to its end: nested IEnumerators first, a frame per other yield."""
    from System.Collections import IEnumerator

    stack = [IEnumerator(enumerator)]
    until = time.monotonic() + timeout_s
    while stack:
        if time.monotonic() > until:
            pytest.fail(f"the [UnityTest] did not end within {timeout_s} s")
        top = stack[-1]
        if not top.MoveNext():
            stack.pop()
            continue
        current = top.Current
        if current is not None and isinstance(current, IEnumerator):
            stack.append(IEnumerator(current))
        else:
            frame()


def run(assembly: Path, name: str, frame: Callable[[], None], timeout_s: float = 180.0) -> None:
    """Run the test `Fixture.Method` of `assembly` as NUnit would; raises pytest's failure on an NUnit failure."""
    from System import Activator
    from System.Reflection import Assembly, BindingFlags

    fixture_name, method_name = name.split(".")
    [fixture] = [t for t in Assembly.LoadFrom(str(assembly)).GetTypes() if t.Name == fixture_name]
    methods = list(fixture.GetMethods(BindingFlags.Public | BindingFlags.Instance))
    instance = Activator.CreateInstance(fixture)
    test = fixture.GetMethod(method_name)
    try:
        try:
            for m in methods:
                if SET_UP in _attributes(m):
                    _call(m, instance)
            returned = _call(test, instance)
            if UNITY_TEST in _attributes(test):
                _drive(returned, frame, timeout_s)
        finally:
            for m in methods:
                if TEAR_DOWN in _attributes(m):
                    _call(m, instance)
    except Exception as e:
        kind = type(e).__name__
        if kind == "SuccessException":  # Assert.Pass
            return
        if kind in ("AssertionException", "IgnoreException", "InconclusiveException"):
            pytest.fail(f"{name}: {kind}: {getattr(e, 'Message', e)}", pytrace=False)  # a .NET exception's text
        raise
