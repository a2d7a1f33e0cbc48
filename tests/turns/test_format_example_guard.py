"""The format-example guard: a memory call that pastes the contract's example is refused and stores nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyruntime.memory import MemoryTool
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.memory.tool import memory_tool_definition
from pyruntime.model.client.types import ToolCall
from pyruntime.stores import StoreBundle
from pyruntime.turns import ToolCallMode, ToolContext
from pyruntime.turns.rounds.modes import (
    FORMAT_EXAMPLE_NAME,
    FORMAT_EXAMPLE_REFUSAL,
    copies_format_example,
    tool_contract,
)
from pyruntime.turns.rounds.rules import CallOutcome, ExecutedCall, MemoryToolAdapter, reply_settles_round
from tests.support.loads import loaded
from tests.turns.conftest import run

COPIED = {"action": "append", "content": "The player's horse is called Shadowfax."}


def test_the_structured_contract_shows_the_guarded_name() -> None:
    contract = tool_contract([memory_tool_definition()], ToolCallMode.STRUCTURED)
    assert f"horse is called {FORMAT_EXAMPLE_NAME}." in contract


def test_copies_format_example_only_when_the_player_never_said_the_name() -> None:
    arguments = json.dumps(COPIED)
    assert copies_format_example(arguments, "hello, how are you?")
    assert copies_format_example(arguments.replace("Shadowfax", "SHADOWFAX"), "hi")  # case does not hide it
    assert not copies_format_example(arguments, "Remember: my horse is called shadowfax!")
    assert not copies_format_example(json.dumps({"action": "append", "content": "Sword: Dawnbreaker"}), "hi")


def _run(stores: StoreBundle, arguments: Mapping[str, object], player_text: str | None) -> CallOutcome:
    adapter = MemoryToolAdapter(MemoryTool(stores.memory, "Keeper"), MemoryToolAction.Append, player_text)
    return run(adapter.run(ToolCall.from_raw("c", "memory", json.dumps(arguments)), ToolContext("Keeper")))


def test_a_pasted_example_is_refused_and_nothing_is_stored(file_stores: StoreBundle) -> None:
    refused = _run(file_stores, COPIED, "Hi! How are you today?")
    assert (refused.success, refused.content) == (False, FORMAT_EXAMPLE_REFUSAL)
    # Final: the round's reply answers; asking SmolLM2 again made it paste the example again, three rounds long.
    executed = [ExecutedCall("c", "memory", json.dumps(COPIED), refused)]
    assert reply_settles_round(ToolCallMode.STRUCTURED, "Hello!", executed)
    assert not reply_settles_round(ToolCallMode.STRUCTURED, "", executed)  # no answer yet: ask again
    assert file_stores.memory.try_load("Keeper").state is None  # nothing written, not even an empty document
    # The same call is the player's fact when they said it; without a player text there is no guard.
    assert _run(file_stores, COPIED, "My horse is called Shadowfax, remember it.").success
    assert _run(file_stores, {"action": "append", "content": "Horse: Shadowfax"}, None).success
    assert loaded(file_stores.memory.try_load("Keeper")).memory == (
        "The player's horse is called Shadowfax.\nHorse: Shadowfax")
