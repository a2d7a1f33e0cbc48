"""Budgets that match what is sent, against the real tiny llama.cpp server (2048-token context).

Counted, never timed: every turn's status, model calls, overflow retries and the server's own
prompt token count.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pyruntime.history import LlamaTokenCounter, count_chat_tokens
from pyruntime.policy import AgentBuilder, AgentMemoryPolicy
from pyruntime.stores import StoreBundle
from pyruntime.turns import AiTaskRequest, TurnStatus
from pyruntime.turns.planning.context import effective_context, fit_request, fixed_parts, overflow_error
from tests.turns.conftest import make_orchestrator, run

MODEL_CTX = 2048
MAX_OUT = 16
LONG_HINT = "The caravan from the northern pass brought iron, salt and rumours of wolves near the old mill. "


def _session(orchestrator, client, role: str, turns: int) -> list:
    async def go() -> list:
        results = []
        for i in range(turns):
            hint = f"{i}: " + LONG_HINT * 3
            results.append(await orchestrator.run_task(
                AiTaskRequest(hint, role, forced_tool_mode="none", max_output_tokens=MAX_OUT, temperature=0.0)))
        await client.aclose()
        return results

    return run(go())


def _assert_every_turn_fits_first_time(results: list, client, counter: LlamaTokenCounter) -> None:
    for result in results:
        assert result.status is TurnStatus.OK, result.error
        assert result.usage.model_calls == 1  # the first request was not refused and retried
        assert result.cut_report.overflow_retries == 0
    assert len(client.bodies) == len(results)
    for body in client.bodies:  # what was sent, rendered and counted as llama.cpp does, plus the reply's room
        assert count_chat_tokens(counter, body["messages"], body.get("tools")) + body["max_tokens"] <= MODEL_CTX


def test_with_chat_history_4096_on_a_2048_token_model_is_capped_with_one_warning(
    tiny_server_url: str, tiny_model_path: Path, memory_stores: StoreBundle, caplog: pytest.LogCaptureFixture
) -> None:
    # Failed before: the role's 4096 was used as is, so once history grew every turn asked for more
    # than the model holds ("2199 tokens requested, 2048 available").
    policy = AgentMemoryPolicy()
    AgentBuilder("Creator").with_memory().with_chat_history(4096, persist_between_sessions=False).build(policy)
    counter = LlamaTokenCounter(tiny_model_path)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, token_counter=counter,
                                             model_context_tokens=MODEL_CTX)
    with caplog.at_level(logging.INFO):
        results = _session(orchestrator, client, "Creator", 14)
    _assert_every_turn_fits_first_time(results, client, counter)
    assert any(r.cut_report.folded_ids for r in results)  # the history did fill the context
    warnings = [r.getMessage() for r in caplog.records if "capped at the model's" in r.getMessage()]
    assert warnings == ["a role's context of 4096 tokens is larger than the model's 2048: capped at the model's"]


def test_a_full_history_does_not_make_the_first_request_of_a_turn_overflow(
    tiny_server_url: str, tiny_model_path: Path, memory_stores: StoreBundle
) -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("Scribe", system_prompt="You are the Scribe. " * 20, max_chat_history_messages=60)
    counter = LlamaTokenCounter(tiny_model_path)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy, token_counter=counter,
                                             model_context_tokens=MODEL_CTX, tool_mode="native")
    results = _session(orchestrator, client, "Scribe", 14)
    _assert_every_turn_fits_first_time(results, client, counter)
    assert any(r.cut_report.folded_ids for r in results)


def test_a_fixed_part_larger_than_the_context_fails_at_once_naming_the_part(
    tiny_server_url: str, tiny_model_path: Path, memory_stores: StoreBundle
) -> None:
    # Failed before: every overflow retry shrank an already empty history, then a generic error.
    policy = AgentMemoryPolicy()
    policy.configure_role("Sage", system_prompt="Remember the ancient laws of the realm. " * 300)
    orchestrator, client = make_orchestrator(tiny_server_url, memory_stores, policy=policy,
                                             token_counter=LlamaTokenCounter(tiny_model_path),
                                             model_context_tokens=MODEL_CTX)

    async def go():
        result = await orchestrator.run_task(AiTaskRequest("hello", "Sage", max_output_tokens=MAX_OUT))
        await client.aclose()
        return result

    result = run(go())
    assert result.status is TurnStatus.FAILED
    assert result.usage.model_calls == 0 and client.bodies == []  # nothing was sent
    assert result.error.startswith("the request's fixed part does not fit the context of 2048 tokens: system prompt ")
    system_tokens = int(result.error.split("system prompt ")[1].split(" tokens")[0])
    assert system_tokens > MODEL_CTX
    assert "hello" not in result.error and "ancient" not in result.error  # sizes, never content
    chat = memory_stores.scoped().get_chat_history("Sage")
    assert [(m.role, m.content) for m in chat] == [("user", "hello")]  # the hint is still recorded once


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
