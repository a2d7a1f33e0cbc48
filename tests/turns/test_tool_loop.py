"""The tool loop's rules on real tools and a real store: repair, unknown tools, repeats, validation, guard."""

from __future__ import annotations

import asyncio
import logging

import pytest
from pydantic import BaseModel, field_validator

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryTool
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.model.client.types import ToolCall
from pyruntime.stores import InMemoryAgentMemoryStore
from pyruntime.turns.rounds.registry import ToolContext, ToolOutput, ToolRegistry
from pyruntime.turns.rounds.rules import LoopGuard, MemoryToolAdapter, ToolExecutor, offered_tools
from tests.support.loads import loaded


class Roll(BaseModel):
    sides: int

    @field_validator("sides")
    @classmethod
    def _die(cls, value: int) -> int:
        if value not in (4, 6, 20):
            raise ValueError("sides must be 4, 6 or 20")
        return value


def _call(name: str, arguments: str, call_id: str = "c1") -> ToolCall:
    return ToolCall.from_raw(call_id, name, arguments)


def _executor(registry: ToolRegistry, store: InMemoryAgentMemoryStore | None = None) -> ToolExecutor:
    memory = MemoryToolAdapter(MemoryTool(store, "K"), MemoryToolAction.Append) if store is not None else None
    _, offered = offered_tools(memory, registry.tools_for("R"), None)
    return ToolExecutor(offered, ToolContext("R"))


def _registry(handler=lambda args: {"rolled": args.sides}) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("R", "roll", "Roll a die.", Roll, handler)
    return registry


def test_valid_call_runs_the_handler_with_validated_args() -> None:
    seen = []

    def roll(args: Roll, ctx: ToolContext) -> str:
        seen.append((args, ctx.role_id))
        return "rolled"

    executor = _executor(_registry(roll))
    done = asyncio.run(executor.run_call(_call("roll", '{"sides": 6}')))
    assert done.outcome.success and done.outcome.content == "rolled"
    assert seen == [(Roll(sides=6), "R")]


def test_validation_error_goes_back_as_the_result() -> None:
    calls = []
    executor = _executor(_registry(lambda args: calls.append(args)))
    bad = asyncio.run(executor.run_call(_call("roll", '{"sides": 7}')))
    assert not bad.outcome.success
    assert "invalid arguments for tool 'roll'" in bad.outcome.content and "sides" in bad.outcome.content
    broken = asyncio.run(executor.run_call(_call("roll", '{"sides": 6', "c2")))
    assert not broken.outcome.success and "not valid JSON" in broken.outcome.content
    assert calls == []  # the handler never ran


def test_name_case_is_repaired_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    executor = _executor(_registry())
    with caplog.at_level(logging.INFO, logger="pyruntime.turns"):
        done = asyncio.run(executor.run_call(_call("ROLL", '{"sides": 4}')))
    assert done.name == "roll" and done.outcome.success
    assert any("repaired the case of a tool name" in r.message for r in caplog.records)
    assert all("ROLL" not in r.getMessage() for r in caplog.records)


def test_unknown_tool_and_exact_repeat_get_explanatory_errors() -> None:
    executor = _executor(_registry())
    unknown = asyncio.run(executor.run_call(_call("fly", "{}")))
    assert not unknown.outcome.success and "unknown tool 'fly'" in unknown.outcome.content
    assert "Available tools: roll" in unknown.outcome.content
    first = asyncio.run(executor.run_call(_call("roll", '{"sides": 6}')))
    again = asyncio.run(executor.run_call(_call("Roll", '{ "sides" : 6 }', "c2")))
    assert first.outcome.success and not again.outcome.success
    assert "repeats your previous call exactly" in again.outcome.content
    other = asyncio.run(executor.run_call(_call("roll", '{"sides": 4}', "c3")))
    assert other.outcome.success


def test_handler_exception_and_tool_output_failure() -> None:
    def boom(args: Roll) -> None:
        raise RuntimeError("the die fell off the table")

    failed = asyncio.run(_executor(_registry(boom)).run_call(_call("roll", '{"sides": 6}')))
    assert not failed.outcome.success
    assert failed.outcome.content == "tool 'roll' failed: RuntimeError: the die fell off the table"

    async def refuse(args: Roll) -> ToolOutput:
        return ToolOutput(False, "no dice here")

    refused = asyncio.run(_executor(_registry(refuse)).run_call(_call("roll", '{"sides": 6}')))
    assert (refused.outcome.success, refused.outcome.content) == (False, "no dice here")


def test_memory_tool_runs_against_the_store() -> None:
    store = InMemoryAgentMemoryStore()
    executor = _executor(ToolRegistry(), store)
    done = asyncio.run(executor.run_call(_call("memory", '{"action": "append", "content": "likes swords"}')))
    assert done.outcome.success and '"Success":true' in done.outcome.content
    assert loaded(store.try_load("K")).memory == "likes swords"
    failed = asyncio.run(executor.run_call(_call("memory", '{"action": "delete"}', "c2")))
    assert not failed.outcome.success and "old_text is required" in failed.outcome.summary


def test_allowed_names_filter_case_insensitively() -> None:
    registry = _registry()
    memory = MemoryToolAdapter(MemoryTool(InMemoryAgentMemoryStore(), "K"), MemoryToolAction.Append)
    role_tools, offered = offered_tools(memory, registry.tools_for("R"), ["ROLL"])
    assert [t.name for t in role_tools] == ["memory", "roll"]
    assert [t.name for t in offered] == ["roll"]
    assert offered_tools(memory, registry.tools_for("R"), [])[1] == []


def test_guard_ends_after_three_failing_rounds_or_the_limit() -> None:
    executor = _executor(_registry())
    ok = asyncio.run(executor.run_call(_call("roll", '{"sides": 6}')))
    bad = asyncio.run(executor.run_call(_call("roll", '{"sides": 5}', "c2")))
    guard = LoopGuard(max_roundtrips=0)
    for _ in range(2):
        guard.record_round([bad])
    guard.record_round([ok, bad])  # a round with a success resets the count
    assert guard.failing_rounds == 0
    for _ in range(3):
        guard.record_round([bad])
    assert guard.too_many_failures() and not guard.limit_reached()
    assert "3 tool-call rounds in a row failed" in guard.failures_message()
    assert "sides must be 4, 6 or 20" in guard.failures_message()
    limited = LoopGuard(max_roundtrips=2)
    limited.record_round([ok])
    assert not limited.limit_reached()
    limited.record_round([ok])
    assert limited.limit_reached() and "limit of 2 tool-call roundtrip(s)" in limited.limit_message()


def test_registry_refuses_bad_registrations() -> None:
    registry = _registry()
    with pytest.raises(InvalidArgumentError):
        registry.register("R", "ROLL", "dup", Roll, print)  # same name, other case
    with pytest.raises(InvalidArgumentError):
        registry.register("R", "memory", "reserved", Roll, print)
    with pytest.raises(InvalidArgumentError):
        registry.register("R", "bad name", "x", Roll, print)
    with pytest.raises(InvalidArgumentError):
        registry.register("R", "x", "x", dict, print)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        registry.register(" ", "x", "x", Roll, print)
    assert [t.name for t in registry.tools_for(" R ")] == ["roll"]
    assert registry.unregister("R", "Roll") and registry.tools_for("R") == []
