"""Budgets that match what is sent, on a model double that holds a 2048-token context as llama-server does.

The double counts every request with the turn engine's own counter (the length heuristic) and refuses one that does
not fit with llama-server's HTTP 400, so a turn that plans wrong shows as a refused first request and an overflow
retry. That the exact counter equals llama.cpp's own prompt tokens is tested on the tiny model in
tests/history/test_tokens.py. Counted, never timed: every turn's status, model calls, overflow retries.
"""

from __future__ import annotations

import logging

import pytest

from pyruntime.history import HeuristicTokenCounter, count_chat_tokens
from pyruntime.policy import AgentBuilder, AgentMemoryPolicy
from pyruntime.stores import StoreBundle
from pyruntime.testing import ChatRequest, RecordingModel, Reply, ScriptedError
from pyruntime.turns import AiOrchestrator, AiTaskRequest, TaskResult, TurnStatus
from pyruntime.turns.planning.context import effective_context, fit_request, fixed_parts, overflow_error
from tests.support.doubles import orchestrator_on, run

MODEL_CTX = 2048
MAX_OUT = 16
LONG_HINT = "The caravan from the northern pass brought iron, salt and rumours of wolves near the old mill. " * 12
COUNTER = HeuristicTokenCounter()


def _sent_tokens(request: ChatRequest) -> int:
    """What the request costs the model: its prompt, counted as the turn engine counts it, plus the reply's room."""
    assert request.max_tokens is not None
    return count_chat_tokens(COUNTER, request.messages, request.tools or None) + request.max_tokens


def _engine_of_2048(request: ChatRequest) -> Reply:
    """A short reply, or llama-server's refusal of a request larger than its context."""
    if _sent_tokens(request) > MODEL_CTX:
        return ScriptedError(400, f"request ({_sent_tokens(request)} tokens) exceeds the available context size "
                                  f"({MODEL_CTX} tokens), try increasing it")
    return "Aye, the road is long."


def _on_2048(memory_stores: StoreBundle, policy: AgentMemoryPolicy, **options: object) -> tuple[AiOrchestrator,
                                                                                                  RecordingModel]:
    model = RecordingModel(_engine_of_2048)
    return orchestrator_on(model, memory_stores, policy, model_context_tokens=MODEL_CTX, **options), model


def _session(orchestrator: AiOrchestrator, role: str, turns: int) -> list[TaskResult]:
    async def go() -> list[TaskResult]:
        return [await orchestrator.run_task(AiTaskRequest(f"{i}: " + LONG_HINT, role, forced_tool_mode="none",
                                                          max_output_tokens=MAX_OUT, temperature=0.0))
                for i in range(turns)]

    return run(go())


def _assert_every_turn_fits_first_time(results: list[TaskResult], model: RecordingModel) -> None:
    for result in results:
        assert result.status is TurnStatus.OK, result.error
        assert result.usage.model_calls == 1  # the first request was not refused and retried
        assert result.cut_report is not None and result.cut_report.overflow_retries == 0
    assert len(model.requests) == len(results)
    assert all(_sent_tokens(r) <= MODEL_CTX for r in model.requests)


def _folding_turns(results: list[TaskResult]) -> list[int]:
    return [i for i, r in enumerate(results) if r.cut_report is not None and r.cut_report.folded_ids]


def test_with_chat_history_4096_on_a_2048_token_model_is_capped_with_one_warning(
    memory_stores: StoreBundle, caplog: pytest.LogCaptureFixture
) -> None:
    # Failed before: the role's 4096 was used as is, so once history grew every turn asked for more
    # than the model holds ("2199 tokens requested, 2048 available").
    policy = AgentMemoryPolicy()
    AgentBuilder("Creator").with_memory().with_chat_history(4096, persist_between_sessions=False).build(policy)
    orchestrator, model = _on_2048(memory_stores, policy)
    with caplog.at_level(logging.INFO):
        results = _session(orchestrator, "Creator", 14)
    _assert_every_turn_fits_first_time(results, model)
    assert _folding_turns(results) == [4, 6, 8, 10, 12]  # the history did fill the context
    assert max(_sent_tokens(r) for r in model.requests) > MODEL_CTX * 3 // 4  # and was sent close to it
    warnings = [r.getMessage() for r in caplog.records if "capped at the model's" in r.getMessage()]
    assert warnings == ["a role's context of 4096 tokens is larger than the model's 2048: capped at the model's"]


def test_a_full_history_does_not_make_the_first_request_of_a_turn_overflow(memory_stores: StoreBundle) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Scribe", system_prompt="You are the Scribe. " * 20, max_chat_history_messages=60)
    orchestrator, model = _on_2048(memory_stores, policy, tool_mode="native")
    results = _session(orchestrator, "Scribe", 14)
    _assert_every_turn_fits_first_time(results, model)
    assert _folding_turns(results) == [4, 7, 10, 13]


def test_a_fixed_part_larger_than_the_context_fails_at_once_naming_the_part(memory_stores: StoreBundle) -> None:
    # Failed before: every overflow retry shrank an already empty history, then a generic error.
    policy = AgentMemoryPolicy()
    policy.configure_role("Sage", system_prompt="Remember the ancient laws of the realm. " * 300)
    orchestrator, model = _on_2048(memory_stores, policy)
    result = run(orchestrator.run_task(AiTaskRequest("hello", "Sage", max_output_tokens=MAX_OUT)))
    assert result.status is TurnStatus.FAILED
    assert result.usage.model_calls == 0 and model.requests == []  # nothing was sent
    assert result.error is not None
    assert result.error.startswith("the request's fixed part does not fit the context of 2048 tokens: system prompt ")
    system_tokens = int(result.error.split("system prompt ")[1].split(" tokens")[0])
    assert system_tokens > COUNTER.count("Remember the ancient laws of the realm. " * 300) > MODEL_CTX
    assert "hello" not in result.error and "ancient" not in result.error  # sizes, never content
    chat = memory_stores.scoped().get_chat_history("Sage")
    assert [(m.role, m.content) for m in chat] == [("user", "hello")]  # the hint is still recorded once


def test_a_turn_the_model_refuses_for_its_context_is_retried_with_less_history(memory_stores: StoreBundle) -> None:
    # The double is honest: planned for 4096 on its 2048, the first request of a full history is refused (so the
    # tests above would fail if the plan ignored the model's context) and the retry fits.
    policy = AgentMemoryPolicy()
    policy.configure_role("Scribe", system_prompt="You are the Scribe.", max_chat_history_messages=60)
    orchestrator, model = _on_2048(memory_stores, policy)
    orchestrator.settings = orchestrator.settings.but(model_context_tokens=2 * MODEL_CTX)
    results = _session(orchestrator, "Scribe", 14)
    assert [r.status for r in results] == [TurnStatus.OK] * 14
    retries = [r.cut_report.overflow_retries if r.cut_report is not None else None for r in results]
    assert retries == [0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 2, 0, 0]  # each refusal shrinks the history again
    assert [r.usage.model_calls for r in results] == [1 + n for n in retries if n is not None]
    assert len(model.requests) == 14 + 2 + 3 + 2 and _sent_tokens(model.requests[-1]) <= MODEL_CTX


def test_effective_context_caps_and_warns_once_per_sizes(caplog: pytest.LogCaptureFixture) -> None:
    warned: set[tuple[int, int]] = set()
    with caplog.at_level(logging.WARNING, logger="pyruntime.turns"):
        assert effective_context(2048, 0, warned) == 2048
        assert effective_context(2048, 1024, warned) == 1024
        assert [effective_context(2048, 4096, warned) for _ in range(3)] == [2048] * 3
    assert len(caplog.records) == 1


def test_the_overflow_message_names_every_part_largest_first() -> None:
    fit = fit_request(2048, 64, 2500)
    error = overflow_error(fit, fixed_parts(2300, 150, 30, 12))
    assert str(error) == (
        "the request's fixed part does not fit the context of 2048 tokens: system prompt 2300 tokens, "
        "tool schemas 150 tokens, tail blocks (memory, instructions, world state) 30 tokens, player message "
        "12 tokens (2500 tokens rendered) plus a completion reserve of 64 tokens; shorten the largest part or "
        "raise the context"
    )
    assert fit.room == 2048 - 64 - 2500 and fit.excess(2000) == 2000 + 64 - 2048
