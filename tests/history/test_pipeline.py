"""One turn's history end to end: window, trigger, partition, deferred persistence, cut report, log lines."""

from __future__ import annotations

import asyncio
import logging

import pytest

from coreai.v1 import orchestrator_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.history.budget import compute_history_budget
from pyruntime.history.cut_report import CompactionKind
from pyruntime.history.fold import SUMMARY_HEADER
from pyruntime.history.fold_marker import find_fold_point, split_marker
from pyruntime.history.messages import HistoryMessage as M
from pyruntime.history.pipeline import Disposition, prepare_scoped_turn_history, prepare_turn_history
from pyruntime.history.tokens import HeuristicTokenCounter, count_message_tokens
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore, ScopedAgentMemoryStore
from tests.history.conftest import dialogue, roomy_budget

COUNTER = HeuristicTokenCounter()


def prepare(stored, prior=None, *, config=None, budget=None, **kwargs):
    return asyncio.run(
        prepare_turn_history(
            stored, prior, config=config or RoleMemoryConfig("AINpc"), counter=COUNTER,
            budget=budget or roomy_budget(), **kwargs,
        )
    )


def window_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("history window:")]


def test_50_stored_and_a_window_of_15_sends_the_newest_15_and_accounts_for_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = dialogue(50)
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = prepare(history, config=RoleMemoryConfig("AINpc", max_chat_history_messages=15))
    assert prepared.messages == history[35:]
    report = prepared.cut_report
    assert (report.stored_messages, report.sent_verbatim) == (50, 15)
    assert report.folded_ids == [m.id for m in history[:35]]
    assert report.compaction is CompactionKind.DETERMINISTIC
    assert prepared.dispositions == (Disposition.FOLDED,) * 35 + (Disposition.SENT,) * 15
    assert prepared.summary_text.splitlines()[0] == "Previous conversation summary:"
    assert prepared.summary_text.splitlines()[1:] == [f"- {m.role}: {m.content}" for m in history[:35]]
    assert "[fold:" not in prepared.summary_text
    body, hashes = split_marker(prepared.pending_summary)
    assert body == prepared.summary_text
    assert tuple(a.id for a in hashes) == tuple(m.id for m in reversed(history[27:35]))
    assert report.tokens_after == prepared.history_tokens == (
        sum(count_message_tokens(COUNTER, m.content) for m in history[35:]) + COUNTER.count(body)
    )
    assert report.summary_tokens_sent == COUNTER.count(body)
    assert report.tokens_before == sum(count_message_tokens(COUNTER, m.content) for m in history)
    [line] = window_lines(caplog)
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"history window: 50 stored message(s) -> 15 sent verbatim, 35 folded into the rolling summary "
        f"(~{report.summary_tokens_sent} tokens sent)"
    )
    fold_line = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Folded")]
    assert fold_line == [
        "Folded 35 message(s) into the rolling summary; 0 bullet(s) clipped to 280 chars: "
        f"{sum(len(m.content) for m in history[:35])} chars total -> "
        f"{sum(len(m.content) for m in history[:35])} kept, 0 dropped"
    ]
    assert not any(m.content in caplog.text for m in history) and not any(m.id in caplog.text for m in history)


def test_a_short_history_is_sent_as_is_without_log_or_summary(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = prepare(dialogue(6))
    assert prepared.messages == dialogue(6)
    assert prepared.pending_summary is None and prepared.summary_text == ""
    assert prepared.cut_report.compaction is CompactionKind.NONE
    assert caplog.records == []


@pytest.mark.parametrize("ratio", [None, 0.0, -1.0, 1.5, float("nan")])
def test_an_invalid_trigger_ratio_acts_as_0_8(ratio: float | None) -> None:
    # 10 messages of 80 tokens + 5 overhead = 850 tokens against a 1000-token history budget.
    history = dialogue(10, size=310)
    budget = compute_history_budget(model_context_tokens=2000, max_output_tokens=936)
    assert budget.history_tokens == 1000
    config = RoleMemoryConfig("AINpc", compaction_trigger_ratio=ratio)
    assert prepare(history, config=config, budget=budget).cut_report.compaction is CompactionKind.DETERMINISTIC
    under = RoleMemoryConfig("AINpc", compaction_trigger_ratio=0.9)
    assert prepare(history, config=under, budget=budget).cut_report.compaction is CompactionKind.NONE


def test_the_token_trigger_keeps_the_newest_that_fit_next_to_the_summary_reserve() -> None:
    history = dialogue(10, size=310)  # 85 tokens each
    budget = compute_history_budget(model_context_tokens=2000, max_output_tokens=936)  # history 1000, summary 333
    prepared = prepare(history, budget=budget)
    # 1000 - 333 = 667 tokens for verbatim messages: 7 of 85.
    assert len(prepared.messages) == 7 and prepared.messages == history[3:]
    assert prepared.history_tokens <= budget.history_tokens


def test_a_newest_message_larger_than_the_budget_is_folded_not_sent_to_overflow() -> None:
    # Sent regardless, it would overflow the context on every attempt of the turn.
    history = [M("user", "old"), M("user", "x" * 8000)]
    budget = compute_history_budget(model_context_tokens=512)
    prepared = prepare(history, budget=budget)
    assert prepared.messages == []
    assert prepared.cut_report.folded_ids == [history[0].id, history[1].id]
    assert prepared.history_tokens <= budget.history_tokens
    # Its bullet is clipped (to the summary's share of this small context), the cut marked with what was dropped.
    [bullet] = [line for line in split_marker(prepared.pending_summary)[0].splitlines() if line.startswith("- user: x")]
    kept = len(bullet) - len("- user: ") - len(f"…[+{8000 - bullet.count('x')} chars]")
    assert bullet == "- user: " + "x" * kept + f"…[+{8000 - kept} chars]" and 0 < kept < 280


def test_a_tool_call_and_its_result_are_never_split_by_the_window() -> None:
    history = dialogue(4) + [
        M("assistant", "calling", tool_call_id="c1", tool_name="inventory"),
        M("tool", "sword: 1", tool_call_id="c1", tool_name="inventory"),
        M("assistant", "You have a sword."),
    ]
    # The newest 2 would be (result, reply): the result goes to the summary with its call.
    prepared = prepare(history, config=RoleMemoryConfig("AINpc", max_chat_history_messages=2))
    assert prepared.messages == history[6:]
    assert prepared.cut_report.folded_ids == [m.id for m in history[:6]]
    # Shrinking would leave nothing: the call joins its result instead.
    prepared = prepare(history[:6], config=RoleMemoryConfig("AINpc", max_chat_history_messages=1))
    assert prepared.messages == history[4:6]


def test_pruned_messages_are_reported_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    history = [
        M("user", "hi"), M("user", "hi"), M("assistant", "<think>hmm</think>"), M("user", "bye"), M("assistant", "ok")
    ]
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = prepare(history)
    assert prepared.messages == [history[0], history[3], history[4]]
    assert prepared.cut_report.pruned_ids == [history[1].id, history[2].id]
    assert prepared.dispositions[1:3] == (Disposition.PRUNED, Disposition.PRUNED)
    [line] = window_lines(caplog)
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        "history window: 5 stored message(s) -> 3 sent verbatim, "
        "2 pruned (superseded tool results / exact duplicates / reasoning-only turns)"
    )


def test_the_summary_is_saved_only_on_commit_and_overflow_retries_persist_nothing() -> None:
    store, summaries = InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore()
    scoped = ScopedAgentMemoryStore(store, summaries)
    for m in dialogue(40):
        scoped.append_chat_message("AINpc", m.role, m.content)
    config = RoleMemoryConfig("AINpc")

    async def attempt(n: int):
        budget = compute_history_budget(model_context_tokens=8192, overflow_attempt=n)
        return await prepare_scoped_turn_history(scoped, "AINpc", config=config, counter=COUNTER, budget=budget)

    failed = [asyncio.run(attempt(n)) for n in (0, 1, 2)]  # the turn overflowed twice, then succeeded
    assert all(p.pending_summary for p in failed)
    assert scoped.load_summary("AINpc") is None
    assert [p.cut_report.overflow_retries for p in failed] == [0, 1, 2]
    assert failed[-1].commit() is True and failed[-1].commit() is False  # once
    assert scoped.load_summary("AINpc") == failed[-1].pending_summary
    assert len(scoped.get_chat_history("AINpc")) == 40  # the store itself is never pruned or folded


def test_commit_without_a_summary_store_is_a_clear_error() -> None:
    prepared = prepare(dialogue(40))
    with pytest.raises(InvalidArgumentError, match="summary store"):
        prepared.commit()


def test_refolding_after_the_history_dropped_its_oldest_rows_folds_each_message_once() -> None:
    store, summaries = InMemoryAgentMemoryStore(chat_cap=40), InMemoryConversationSummaryStore()
    scoped = ScopedAgentMemoryStore(store, summaries)
    config = RoleMemoryConfig("AINpc", max_chat_history_messages=10)
    folded: list[str] = []
    appended = dialogue(120, prefix="turn")
    for step in range(0, 120, 4):
        for m in appended[step : step + 4]:
            scoped.append_chat_message("AINpc", m.role, m.content)
        prepared = asyncio.run(
            prepare_scoped_turn_history(scoped, "AINpc", config=config, counter=COUNTER, budget=roomy_budget())
        )
        folded += prepared.cut_report.folded_ids
        assert prepared.messages == appended[max(0, step + 4 - 10) : step + 4]
        prepared.commit()
    assert folded == [m.id for m in appended[:110]]  # every message exactly once, in order
    stored = [M(m.role, m.content) for m in scoped.get_chat_history("AINpc")]
    assert len(stored) == 40 and find_fold_point(stored, scoped.load_summary("AINpc")) == 30


def turn(scoped: ScopedAgentMemoryStore):
    return asyncio.run(
        prepare_scoped_turn_history(
            scoped, "AINpc", config=RoleMemoryConfig("AINpc"), counter=COUNTER, budget=roomy_budget()
        )
    )


def test_clear_chat_history_also_clears_the_summary_so_the_next_turn_starts_fresh() -> None:
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore())
    for m in dialogue(40):
        scoped.append_chat_message("AINpc", m.role, m.content)
    first = turn(scoped)
    first.commit()
    scoped.clear_chat_history("AINpc")
    scoped.append_chat_message("AINpc", "user", "hello again")
    second = turn(scoped)
    assert second.summary_text == "" and [m.content for m in second.messages] == ["hello again"]


def test_max_rolled_summary_tokens_bounds_the_summary_by_condensing_its_oldest_lines_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = dialogue(60, size=100)
    budget = roomy_budget(max_rolled_summary_tokens=200)
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = prepare(history, budget=budget)
    body = prepared.summary_text
    assert COUNTER.count(body) <= 200 and body.startswith(f"{SUMMARY_HEADER}\n…[+")  # "…[+N earlier lines]"
    lines = body.splitlines()[2:]
    assert lines[-1].startswith(f"- assistant: {history[29].content[:40]}")  # the newest line kept
    # Oldest first: the lines kept get no shorter towards the newest.
    lengths = [len(line) for line in lines]
    assert lengths == sorted(lengths) or lengths[0] <= lengths[-1]
    assert prepared.cut_report.summary_chars_dropped > 0 and prepared.cut_report.lossy
    [line] = [r for r in caplog.records if r.getMessage().startswith("Rolling summary condensed")]
    assert line.levelno == logging.INFO and line.getMessage().endswith("(bound 200)")
    # The stored summary is the bounded one, so the next turn sends it without cutting.
    assert split_marker(prepared.pending_summary)[0] == prepared.summary_text
    assert not [r for r in caplog.records if r.getMessage().startswith("Rolling summary cut")]


def test_without_a_rolling_summary_the_window_cap_leaves_messages_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore())
    for m in dialogue(40):
        scoped.append_chat_message("AINpc", m.role, m.content)
    config = RoleMemoryConfig("AINpc", max_chat_history_messages=30)
    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = asyncio.run(
            prepare_scoped_turn_history(
                scoped, "AINpc", config=config, counter=COUNTER, budget=roomy_budget(), summarize=False
            )
        )
    assert [m.content for m in prepared.messages] == [m.content for m in dialogue(40)[10:]]
    report = prepared.cut_report
    assert report.stored_messages == 31 and report.left_out_ids == [dialogue(40)[9].id] and report.lossy
    [line] = window_lines(caplog)
    assert line.levelno == logging.WARNING
    assert line.getMessage() == (
        "history window: 31 stored message(s) -> 30 sent verbatim, 1 left out by the window with no rolling "
        "summary; ≥1 older message(s) not sent (MaxChatHistoryMessages=30)"
    )


def test_cut_report_to_proto_mirrors_every_field() -> None:
    history = [M("user", "x" * 400)] + dialogue(40) + [M("user", "dup"), M("user", "dup")]
    report = prepare(history).cut_report
    proto = report.to_proto()
    assert isinstance(proto, orchestrator_pb2.CutReport)
    assert proto.stored_messages == 43 and proto.sent_verbatim == report.sent_verbatim == 30
    assert list(proto.folded_ids) == report.folded_ids and list(proto.pruned_ids) == [history[-1].id]
    assert proto.compaction == orchestrator_pb2.COMPACTION_KIND_DETERMINISTIC
    [bullet] = proto.clipped_bullets  # the long line, clipped so that the summary is smaller than what it replaces
    assert bullet.message_id == history[0].id and bullet.chars_kept + bullet.chars_dropped == 400
    assert 0 < bullet.chars_kept < 280 and (bullet.chars_kept, bullet.chars_dropped) == (
        report.clipped_bullets[0].chars_kept, report.clipped_bullets[0].chars_dropped)
    assert proto.tokens_before == report.tokens_before and proto.tokens_after == report.tokens_after


def test_cut_report_proto_has_every_dataclass_field() -> None:
    """Every field of the Python report reaches the wire (the proto mirrors the dataclass one to one)."""
    import dataclasses

    from pyruntime.history.cut_report import CutReport

    proto_fields = set(orchestrator_pb2.CutReport.DESCRIPTOR.fields_by_name)
    assert {f.name for f in dataclasses.fields(CutReport)} == proto_fields
    report = CutReport(already_folded=7, overflow_retries=2, lossy=True, summary_chars_dropped=5)
    proto = report.to_proto()
    assert (proto.already_folded, proto.overflow_retries, proto.lossy, proto.summary_chars_dropped) == (7, 2, True, 5)


def test_compaction_with_hysteresis_folds_down_to_the_target_then_appends_only() -> None:
    # A window of 10 reached folds down to 5, so the next turns keep the summary unchanged.
    config = RoleMemoryConfig("AINpc", max_chat_history_messages=10)
    history = dialogue(11)
    first = prepare(history, config=config, compaction_target_ratio=0.5)
    assert first.messages == history[6:]
    assert first.cut_report.folded_ids == [m.id for m in history[:6]]
    summary = first.pending_summary
    for extra in range(1, 6):  # 5..10 verbatim: below the trigger, nothing folds, the summary stays
        longer = dialogue(11 + extra)
        later = prepare(longer, summary, config=config, compaction_target_ratio=0.5)
        assert later.cut_report.compaction is CompactionKind.NONE and later.pending_summary is None
        assert later.messages == longer[6:]
        assert later.summary_text == first.summary_text
    refold = prepare(dialogue(17), summary, config=config, compaction_target_ratio=0.5)
    assert refold.messages == dialogue(17)[12:]
    # Without hysteresis the same window folds one message per turn.
    assert prepare(history, config=config).messages == history[1:]


def test_hysteresis_keeps_the_newest_message_when_it_fits_the_full_room() -> None:
    history = dialogue(3, size=40) + [M("user", "y" * 2000)]  # the newest alone is over the target's room
    budget = compute_history_budget(model_context_tokens=2000, max_output_tokens=936)  # verbatim room 667
    prepared = prepare(history, budget=budget, config=RoleMemoryConfig("AINpc", max_chat_history_messages=3),
                       compaction_target_ratio=0.5)
    assert prepared.messages == history[3:]
    assert prepared.history_tokens <= budget.history_tokens


def test_a_summary_past_its_bound_is_condensed_below_it_with_hysteresis_then_appended_to() -> None:
    # The summary sits near the prompt's start; condensed to half its bound, the next folds append to it
    # (the model keeps its cached state of the older lines) instead of each fold condensing its start again.
    config = RoleMemoryConfig("AINpc", max_chat_history_messages=4)
    budget = roomy_budget(max_rolled_summary_tokens=200)
    history = dialogue(60, size=100) + dialogue(4, prefix="short")
    cut = prepare(history, budget=budget, config=config, compaction_target_ratio=0.5)
    body = split_marker(cut.pending_summary)[0]
    assert body.startswith(f"{SUMMARY_HEADER}\n…[+") and 60 <= COUNTER.count(body) <= 100
    assert cut.cut_report.lossy and cut.cut_report.summary_chars_dropped > 0  # reported, never silent
    longer = history + dialogue(3, prefix="later")  # past the window again: the next fold, of short lines
    after = prepare(longer, cut.pending_summary, budget=budget, config=config, compaction_target_ratio=0.5)
    assert after.cut_report.compaction is CompactionKind.DETERMINISTIC and not after.cut_report.lossy
    folded = split_marker(after.pending_summary)[0]
    # Not condensed again: the new bullets appended.
    assert folded.startswith(f"{body}\n- ") and folded.endswith("\n- user: later 0")
    longest = longer + dialogue(3, prefix="last")
    last = prepare(longest, after.pending_summary, budget=budget, config=config, compaction_target_ratio=0.5)
    assert split_marker(last.pending_summary)[0].startswith(folded + "\n- ")  # from then on: appended to
    # Without hysteresis the same summary is condensed to the bound itself, so every later fold condenses it again.
    plain = prepare(history, budget=budget, config=config)
    assert 150 <= COUNTER.count(split_marker(plain.pending_summary)[0]) <= 200
