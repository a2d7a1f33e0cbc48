"""The history pipeline's side of compaction between turns: a `Fold` made once, sent by a later turn.

Pure: stored messages in, a `PreparedHistory` out (heuristic token counts, no model).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from pyruntime.history.cut_report import CompactionKind, predicting
from pyruntime.history.llm_fold import CompactionAbandoned
from pyruntime.history.messages import HistoryMessage
from pyruntime.history.pipeline import CompactionTiming, Disposition, prepare_turn_history
from pyruntime.history.tokens import HeuristicTokenCounter
from pyruntime.policy import RoleMemoryConfig
from tests.history.conftest import dialogue, roomy_budget

COUNTER = HeuristicTokenCounter()
WINDOW = 10
CONFIG = RoleMemoryConfig("AINpc", max_chat_history_messages=WINDOW)


def prepare(stored, prior=None, **kwargs):
    kwargs.setdefault("budget", roomy_budget())
    kwargs.setdefault("compaction_target_ratio", 0.5)
    return asyncio.run(prepare_turn_history(stored, prior, config=kwargs.pop("config", CONFIG), counter=COUNTER,
                                            **kwargs))


def fold_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(("Folded", "LLM compaction"))]


def test_at_the_trigger_a_turn_between_turns_sends_the_previous_head_while_it_fits() -> None:
    history = dialogue(12)
    prepared = prepare(history, timing=CompactionTiming.BETWEEN_TURNS)
    report = prepared.cut_report
    assert report.compaction_deferred and report.compaction is CompactionKind.NONE
    assert prepared.messages == history and prepared.fold is None and prepared.pending_summary is None
    assert prepared.dispositions == (Disposition.SENT,) * 12
    # The same history folds in the turn the design note's way.
    in_turn = prepare(history)
    assert in_turn.cut_report.compaction is CompactionKind.DETERMINISTIC and in_turn.fold is not None


def test_past_the_window_slack_the_turn_folds_itself_and_never_calls_the_summarizer() -> None:
    calls = []

    async def summarizer(messages, options):
        calls.append(messages)
        return "A summary."

    history = dialogue(WINDOW + WINDOW // 2 + 2)  # 16 > the window and its slack (15)
    prepared = prepare(history, timing=CompactionTiming.BETWEEN_TURNS, compact=summarizer,
                       llm_compaction_enabled=True)
    report = prepared.cut_report
    assert report.compaction is CompactionKind.DETERMINISTIC and report.compaction_fell_back
    assert not report.compaction_deferred and not calls
    # Deferring stops at the budget too: a long history past 80 % of it folds in the turn.
    long = dialogue(8, size=2000)
    tight = prepare(long, timing=CompactionTiming.BETWEEN_TURNS, budget=roomy_budget(system_prompt_tokens=3000))
    assert tight.cut_report.compaction is CompactionKind.DETERMINISTIC and not tight.cut_report.compaction_deferred


def test_a_fold_made_between_turns_is_sent_as_made_and_reports_what_a_fold_in_the_turn_reports(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = dialogue(12)
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        with predicting():  # the work between turns: nothing is logged then
            made = prepare(history)
        assert fold_lines(caplog) == []
        waiting = prepare(history, timing=CompactionTiming.BETWEEN_TURNS, staged=made.fold, staged_ready=False)
        assert fold_lines(caplog) == []
        sent = prepare(history, timing=CompactionTiming.BETWEEN_TURNS, staged=made.fold, staged_ready=True)
        # Its fold line is written once, by the turn that sent it (the comparison turn below may log its own).
        lines = fold_lines(caplog)
        assert len(lines) == 1 and lines[0].startswith("Folded 7 message(s)")
    in_turn = prepare(history)
    assert waiting.cut_report.compaction_deferred and waiting.pending_summary is None
    assert waiting.messages == history
    assert sent.fold is made.fold and sent.cut_report.folded_between_turns
    assert sent.pending_summary == in_turn.pending_summary and sent.summary_text == in_turn.summary_text
    assert sent.messages == in_turn.messages and sent.dispositions == in_turn.dispositions
    assert replace(sent.cut_report, folded_between_turns=False) == in_turn.cut_report


def test_a_fold_made_before_more_turns_still_applies_to_the_longer_history() -> None:
    history = dialogue(12)
    made = prepare(history).fold
    later = dialogue(14)  # the turn after the one it was made for (that one sent the previous head)
    sent = prepare(later, timing=CompactionTiming.BETWEEN_TURNS, staged=made)
    assert sent.fold is made and sent.cut_report.folded_ids == [m.id for m in history[:7]]
    assert sent.messages == later[7:]


def test_a_fold_whose_summary_or_messages_changed_is_not_sent() -> None:
    history = dialogue(12)
    made = prepare(history).fold
    assert made is not None
    other_summary = prepare(history, "Previous conversation summary:\n- user: something else",
                            timing=CompactionTiming.BETWEEN_TURNS, staged=made)
    assert other_summary.fold is not made and not other_summary.cut_report.folded_between_turns
    changed = [HistoryMessage("user", "a new game")] + history[1:]
    replaced = prepare(changed, timing=CompactionTiming.BETWEEN_TURNS, staged=made)
    assert replaced.fold is None and replaced.cut_report.compaction_deferred
    assert replaced.messages == changed


def test_a_fold_not_ready_yet_is_sent_when_the_history_no_longer_fits_without_it() -> None:
    history = dialogue(16)  # past the window's slack
    made = prepare(dialogue(12)).fold
    sent = prepare(history, timing=CompactionTiming.BETWEEN_TURNS, staged=made, staged_ready=False)
    assert sent.fold is made and sent.cut_report.folded_between_turns and not sent.cut_report.compaction_deferred


def test_a_summarizer_that_gives_up_abandons_the_fold_without_the_deterministic_fallback() -> None:
    async def preempted(messages, options):
        raise CompactionAbandoned("a player's call took the model")

    with pytest.raises(CompactionAbandoned):
        prepare(dialogue(12), compact=preempted, llm_compaction_enabled=True)
