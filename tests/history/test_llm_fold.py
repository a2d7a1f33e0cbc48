"""The LLM-assisted fold: the call's shape, payload limits and deferral, clipping, fallbacks, cancellation."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pyruntime.history.cut_report import CompactionKind
from pyruntime.history.fold_marker import find_fold_point, split_marker
from pyruntime.history.llm_fold import (
    COMPACTION_ROLE_ID,
    DEFAULT_SUMMARIZER_PROMPT,
    CompactionRequestOptions,
    LlmCompactionOptions,
    build_compaction_payload,
    salient_terms,
)
from pyruntime.history.messages import HistoryMessage as M
from pyruntime.history.messages import utf16_len
from pyruntime.history.pipeline import Disposition, prepare_turn_history
from pyruntime.history.tokens import HeuristicTokenCounter
from pyruntime.policy import RoleMemoryConfig
from tests.history.conftest import dialogue, roomy_budget

NPC = RoleMemoryConfig("AINpc", max_chat_history_messages=15)


class Recorder:
    """Wraps a completion function and keeps what it was called with."""

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[tuple[list[dict], CompactionRequestOptions]] = []

    async def __call__(self, messages, options):
        self.calls.append((messages, options))
        return await self.reply(messages, options)


SUMMARY = "Messages 0, 1, 2, 3 and 4 were exchanged."


async def summarizer(messages, options):
    """A compactor that keeps every number of the folded lines, in fewer characters than they take."""
    return SUMMARY


async def run(stored, prior=None, *, complete=None, enabled=True, config=NPC, options=None, saved=None):
    return await prepare_turn_history(
        stored, prior, config=config, counter=HeuristicTokenCounter(), budget=roomy_budget(),
        compact=complete, llm_compaction_enabled=enabled, llm_options=options,
        save_summary=(saved.append if saved is not None else None),
    )


def test_llm_fold_makes_one_tool_less_call_with_the_compactor_role() -> None:
    recorder = Recorder(summarizer)
    history = dialogue(20)
    prepared = asyncio.run(run(history, complete=recorder))
    assert len(recorder.calls) == 1
    messages, options = recorder.calls[0]
    assert options.role_id == COMPACTION_ROLE_ID == "__CoreAI_ContextCompaction"
    assert (options.temperature, options.max_output_tokens, options.tools) == (0.15, 512, ())
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == DEFAULT_SUMMARIZER_PROMPT
    payload = messages[1]["content"]
    assert "Prior summary:\n(none)" in payload
    assert "\nuser: message 0\nassistant: message 1\n" in payload and "\nuser: message 4\n" in payload
    assert "message 5" not in payload  # the verbatim part never enters the call
    report = prepared.cut_report
    assert report.compaction is CompactionKind.LLM and not report.compaction_fell_back
    assert report.folded_ids == [m.id for m in history[:5]] and prepared.messages == history[5:]
    body, hashes = split_marker(prepared.pending_summary)
    assert body == prepared.summary_text == SUMMARY and hashes[0].id == history[4].id


def test_a_failing_compactor_falls_back_to_the_deterministic_fold(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(messages, options):
        raise ConnectionError("server said: secret player text")

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = asyncio.run(run(dialogue(20), complete=broken))
    report = prepared.cut_report
    assert report.compaction is CompactionKind.DETERMINISTIC and report.compaction_fell_back
    expected = "Previous conversation summary:\n- user: message 0\n- assistant: message 1\n"
    assert prepared.summary_text.startswith(expected)
    fallback = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert [r.levelno for r in fallback] == [logging.WARNING]
    assert "ConnectionError" in fallback[0].getMessage() and "secret" not in caplog.text


def test_a_blank_reply_falls_back() -> None:
    async def blank(messages, options):
        return "  \n "

    prepared = asyncio.run(run(dialogue(20), complete=blank))
    assert prepared.cut_report.compaction_fell_back
    assert prepared.cut_report.compaction is CompactionKind.DETERMINISTIC


def test_cancellation_propagates_and_nothing_is_saved() -> None:
    async def cancelled(messages, options):
        raise asyncio.CancelledError

    saved: list[str] = []
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run(dialogue(20), complete=cancelled, saved=saved))
    assert saved == []


def test_switches_global_off_or_role_off_use_the_deterministic_fold() -> None:
    async def never(messages, options):
        raise AssertionError("the compactor must not be called")

    programmer = RoleMemoryConfig("Programmer", max_chat_history_messages=15, use_llm_context_compaction=False)
    for enabled, config in ((False, NPC), (True, programmer)):
        prepared = asyncio.run(run(dialogue(20), complete=never, enabled=enabled, config=config))
        assert prepared.cut_report.compaction is CompactionKind.DETERMINISTIC
        assert not prepared.cut_report.compaction_fell_back


def test_a_summary_above_4000_chars_is_clipped_and_ends_with_the_marker(caplog: pytest.LogCaptureFixture) -> None:
    async def verbose(messages, options):
        return "Lines 0, 2 and 4 said many things. " * 200  # 7000 chars, the folded lines' numbers kept

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = asyncio.run(run(dialogue(20, size=1400), complete=verbose))  # smaller than what it replaces
    stored = prepared.pending_summary
    assert prepared.cut_report.compaction is CompactionKind.LLM
    body, hashes = split_marker(stored)
    assert 3990 <= utf16_len(body) <= 4000  # the hidden marker is not counted
    assert stored.endswith("]") and hashes and body.endswith("chars]")
    assert "…[+" in body and prepared.cut_report.summary_chars_dropped > 1800
    warning = [r for r in caplog.records if r.getMessage().startswith("Compacted summary clipped to 4000 chars")]
    assert len(warning) == 1 and warning[0].levelno == logging.WARNING
    assert "6999 chars total" in warning[0].getMessage()


def test_a_summary_just_under_4000_chars_is_not_clipped_for_the_hidden_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Failed before: the clip counted the marker line (~130 chars), so 3990 chars lost their tail.
    text = ("Lines 0, 2 and 4: the smith owes the player a sword. " * 80)[:3990].strip()

    async def exact(messages, options):
        return text

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = asyncio.run(run(dialogue(20, size=1400), complete=exact))
    body, anchors = split_marker(prepared.pending_summary)
    assert body == text and anchors
    assert prepared.cut_report.summary_chars_dropped == 0
    assert not [r for r in caplog.records if r.getMessage().startswith("Compacted summary clipped")]


def test_a_summary_not_smaller_than_what_it_replaces_falls_back_to_the_deterministic_fold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What SmolLM2-135M does (bench/bench_summary.py): it repeats the dialogue until its 512 tokens run out.
    async def repeats(messages, options):
        return "user: Hi there, Tobin!\nassistant: Hi there, Tobin!\n" * 30

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        prepared = asyncio.run(run(dialogue(20), complete=repeats))
    report = prepared.cut_report
    assert report.compaction is CompactionKind.DETERMINISTIC and report.compaction_fell_back
    assert "Tobin" not in prepared.pending_summary and len(report.folded_ids) == 5
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("LLM compaction fell back")]
    assert line.startswith("LLM compaction fell back to the deterministic fold: the summary was not smaller than "
                           "what it replaces (") and "Tobin" not in line


def test_a_summary_without_the_players_names_and_numbers_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    # What SmolLM2-135M also does: a short text about nothing the player said.
    history = [M("user", "Evening, captain."), M("assistant", "Evening."), M("user", "My name is Garrick."),
               M("assistant", "Aye."), M("user", "I owe you 25 gold, not 40."), M("assistant", "Hm.")] + dialogue(15)

    async def invents(messages, options):
        return "(narrative of the previous conversation)"

    async def keeps(messages, options):
        return "Garrick owes the captain 25 gold."

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        bad = asyncio.run(run(history, complete=invents))
        good = asyncio.run(run(history, complete=keeps))
    assert bad.cut_report.compaction is CompactionKind.DETERMINISTIC and bad.cut_report.compaction_fell_back
    assert "fell back to the deterministic fold: the summary kept 0 of the 3 names and numbers" in caplog.text
    assert good.cut_report.compaction is CompactionKind.LLM and "Garrick owes" in good.pending_summary
    assert salient_terms(history[:6]) == {"garrick", "25", "40"}  # not "Evening" (it starts its sentence), nor "I"


def test_payload_lines_are_clipped_at_800_and_the_first_line_always_goes_in() -> None:
    messages = [M("user", "a" * 900), M("assistant", "short")]
    payload = build_compaction_payload("", messages, LlmCompactionOptions())
    assert f"user: {'a' * 800}…[+100 chars]" in payload.text
    assert (payload.lines, payload.clipped_lines, payload.chars_dropped, payload.consumed) == (2, 1, 100, 2)
    tight = build_compaction_payload("", messages, LlmCompactionOptions(max_payload_chars=300))
    assert utf16_len(tight.text) <= 300 and tight.lines == 1 and tight.consumed == 1
    assert "…[+" in tight.text


def test_lines_that_do_not_fit_12000_chars_are_deferred_and_folded_next_time(caplog: pytest.LogCaptureFixture) -> None:
    async def summarize(messages, options):
        return "A summary of what was said."

    history = [M("user" if i % 2 == 0 else "assistant", f"{i:02d} " + "z" * 1000) for i in range(40)]
    config = RoleMemoryConfig("AINpc", max_chat_history_messages=5)
    budget_ok = roomy_budget(max_output_tokens=64)  # 1200 history tokens would otherwise bind first
    saved: list[str] = []

    async def turn(stored, prior):
        return await prepare_turn_history(
            stored, prior, config=config, counter=HeuristicTokenCounter(), budget=budget_ok,
            compact=summarize, llm_compaction_enabled=True, save_summary=saved.append,
        )

    with caplog.at_level(logging.INFO, logger="pyruntime.history"):
        first = asyncio.run(turn(history, None))
    report = first.cut_report
    assert report.compaction is CompactionKind.LLM
    # 35 to fold; each payload line is ~815 chars, so 14 fit in 12000.
    assert len(report.folded_ids) == 14 and len(report.deferred_ids) == 21
    assert first.dispositions[:14] == (Disposition.FOLDED,) * 14
    assert first.dispositions[14:35] == (Disposition.DEFERRED,) * 21
    assert split_marker(first.pending_summary)[1][0].id == history[13].id  # stops at the last line sent
    payload_line = [r for r in caplog.records if r.getMessage().startswith("LLM compaction payload")]
    assert payload_line[0].levelno == logging.WARNING
    assert "14 line(s) sent, 14 clipped to 800 chars" in payload_line[0].getMessage()
    assert "21 message(s) deferred to the next compaction" in payload_line[0].getMessage()
    window = [r for r in caplog.records if r.getMessage().startswith("history window")]
    assert "21 deferred to the next compaction" in window[0].getMessage()
    first.commit()

    second = asyncio.run(turn(history, saved[-1]))
    assert find_fold_point(history, saved[-1]) == 14
    assert second.cut_report.already_folded == 14
    assert len(second.cut_report.folded_ids) == 14 and len(second.cut_report.deferred_ids) == 7
    second.commit()
    third = asyncio.run(turn(history, saved[-1]))
    assert len(third.cut_report.folded_ids) == 7 and third.cut_report.deferred_ids == []
    assert third.dispositions.count(Disposition.ALREADY_FOLDED) == 28
