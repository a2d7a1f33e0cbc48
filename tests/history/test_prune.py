"""Pruning rules of the prompt copy (contract §5): the input list is never changed."""

from __future__ import annotations

from pyruntime.history.messages import HistoryMessage as M
from pyruntime.history.prune import PruneReason, prune_history, strip_think


def sent(messages: list[M]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for _, m in prune_history(messages).kept]


def reasons(messages: list[M]) -> dict[int, PruneReason]:
    return dict(prune_history(messages).pruned)


def test_exact_consecutive_duplicates_are_dropped_but_not_separated_ones() -> None:
    history = [M("user", "hi"), M("user", "  hi "), M("assistant", "hello"), M("user", "hi")]
    assert sent(history) == [("user", "hi"), ("assistant", "hello"), ("user", "hi")]
    assert reasons(history) == {1: PruneReason.DUPLICATE}


def test_same_content_with_another_role_is_not_a_duplicate() -> None:
    history = [M("user", "ok"), M("assistant", "ok")]
    assert len(sent(history)) == 2


def test_think_is_stripped_from_older_assistant_turns_only() -> None:
    history = [
        M("user", "q1"),
        M("assistant", "<think>plan A</think>answer 1"),
        M("user", "q2"),
        M("assistant", "<THINK>only reasoning</THINK>"),
        M("user", "q3"),
        M("assistant", "<think>newest plan</think>answer 3"),
    ]
    assert sent(history) == [
        ("user", "q1"),
        ("assistant", "answer 1"),
        ("user", "q2"),
        ("user", "q3"),
        ("assistant", "<think>newest plan</think>answer 3"),
    ]
    assert reasons(history) == {3: PruneReason.REASONING_ONLY}
    assert history[1].content == "<think>plan A</think>answer 1"  # the input is untouched


def test_unclosed_think_runs_to_the_end() -> None:
    assert strip_think("visible <think>cut off reasoning") == "visible"


def test_superseded_tool_result_is_dropped_with_its_call() -> None:
    history = [
        M("assistant", "call inventory", tool_call_id="c1", tool_name="inventory"),
        M("tool", "sword: 1\nshield: 2", tool_call_id="c1", tool_name="inventory"),
        M("assistant", "call inventory again", tool_call_id="c2", tool_name="inventory"),
        M("tool", "shield: 2\nsword: 1\npotion: 3", tool_call_id="c2", tool_name="inventory"),
    ]
    assert sent(history) == [("assistant", "call inventory again"), ("tool", "shield: 2\nsword: 1\npotion: 3")]
    assert reasons(history) == {0: PruneReason.TOOL_PARTNER_PRUNED, 1: PruneReason.SUPERSEDED_TOOL_RESULT}


def test_a_partially_repeated_tool_result_stays() -> None:
    history = [M("tool", "a\nb", tool_call_id="c1"), M("tool", "a\nc", tool_call_id="c2")]
    assert len(sent(history)) == 2


def test_only_the_newest_three_tool_results_stay() -> None:
    history: list[M] = []
    for n in range(5):
        history += [M("assistant", f"call {n}", tool_call_id=f"c{n}"), M("tool", f"result {n}", tool_call_id=f"c{n}")]
    history.append(M("assistant", "done"))
    kept = sent(history)
    assert [c for r, c in kept if r == "tool"] == ["result 2", "result 3", "result 4"]
    assert [c for r, c in kept if r == "assistant"] == ["call 2", "call 3", "call 4", "done"]
    assert reasons(history) == {
        0: PruneReason.TOOL_PARTNER_PRUNED, 1: PruneReason.OLD_TOOL_RESULT,
        2: PruneReason.TOOL_PARTNER_PRUNED, 3: PruneReason.OLD_TOOL_RESULT,
    }


def test_a_duplicated_tool_result_keeps_its_call() -> None:
    history = [
        M("assistant", "call", tool_call_id="c1"), M("tool", "r", tool_call_id="c1"), M("tool", "r", tool_call_id="c1")
    ]
    assert sent(history) == [("assistant", "call"), ("tool", "r")]


def test_a_reasoning_only_tool_call_is_kept_empty_so_its_result_keeps_its_call() -> None:
    history = [
        M("assistant", "<think>need data</think>", tool_call_id="c1"),
        M("tool", "data", tool_call_id="c1"),
        M("assistant", "final"),
    ]
    assert sent(history) == [("assistant", ""), ("tool", "data"), ("assistant", "final")]
