"""Fold bookkeeping on stored messages' identities: repeats, old markers, stored summary limits."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pyruntime.history.budget import compute_history_budget
from pyruntime.history.fold_marker import (
    Anchor,
    find_fold_point,
    marker_anchors,
    split_marker,
    split_marker_versioned,
    with_marker,
)
from pyruntime.history.messages import HistoryMessage as M
from pyruntime.history.pipeline import Disposition, prepare_scoped_turn_history, prepare_turn_history
from pyruntime.history.tokens import HeuristicTokenCounter
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores import (
    AgentMemoryPersistenceMode,
    InMemoryAgentMemoryStore,
    InMemoryConversationSummaryStore,
    ScopedAgentMemoryStore,
    open_stores,
)
from tests.history.conftest import dialogue, roomy_budget

COUNTER = HeuristicTokenCounter()
ROLE = "AINpc"
GREETING = [("user", "hi"), ("assistant", "Hello traveler!")]


def _append(scoped: ScopedAgentMemoryStore, pairs: list[tuple[str, str]]) -> None:
    for role, content in pairs:
        scoped.append_chat_message(ROLE, role, content)


def _turn(scoped: ScopedAgentMemoryStore, config: RoleMemoryConfig, budget=None):
    prepared = asyncio.run(
        prepare_scoped_turn_history(scoped, ROLE, config=config, counter=COUNTER, budget=budget or roomy_budget())
    )
    return prepared


def test_a_repeated_greeting_does_not_make_the_messages_between_count_as_folded() -> None:
    # Failed before: the 8 content hashes of the last folded messages ("hi"/"Hello traveler!" x4) matched
    # again at the second run of greetings, so everything in between was neither sent nor summarized.
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore())
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=2)
    _append(scoped, GREETING * 5 + [("user", "What is new?"), ("assistant", "The mine collapsed.")])
    first = _turn(scoped, config)
    assert first.dispositions == (Disposition.FOLDED,) * 10 + (Disposition.SENT,) * 2
    first.commit()

    middle = [("user", "Who was hurt?"), ("assistant", "Old Tom."), ("user", "bye"), ("assistant", "Farewell.")]
    _append(scoped, middle + GREETING * 4 + [("user", "Any news?"), ("assistant", "None.")])
    second = _turn(scoped, config)
    report = second.cut_report
    assert report.already_folded == 10
    assert second.dispositions[:10] == (Disposition.ALREADY_FOLDED,) * 10
    # Every message after the first fold is folded now or sent; nothing counts as folded earlier.
    assert set(second.dispositions[10:]) <= {Disposition.FOLDED, Disposition.SENT}
    assert second.dispositions.count(Disposition.FOLDED) == len(second.dispositions) - 10 - 2
    body = split_marker(second.pending_summary)[0]
    for line in ("- user: What is new?", "- assistant: The mine collapsed.", "- assistant: Old Tom.",
                 "- assistant: Farewell."):
        assert line in body
    assert body.count("- user: hi") == 9  # 5 from the first fold, 4 from this one: each greeting exactly once
    assert not report.lossy


def test_markers_name_store_orders_and_hashes() -> None:
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore())
    _append(scoped, [(m.role, m.content) for m in dialogue(20)])
    prepared = _turn(scoped, RoleMemoryConfig(ROLE, max_chat_history_messages=5))
    body, anchors, version = split_marker_versioned(prepared.pending_summary)
    stored = scoped.get_chat_history(ROLE)
    assert version == 2
    assert anchors == tuple(Anchor(m.order, M(m.role, m.content).id) for m in reversed(stored[7:15]))
    assert prepared.pending_summary.endswith("[fold:v2:" + ",".join(f"{a.order}:{a.id}" for a in anchors) + "]")


def test_an_anchor_whose_order_now_holds_other_content_folds_nothing_twice() -> None:
    # A session-only history restarts its orders; the old summary's anchor names another message then.
    history = [M(m.role, m.content, order=i + 1) for i, m in enumerate(dialogue(12))]
    summary = with_marker("Previous conversation summary:\n- user: old", marker_anchors(history, 6))
    assert find_fold_point(history, summary) == 6
    restarted = [M(m.role, "other " + m.content, order=i + 1) for i, m in enumerate(dialogue(12))]
    assert find_fold_point(restarted, summary) == 0
    # An anchor trimmed away by the store: every remaining message is newer.
    assert find_fold_point(history[6:], summary) == 0
    # Some older anchors trimmed, the newest still stored: found by its order.
    assert find_fold_point(history[3:], summary) == 3


def test_equal_messages_with_different_orders_are_different_anchors() -> None:
    history = [M("user" if i % 2 == 0 else "assistant", "hi" if i % 2 == 0 else "hello", order=i + 1)
               for i in range(30)]
    for point in (2, 9, 16, 23):
        summary = with_marker("s", marker_anchors(history, point))
        assert find_fold_point(history, summary) == point


def test_a_v1_marker_is_read_earliest_match_first_and_rewritten_as_v2() -> None:
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(), InMemoryConversationSummaryStore())
    _append(scoped, GREETING * 5 + [("user", "What is new?"), ("assistant", "Nothing.")] + GREETING * 4)
    stored = [M(m.role, m.content, order=m.order) for m in scoped.get_chat_history(ROLE)]
    v1_hashes = ",".join(m.id for m in reversed(stored[2:10]))
    scoped.save_summary(ROLE, f"Previous conversation summary:\n- user: hi\n[fold:v1:{v1_hashes}]")
    assert find_fold_point(stored, scoped.load_summary(ROLE)) == 8  # the earliest match: never a loss
    prepared = _turn(scoped, RoleMemoryConfig(ROLE))
    assert prepared.cut_report.already_folded == 8
    assert prepared.dispositions[8:] == (Disposition.SENT,) * 12
    assert prepared.commit()
    body, anchors, version = split_marker_versioned(scoped.load_summary(ROLE))
    assert version == 2 and body == "Previous conversation summary:\n- user: hi"
    assert anchors[0] == Anchor(stored[7].order, stored[7].id)
    assert find_fold_point(stored, scoped.load_summary(ROLE)) == 8
    assert not _turn(scoped, RoleMemoryConfig(ROLE)).commit()  # migrated once; nothing pending now


def test_identities_survive_a_restart_of_persisted_file_history(tmp_path: Path) -> None:
    # Persisted chat: the summary of session-only chat would stay in the first process's memory.
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=4, persist_chat_history=True)
    bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    _append(bundle.scoped(), GREETING * 6)
    _turn(bundle.scoped(), config).commit()
    restarted = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path)
    _append(restarted.scoped(), [("user", "new")] + GREETING * 4)
    prepared = _turn(restarted.scoped(), config)
    assert prepared.cut_report.already_folded == 8
    assert prepared.dispositions[8:] == (Disposition.FOLDED,) * 9 + (Disposition.SENT,) * 4


def test_a_tight_request_cuts_only_the_summary_sent_never_the_stored_one() -> None:
    # Failed before: the clip to one request's summary budget was applied to the stored summary.
    history = dialogue(60, size=60)
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=10)
    roomy = asyncio.run(prepare_turn_history(history[:40], None, config=config, counter=COUNTER,
                                             budget=roomy_budget()))
    tight = compute_history_budget(model_context_tokens=8192, user_payload_tokens=5000)  # one long player message
    second = asyncio.run(prepare_turn_history(history, roomy.pending_summary, config=config, counter=COUNTER,
                                              budget=tight))
    new_body = split_marker(second.pending_summary)[0]
    # The same stored summary as a roomy request leaves (the prior one kept, or condensed by its own bound alone).
    roomy_second = asyncio.run(prepare_turn_history(history, roomy.pending_summary, config=config, counter=COUNTER,
                                                    budget=roomy_budget()))
    assert new_body == split_marker(roomy_second.pending_summary)[0]
    assert COUNTER.count(new_body) > tight.summary_tokens  # more than this request could carry
    assert second.summary_text.startswith("…") and COUNTER.count(second.summary_text) <= tight.summary_tokens
    assert new_body.endswith(second.summary_text[1:])
    # The stored summary is bounded by a limit the request does not set.
    assert tight.stored_summary_tokens == roomy_budget().stored_summary_tokens
    assert tight.summary_bound_tokens == roomy_budget().summary_bound_tokens


def test_the_stored_summary_limit_is_the_explicit_cap_or_a_third_of_a_bare_request() -> None:
    assert compute_history_budget(model_context_tokens=2048, max_rolled_summary_tokens=100).stored_summary_tokens == 100
    bare = compute_history_budget(model_context_tokens=2048)
    assert bare.stored_summary_tokens == (2048 - 512 - 64) // 3
    assert compute_history_budget(model_context_tokens=2048, user_payload_tokens=1000,
                                  overflow_attempt=2).stored_summary_tokens == bare.stored_summary_tokens


def test_tool_results_older_than_the_newest_three_reach_the_summary_when_they_age_out() -> None:
    # Failed before: pruned from the prompt copy and never folded; only their ids were reported.
    results = [M("tool", f"Tool results:\nmemory (ok): fact {i}") for i in range(6)]
    history = []
    for i, result in enumerate(results):
        history += [M("user", f"remember fact {i}"), result, M("assistant", f"noted {i}")]
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=3)
    prepared = asyncio.run(prepare_turn_history(history, None, config=config, counter=COUNTER, budget=roomy_budget()))
    body = split_marker(prepared.pending_summary)[0]
    for i in range(5):  # the newest result is in the verbatim part (3 newest messages)
        assert f"- tool: Tool results: memory (ok): fact {i}" in body
    assert Disposition.PRUNED not in prepared.dispositions
    assert prepared.dispositions == (Disposition.FOLDED,) * 15 + (Disposition.SENT,) * 3


def test_a_superseded_tool_result_is_pruned_while_verbatim_and_folded_once_it_ages_out() -> None:
    old = M("tool", "Tool results:\nmemory (ok): Sword: Dawnbreaker")
    new = M("tool", "Tool results:\nmemory (ok): Sword: Dawnbreaker\nmemory (ok): Shield: Oak")
    history = [M("user", "a"), old, M("assistant", "b"), M("user", "c"), new, M("assistant", "d")]
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=30)
    verbatim = asyncio.run(prepare_turn_history(history, None, config=config, counter=COUNTER, budget=roomy_budget()))
    assert verbatim.dispositions[1] is Disposition.PRUNED and old not in verbatim.messages
    folded = asyncio.run(prepare_turn_history(history, None, config=RoleMemoryConfig(ROLE, max_chat_history_messages=2),
                                              counter=COUNTER, budget=roomy_budget()))
    assert folded.dispositions[:4] == (Disposition.FOLDED,) * 4
    assert "- tool: Tool results: memory (ok): Sword: Dawnbreaker" in split_marker(folded.pending_summary)[0]
