"""The blocking client is generated from the async one, so the two cannot drift."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

from pyruntime.client import AsyncRuntimeClient, RuntimeClient

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_sync_client", ROOT / "tools" / "gen_sync_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_sync_client", module)
    spec.loader.exec_module(module)
    return module


def test_sync_client_is_what_the_generator_makes_of_the_async_one() -> None:
    gen = _generator()
    expected = gen.generate(gen.ASYNC_SOURCE.read_text(encoding="utf-8"))
    assert gen.SYNC_TARGET.read_text(encoding="utf-8") == expected, "run python tools/gen_sync_client.py"


def test_the_check_mode_fails_on_a_hand_edit(tmp_path: Path, monkeypatch) -> None:
    gen = _generator()
    stale = tmp_path / "_sync.py"
    stale.write_text(gen.SYNC_TARGET.read_text(encoding="utf-8").replace("Close the connections.", "Close."),
                     encoding="utf-8")
    monkeypatch.setattr(gen, "SYNC_TARGET", stale)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1


def test_both_clients_offer_the_same_calls_with_the_same_parameters() -> None:
    twins = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}

    def calls(cls: type) -> dict[str, list[str]]:
        return {name: list(inspect.signature(member).parameters)
                for name, member in vars(cls).items() if callable(member) and not name.startswith("_")
                or name in ("__enter__", "__exit__", "__aenter__", "__aexit__")}

    async_calls = {twins.get(name, name): params for name, params in calls(AsyncRuntimeClient).items()}
    assert async_calls == calls(RuntimeClient)
    assert len(async_calls) > 20
    for name, member in vars(AsyncRuntimeClient).items():
        if name in ("__init__",) or not callable(member):
            continue
        assert inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member), name


def test_the_generated_client_needs_no_lint_fixes() -> None:
    gen = _generator()
    # A rename can unsort an import line; the blocking twin of a yielding loop is `yield from`.
    assert gen.sorted_import("from m import MEMORY, SyncTransport, CaCert, sync_transport") == (
        "from m import MEMORY, CaCert, SyncTransport, sync_transport")
    assert gen.yield_from(["    for e in it():", "        yield e", "", "    x = 1"]) == [
        "    yield from it()", "", "    x = 1"]
    # A loop that does more than yield stays a loop.
    loop = ["    for e in it():", "        yield e", "        seen.append(e)"]
    assert gen.yield_from(loop) == loop
