"""The prewarm on real llama.cpp (the tiny model hosted by llama-server): what the engine evaluates because of it.

Token counts only, never times. What the prewarm sends and when (the prediction, skips, failures, supersession) is
tested exactly on the model doubles in test_prewarm.py; these prove what only the engine can show: that the next
turn finds its prefix warm (a fold made between turns too), that the prompt cache keeps no entry for a prewarm, that
a prewarm puts a conversation back into a single slot after the writer pass displaced it, and that the summarizer's
call of an LLM fold between turns runs on the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyruntime.history import CompactionKind, LlmCompactionOptions, strip_fold_marker
from pyruntime.model import OpenAICompatClient
from pyruntime.testing import RecordingModel
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from tests.support.fixtures import start_llama_server
from tests.turns.smith_session import HINTS, is_summarizer, kind, smith_session, writer_session


def _engine(base_url: str) -> RecordingModel:
    """The runtime's own client in llama-server's dialect, as `build_orchestrator` sets it up, recorded."""
    return RecordingModel(OpenAICompatClient(base_url, llama_server=True, forced_tools_as_schema=True))


@pytest.fixture(scope="module")
def sessions(tiny_server_url: str) -> dict[bool, dict[str, Any]]:
    """The same session with the prewarm on and off, one after the other on the session's tiny server."""
    return {flag: smith_session(_engine(tiny_server_url), prewarm=flag) for flag in (True, False)}


def test_the_turn_after_a_predicted_compaction_evaluates_only_its_new_tokens(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    compacting = [i for i, r in enumerate(on["results"])
                  if r.cut_report is not None and r.cut_report.compaction is not CompactionKind.NONE]
    assert compacting == [3, 5, 7]  # as on the doubles: the engine's replies do not change the plan
    appending = [i for i in range(1, len(HINTS)) if i not in compacting]
    for i in compacting:
        warm, cold = on["results"][i].usage, off["results"][i].usage
        assert warm.prompt_tokens == cold.prompt_tokens  # the same request
        # Off: the new head and the whole history again. On: the prewarm evaluated those.
        assert warm.evaluated_prompt_tokens * 2 < cold.evaluated_prompt_tokens, (i, warm, cold)
        # At most what an append-only turn evaluates (the reply before it and the player's line).
        most_appended = max(on["results"][j].usage.evaluated_prompt_tokens for j in appending)
        assert warm.evaluated_prompt_tokens <= most_appended, (i, warm, most_appended)
    assert on["stats"].sent == len(on["prewarms"]) == len(compacting) and on["stats"].failed == 0
    # The work moved off the turns is counted where it went (benches add it to the runtime's total).
    moved = sum(off["results"][i].usage.evaluated_prompt_tokens - on["results"][i].usage.evaluated_prompt_tokens
                for i in compacting)
    assert on["stats"].evaluated_tokens >= moved // 2 > 0
    assert [r.body for r in on["turns"]] == [r.body for r in off["turns"]]  # the engine's replies were the same too


def test_with_the_prompt_cache_a_prewarm_leaves_no_entry_behind(tiny_model_path: Path) -> None:
    # The prewarm's state (its prompt, the generation prompt, one token) is the next turn's prefix but for
    # those last tokens: the turn extends it in the same slot, nothing goes to the host cache for it.
    entries = {}
    for flag in (True, False):
        server = start_llama_server(tiny_model_path, prompt_cache_mb=64, slots=1)
        try:
            # With the server's status, as `build_orchestrator` wires it: the cache has room, so prewarms go out.
            session = smith_session(_engine(server.base_url), prewarm=flag, prompt_cache_status=server.status)
            entries[flag] = server.status()["prompt_cache_entries"]
        finally:
            server.stop()
        if flag:
            assert session["stats"].sent == 3
    assert entries[True] == entries[False], entries


def test_after_a_writer_pass_the_prewarm_puts_the_conversation_back(tiny_model_path: Path) -> None:
    # With one slot and no host prompt cache the writer pass's request replaces the conversation in the
    # engine's KV cache: the prewarm, queued behind it, evaluates the conversation again before the player's
    # next line. (With slots, each keeps its own; with the host cache, the conversation comes back from it.)
    server = start_llama_server(tiny_model_path, slots=1, prompt_cache_mb=0)
    try:
        on_model, off_model = _engine(server.base_url), _engine(server.base_url)
        on, stats = writer_session(on_model, prewarm=True)
        off, _ = writer_session(off_model, prewarm=False)
    finally:
        server.stop()
    # One decision per statement, then the prewarm; after the question no writer call and nothing to warm.
    assert [kind(r) for r in on_model.requests] == ["turn", "writer", "writer", "prewarm", "turn"]
    assert stats.sent == 1 and on_model.where(lambda r: r.max_tokens == PREWARM_MAX_TOKENS)[0].temperature == 0.0
    assert on[1].usage.prompt_tokens == off[1].usage.prompt_tokens
    assert on[1].usage.evaluated_prompt_tokens * 2 < off[1].usage.evaluated_prompt_tokens, (on[1].usage, off[1].usage)
    assert [r.body for r in on_model.requests if kind(r) == "turn"] == \
        [r.body for r in off_model.requests if kind(r) == "turn"]


def test_the_turn_that_sends_a_fold_made_between_turns_finds_it_warm(tiny_server_url: str, sessions: dict) -> None:
    # The fold is made after the reply and warmed with it; the turn that sends it evaluates only its own new tokens.
    between = smith_session(_engine(tiny_server_url), prewarm=True, background_compaction=True)
    cold = sessions[False]
    sent = [i for i, r in enumerate(between["results"])
            if r.cut_report is not None and r.cut_report.folded_between_turns]
    assert sent == [3, 5, 7]
    for i in sent:
        warm_usage, cold_usage = between["results"][i].usage, cold["results"][i].usage
        assert warm_usage.prompt_tokens == cold_usage.prompt_tokens  # the same request as the fold in the turn
        assert warm_usage.evaluated_prompt_tokens * 2 < cold_usage.evaluated_prompt_tokens, (i, warm_usage, cold_usage)


def test_an_llm_fold_made_between_turns_runs_on_the_engine_and_the_next_turn_sends_its_summary(
        tiny_server_url: str) -> None:
    # The summarizer's call goes to llama-server behind player turns (streamed, pre-emptible); the random model's
    # summary is bounded so that it comes out smaller than what it folds and is taken.
    model = _engine(tiny_server_url)
    session = smith_session(model, prewarm=True, background_compaction=True, llm_compaction_enabled=True,
                            llm_compaction_options=LlmCompactionOptions(max_output_tokens=24), turns=5)
    reports = [r.cut_report for r in session["results"]]
    assert [r is not None and r.folded_between_turns and r.compaction is CompactionKind.LLM for r in reports] == [
        False, False, False, True, False]
    summaries = model.where(is_summarizer)
    # The fold the fourth turn sent, and the next one staged after the fifth.
    assert [(r.streamed, r.max_tokens, r.temperature) for r in summaries] == [(True, 24, 0.15)] * 2
    summary = session["summary"]
    assert summary and strip_fold_marker(summary) in str(session["turns"][3].messages[1]["content"])
