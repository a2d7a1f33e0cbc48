"""The long profile of the history property suite: many generated sessions, counts reported.

The same generator and invariant checks as `tests/history/test_history_properties.py` (see
`tests/history/session_sim.py`): repeated messages, tool rounds, tight and loose budgets, restarts,
file-cap trimming and a scripted LLM compactor; every invariant checked after every turn. Prints
sessions, turns, refused turns, stored messages checked, folds, restarts and violations (0 expected),
and the first violation hypothesis shrank to, if any.

Run: `nice -n 10 .venv/bin/python bench/history_properties.py [--examples 3000] [--seed 1]`
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, seed, settings

from tests.history.session_sim import SessionPlan, Tally, run_plan, session_plans


def main() -> int:
    """Run the profile; exit 1 when an invariant broke."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000, help="generated sessions (default 3000)")
    parser.add_argument("--max-turns", type=int, default=40, help="turns per session at most (default 40)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("pyruntime").setLevel(logging.ERROR)  # trim warnings are expected here; counts say it all

    tally = Tally()
    first: list[str] = []

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(session_plans(max_turns=args.max_turns))
    def profile(plan: SessionPlan) -> None:
        before = len(tally.violations)
        run_plan(plan, tally)
        if len(tally.violations) > before and not first:
            first.extend(tally.violations[before:])
        assert len(tally.violations) == before, tally.violations[before:]

    started = time.perf_counter()
    failed = None
    try:
        profile()
    except AssertionError as error:  # hypothesis re-raises the shrunk failure
        failed = error
    elapsed = time.perf_counter() - started
    print(f"history property profile: {args.examples} examples requested, seed {args.seed}, "
          f"{elapsed:.1f} s")
    print(f"  sessions {tally.sessions}, turns {tally.turns} ({tally.refused_turns} refused: fixed part over the "
          f"context), stored messages checked {tally.messages}, folds {tally.folds}, restarts {tally.restarts}")
    print(f"  violations: {len(tally.violations)}")
    if failed is not None:
        print(f"  first violation: {first[:1]}; shrunk: {failed}")
    print("command: nice -n 10 .venv/bin/python bench/history_properties.py "
          f"--examples {args.examples} --max-turns {args.max_turns} --seed {args.seed}")
    return 1 if tally.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
