"""Deterministic fold, 280-char clipping, fold markers, fold-point re-detection, the summary token limiter."""

from __future__ import annotations

import hashlib

from pyruntime.history.fold import SUMMARY_HEADER, SummaryShape, deterministic_fold, limit_summary_tokens
from pyruntime.history.fold_marker import (
    Anchor,
    find_fold_point,
    fold_marker,
    marker_anchors,
    split_marker,
    strip_fold_marker,
    with_marker,
)
from pyruntime.history.messages import HistoryMessage as M
from pyruntime.history.messages import clip_marked, message_id, utf16_len
from pyruntime.history.tokens import HeuristicTokenCounter, count_message_tokens
from tests.history.conftest import dialogue


def test_message_id_is_the_first_12_hex_of_sha256_of_trimmed_role_and_content() -> None:
    expected = hashlib.sha256(b"user\nhello there").hexdigest()[:12]
    assert message_id(" user ", "  hello there\n") == expected
    assert M("user", "hello there").id == expected


def test_fold_format_keeps_the_existing_summary_first_and_skips_blank_messages() -> None:
    fold = deterministic_fold(
        "Previous conversation summary:\n- user: my name is Alex",
        [M("user", "I like swords"), M("assistant", "   "), M("assistant", "Noted,\nswords it is.")],
    )
    assert fold.body == (
        "Previous conversation summary:\n"
        "- user: my name is Alex\n"
        "- user: I like swords\n"
        "- assistant: Noted, swords it is."
    )
    assert fold.bullets == 2 and fold.clipped == ()


def test_an_llm_summary_is_kept_as_the_first_lines() -> None:
    fold = deterministic_fold("The player is Alex.", [M("user", "hi")])
    assert fold.body == "Previous conversation summary:\nThe player is Alex.\n- user: hi"


def test_bullets_are_clipped_at_280_chars_with_the_dropped_count() -> None:
    content = "a" * 275 + "     " + "b" * 100  # 380 chars; the cut at 280 lands after the spaces
    fold = deterministic_fold("", [M("user", content)])
    line = fold.body.splitlines()[1]
    assert line == "- user: " + "a" * 275 + "…[+105 chars]"
    assert fold.clipped[0].chars_kept == 275 and fold.clipped[0].chars_dropped == 105
    assert (fold.chars_total, fold.chars_kept, fold.chars_dropped) == (380, 275, 105)


def test_clipping_counts_utf16_units_and_never_splits_a_surrogate_pair() -> None:
    text = "x" * 279 + "😀" + "tail"  # the emoji is two UTF-16 units: units 280 and 281
    clipped, dropped = clip_marked(text, 280)
    assert clipped == "x" * 279 + "…[+6 chars]"
    assert dropped == 6 and utf16_len(text) == 285
    assert clip_marked("😀" * 140, 280) == ("😀" * 140, 0)


def test_marker_round_trip_and_stripping() -> None:
    anchors = [Anchor(100 - i, f"{i:012x}") for i in range(10)]
    stored = with_marker("Previous conversation summary:\n- user: hi", anchors)
    assert stored.endswith("\n[fold:v2:" + ",".join(f"{a.order}:{a.id}" for a in anchors[:8]) + "]")
    assert split_marker(stored) == ("Previous conversation summary:\n- user: hi", tuple(anchors[:8]))
    assert strip_fold_marker(stored) == "Previous conversation summary:\n- user: hi"
    assert strip_fold_marker("no marker here") == "no marker here"


def test_a_marker_inside_message_content_cannot_fake_the_fold_point() -> None:
    fake = fold_marker([Anchor(1, "0" * 12)])
    fold = deterministic_fold("", [M("user", "text\n" + fake)])
    assert split_marker(fold.body)[1] == ()


def test_fold_point_is_found_after_new_messages_were_appended() -> None:
    history = dialogue(20)
    summary = with_marker("s", marker_anchors(history, 12))
    assert find_fold_point(history, summary) == 12
    assert find_fold_point(history + dialogue(3, prefix="new"), summary) == 12


def test_fold_point_is_found_after_the_store_dropped_its_oldest_rows() -> None:
    history = dialogue(40)
    summary = with_marker("s", marker_anchors(history, 30))
    assert find_fold_point(history[25:], summary) == 5  # 5 of the 8 marked messages still stored
    assert find_fold_point(history[29:], summary) == 1
    assert find_fold_point(history[30:], summary) == 0  # every folded message left the store


def test_duplicates_are_folded_once() -> None:
    # "ok" and "yes" repeat; the 8-hash marker still pins the fold point to the first run.
    history = [M("user", "ok"), M("assistant", "yes")] * 3 + dialogue(6) + [M("user", "ok"), M("assistant", "yes")]
    summary = with_marker("s", marker_anchors(history, 8))
    assert find_fold_point(history, summary) == 8
    # The fold point with only one hash matching in a repeat later on is not confused either.
    summary_at_two = with_marker("s", marker_anchors(history, 2))
    assert find_fold_point(history, summary_at_two) == 2


def test_legacy_summary_without_marker_probes_its_last_bullet() -> None:
    history = dialogue(10)
    legacy = "Previous conversation summary:\n- user: message 0\n- assistant: message 1"
    assert find_fold_point(history, legacy) == 2
    assert find_fold_point(history, "unrelated summary") == 0


def test_limiter_keeps_the_newest_suffix_one_token_short_with_a_leading_ellipsis() -> None:
    counter = HeuristicTokenCounter()
    text = "".join(f"line {i:03d}\n" for i in range(100))  # 900 chars = 225 tokens
    cut = limit_summary_tokens(text, counter, 50)
    assert cut.text.startswith("…") and text.endswith(cut.text[1:])
    assert counter.count(cut.text) <= 49
    assert cut.tokens == counter.count(cut.text)
    assert cut.chars_dropped == utf16_len(text) - utf16_len(cut.text[1:])
    assert limit_summary_tokens(cut.text, counter, 50).text == cut.text  # not cut again next turn
    assert limit_summary_tokens("short", counter, 50).text == "short"


def _shape(**kwargs) -> SummaryShape:
    return SummaryShape(HeuristicTokenCounter(), **kwargs)


def test_a_shaped_fold_costs_at_most_its_share_of_what_it_replaces_the_npcs_lines_clipped_first() -> None:
    counter = HeuristicTokenCounter()
    messages = [M("user", "My name is Alex and I carry a sword called Dawnbreaker " * 3),
                M("assistant", "Aye, a fine blade. The road north is muddy and the bridge needs mending. " * 4),
                M("user", "hi")]
    fold = deterministic_fold("", messages, _shape())
    bullets = fold.body.splitlines()[1:]
    verbatim = sum(count_message_tokens(counter, m.content) for m in messages)
    assert sum(counter.count(line) + 1 for line in bullets) <= verbatim // 2
    user, npc, short = bullets
    assert short == "- user: hi"  # short lines stay whole
    kept = {c.message_id: c.chars_kept for c in fold.clipped}
    assert kept[messages[1].id] < kept[messages[0].id] <= 2 * kept[messages[1].id]  # the player keeps twice as much
    assert fold.bullet_chars == kept[messages[1].id] and len(fold.clipped) == 2
    # Without a shape: the design note's fold (280 chars).
    assert deterministic_fold("", messages).body.splitlines()[1] == "- user: " + messages[0].content.strip()


def test_a_clip_whose_marker_costs_what_it_saves_is_not_made() -> None:
    messages = [M("assistant", "x" * 60), M("user", "y" * 50)]  # a few chars over any cap: the marker costs more
    fold = deterministic_fold("", messages, _shape(fold_share=0.1))
    assert fold.clipped == () and fold.body.splitlines()[1:] == ["- assistant: " + "x" * 60, "- user: " + "y" * 50]


def test_a_summary_past_its_bound_is_condensed_oldest_lines_first_then_dropped_and_counted() -> None:
    counter = HeuristicTokenCounter()
    prior = SUMMARY_HEADER + "\n" + "\n".join(f"- user: line {i} " + "w" * 150 for i in range(12))
    fold = deterministic_fold(prior, [M("user", "newest " + "n" * 150)],
                              _shape(limit_tokens=400, target_ratio=0.5, fold_share=1.0))
    lines = fold.body.splitlines()
    assert counter.count(fold.body) <= 200 and fold.condensed is not None
    assert lines[0] == SUMMARY_HEADER and lines[1].startswith("…[+") and lines[1].endswith(" earlier lines]")
    assert lines[-1] == "- user: newest " + "n" * 150  # the newest line whole
    shortened = [line for line in lines[2:-1] if "…[+" in line]
    assert shortened and all(line.endswith(" chars]") for line in shortened)
    c = fold.condensed
    assert c.dropped == int(lines[1][3:].split()[0]) and c.tokens_after == counter.count(fold.body) < c.tokens_before
    # Condensed again later: the dropped lines add up, an earlier clip's count is carried on.
    again = deterministic_fold(fold.body, [M("user", "later " + "l" * 150)], _shape(limit_tokens=150, fold_share=1.0))
    first = again.body.splitlines()[1]
    assert int(first[3:].split()[0]) > c.dropped
    clipped = [line for line in again.body.splitlines() if line.endswith(" chars]")]
    assert all(int(line.rsplit("[+", 1)[1].split()[0]) >= 150 - 48 for line in clipped[:-1])


def test_an_earlier_llm_summary_is_condensed_as_a_whole_line() -> None:
    prior = "The player, Alex, asked about swords. " * 20  # one long line of prose
    fold = deterministic_fold(prior, [M("user", "hi")], _shape(limit_tokens=60, target_ratio=1.0))
    lines = fold.body.splitlines()
    assert lines[1].startswith("The player, Alex") and lines[1].endswith(" chars]") and lines[-1] == "- user: hi"
