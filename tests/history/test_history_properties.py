"""Property suite: generated sessions keep the history invariants after every turn.

Bounded for CI; `bench/history_properties.py` runs the long profile and reports its counts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from pyruntime.history import pipeline
from pyruntime.history.fold_marker import split_marker
from tests.history.session_sim import SessionPlan, Tally, TurnPlan, run_plan, session_plans

CI_PROFILE = settings(max_examples=150, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@CI_PROFILE
@given(session_plans())
def test_every_turn_of_a_generated_session_keeps_the_invariants(plan: SessionPlan) -> None:
    tally = Tally()
    run_plan(plan, tally)
    assert tally.violations == []
    assert tally.turns == len(plan.turns)


GREETINGS = tuple(TurnPlan("hi", "Hello traveler!") for _ in range(6))
REPEATS = SessionPlan(
    turns=GREETINGS + (TurnPlan("What's new?", "The mine collapsed."), TurnPlan("Who was hurt?", "Old Tom."))
    + GREETINGS + (TurnPlan("bye", "Farewell."),) * 2,
    max_messages=4, persistent=True, chat_cap=40, transcript_cap=80,
)


def test_the_repeated_greeting_session_keeps_the_invariants() -> None:
    tally = Tally()
    run_plan(REPEATS, tally)
    assert tally.violations == [] and tally.folds > 10


def test_the_checker_catches_content_matched_fold_points(monkeypatch) -> None:
    # The fold-point search the runtime had before identities: the LATEST position whose preceding
    # content hashes match. The checker must report what it loses.
    def latest_content_match(messages, summary):
        _, anchors = split_marker(summary)
        ids = [m.id for m in messages]
        for point in range(len(ids), 0, -1):
            if all(ids[point - 1 - j] == a.id for j, a in enumerate(anchors[:point])):
                return point
        return 0

    monkeypatch.setattr(pipeline, "find_fold_point", latest_content_match)
    tally = Tally()
    run_plan(REPEATS, tally)
    assert any("counted as already folded" in v for v in tally.violations)
