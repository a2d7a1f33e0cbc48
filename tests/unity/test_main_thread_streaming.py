"""Streamed turns deliver on Unity's main thread by default (a simulated UnitySynchronizationContext), opt out for
background consumers, and can be consumed through the async-enumerable pattern (what `await foreach` compiles to)."""

from __future__ import annotations

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


def _request(role: str, hint: str) -> Any:
    from CoreAI.Ai import AiTaskRequest, ForcedToolMode

    request = AiTaskRequest()
    request.RoleId, request.Hint, request.MaxOutputTokens = role, hint, 16
    request.ForcedToolMode = getattr(ForcedToolMode, "None")
    return request


def test_callbacks_run_on_the_main_thread_by_default(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import MainThreadStreaming

    report = wait(MainThreadStreaming.CallbacksAsync(main_thread, client.CreateOrchestrator(), _request("Bard", "Sing"),
                                                     True))
    assert report.Result.Succeeded, report.Result.Error
    assert len(report.Deltas) >= 1 and report.OnMain >= 1
    assert report.OffMain == 0
    assert report.ResumedOnMain
    # Every delta arrived before the result, in order: they make up the reply.
    assert report.Joined == report.Result.Text


def test_opt_out_delivers_on_the_reading_thread(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import MainThreadStreaming

    report = wait(MainThreadStreaming.CallbacksAsync(main_thread, client.CreateOrchestrator(), _request("Bard", "Sing"),
                                                     False))
    assert report.Result.Succeeded and len(report.Deltas) >= 1
    assert report.OnMain == 0 and report.OffMain >= 1


def test_a_throwing_main_thread_callback_ends_the_turn_with_its_exception(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import MainThreadStreaming

    outcome = wait(MainThreadStreaming.ThrowingCallbackAsync(main_thread, client.CreateOrchestrator(),
                                                             _request("Bard", "Sing")))
    assert outcome == "typewriter gone (main)"


def test_async_enumerable_pattern_yields_items_on_the_main_thread(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import MainThreadStreaming

    report = wait(MainThreadStreaming.EnumerateAsync(main_thread, client.CreateOrchestrator(), _request("Bard", "Sing"),
                                                     -1))
    assert report.Result.Succeeded, report.Result.Error
    assert "TextDelta" in list(report.Kinds) and report.OffMain == 0 and report.ResumedOnMain
    assert report.Joined == report.Result.Text


def test_breaking_out_of_the_enumeration_stops_the_turn(client: Any, main_thread: Any) -> None:
    from CoreAI.Tests import MainThreadStreaming

    report = wait(MainThreadStreaming.EnumerateAsync(main_thread, client.CreateOrchestrator(), _request("Bard", "Sing"),
                                                     1))
    # DisposeAsync (what `await foreach` calls on break) returns only once the turn has ended.
    assert len(report.Deltas) == 1 and report.ResumedOnMain and report.TurnEndedAtDispose


def test_the_pattern_has_the_shape_await_foreach_binds_to(assemblies: Any) -> None:
    from System import Type

    stream = Type.GetType("CoreAI.Ai.AiTaskStream, CoreAI.Client")
    enumerator = stream.GetMethod("GetAsyncEnumerator").ReturnType
    move_next = enumerator.GetMethod("MoveNextAsync").ReturnType.ToString()
    assert move_next == "System.Threading.Tasks.Task`1[System.Boolean]"
    assert enumerator.GetProperty("Current").PropertyType.Name == "AiTaskStreamItem"
    assert enumerator.GetMethod("DisposeAsync") is not None
