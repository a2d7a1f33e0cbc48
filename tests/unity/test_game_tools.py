"""Game tools from the compiled C# package (pythonnet): AgentBuilder.WithTool, schema derivation, handlers on the
main thread, a handler exception as a failed result, against a real runtime on the tiny model (a forced call)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.unity.conftest import wait


@pytest.fixture
def main_thread(assemblies: Any) -> Iterator[Any]:
    """A simulated Unity main thread."""
    from CoreAI.Tests import SimulatedUnityMainThread

    main = SimulatedUnityMainThread()
    yield main
    main.Dispose()


def test_schema_is_derived_from_public_fields_and_properties(assemblies: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    assert json.loads(GameToolScenarios.SchemaOf()) == {
        "type": "object",
        "properties": {
            "buyer": {"type": "string", "description": "Who buys."},
            "count": {"type": "integer"},
            "weight": {"type": "number"},
            "rush": {"type": "boolean"},
            "metal": {"type": "string", "enum": ["Iron", "Steel"]},
            "discount": {"type": "integer"},
            "note": {"type": "string", "description": "A note for the smith."},
        },
        "required": ["buyer", "count", "weight", "rush", "metal"],
        "additionalProperties": False,
    }
    assert "tool argument UnsupportedArgs.Items has type List`1" in GameToolScenarios.UnsupportedSchema()


def test_round_trip_runs_the_handler_on_the_main_thread(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    report = wait(GameToolScenarios.RoundTripAsync(main_thread, client, False))
    result = report.Result
    assert str(result.Status) in ("Ok", "ToolLoopEnded"), result.Error
    assert (report.OnMain, report.OffMain) == (report.Seen.Count, 0) and report.Seen.Count >= 1
    first = result.ToolResults[0]
    expected = "45 gold" if report.Seen[0] == "Steel" else "30 gold"
    assert (first.Name, first.Success, first.Content) == ("quote_price", True, expected)
    assert result.ToolCalls[0].CallId == first.CallId


def test_a_handler_exception_is_a_failed_result_the_model_sees(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    report = wait(GameToolScenarios.RoundTripAsync(main_thread, client, True))
    first = report.Result.ToolResults[0]
    assert (first.Success, first.Content) == (
        False, "tool 'quote_price' failed: InvalidOperationException: the price list is missing")
    assert report.OnMain >= 1 and report.OffMain == 0


def test_the_result_form_reports_its_own_failure(client: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    result = wait(GameToolScenarios.ResultFormAsync(client))
    first = result.ToolResults[0]
    assert not first.Success and first.Content in ("out of Iron", "out of Steel")


def test_cancelling_the_turn_mid_call_cancels_the_handler_and_the_call(client: Any, runtime: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    assert wait(GameToolScenarios.CancelMidCallAsync(client)) == "cancelled / handler cancelled"
    # The runtime's turn ended with the stream: no call waits, and only the hint was recorded.
    from pyruntime.stores import TranscriptKind

    for _ in range(400):
        entries = runtime.orchestrator.stores.scoped().get_transcript("Smith3")
        if entries:
            break
        time.sleep(0.05)
    assert [e.kind for e in entries] == [TranscriptKind.USER]
    assert runtime.orchestrator.client_calls.waiting == 0


def test_an_enumerated_stream_runs_the_handler_on_the_main_thread(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import GameToolScenarios

    report = wait(GameToolScenarios.EnumeratedAsync(main_thread, client))
    assert str(report.Result.Status) in ("Ok", "ToolLoopEnded"), report.Result.Error
    assert report.OnMain >= 1 and report.OffMain == 0
    seen = list(report.Seen)
    assert seen[0] in ("Iron", "Steel") and seen[1] == "result:30 gold"  # the handler ran before its result streamed
