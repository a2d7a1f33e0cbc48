"""A structured reply that already answers ends the turn when its calls only stored memory."""

from __future__ import annotations

import json

import pytest

from pyruntime.memory import MemoryTool
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.model.client.types import ToolCall
from pyruntime.stores import StoreBundle
from pyruntime.turns import ToolCallMode, ToolContext
from pyruntime.turns.rounds.rules import CallOutcome, ExecutedCall, MemoryToolAdapter, reply_settles_round
from tests.turns.conftest import run

STORED = ExecutedCall("c1", "memory", "{}", CallOutcome(True, "{}", "DONE", result_needed=False))
READ = ExecutedCall("c2", "memory", "{}", CallOutcome(True, "{}", "DONE"))
FAILED = ExecutedCall("c3", "memory", "{}", CallOutcome(False, "{}", "content is required"))


@pytest.mark.parametrize(
    ("mode", "reply", "calls", "settles"),
    [
        (ToolCallMode.STRUCTURED, "I will remember.", [STORED], True),
        (ToolCallMode.STRUCTURED, "I will remember.", [STORED, STORED], True),
        (ToolCallMode.STRUCTURED, "  \n", [STORED], False),  # no answer yet: the model must answer
        (ToolCallMode.STRUCTURED, "Let me look.", [READ], False),  # it must see what it read
        (ToolCallMode.STRUCTURED, "I will remember.", [STORED, FAILED], False),  # it must see the error
        (ToolCallMode.STRUCTURED, "Hello", [], False),
        (ToolCallMode.NATIVE, "I will remember.", [STORED], False),  # native needs the tool-result round
    ],
)
def test_reply_settles_round(mode: ToolCallMode, reply: str, calls: list[ExecutedCall], settles: bool) -> None:
    assert reply_settles_round(mode, reply, calls) is settles


def _outcome(memory_stores: StoreBundle, arguments: dict[str, object]) -> CallOutcome:
    tool = MemoryTool(memory_stores.memory, "Keeper")
    adapter = MemoryToolAdapter(tool, MemoryToolAction.Append)
    call = ToolCall.from_raw("c", "memory", json.dumps(arguments))
    return run(adapter.run(call, ToolContext("Keeper")))


def test_memory_results_needed_only_for_reads_and_failures(memory_stores: StoreBundle) -> None:
    stored = _outcome(memory_stores, {"action": "append", "content": "Sword: Dawnbreaker"})
    assert stored.success and not stored.result_needed
    # Repaired arguments count too: a wrong-case action is still a mutation.
    again = _outcome(memory_stores, {"action": " APPEND ", "content": "Horse: Shadowfax"})
    assert again.success and not again.result_needed
    read = _outcome(memory_stores, {"action": "read"})
    assert read.success and read.result_needed and "Dawnbreaker" in read.content
    missing = _outcome(memory_stores, {"action": "append"})
    assert not missing.success and missing.result_needed
