"""No conversation reaches another in the hosted engine (llama-server, tiny model), checked from outside.

Many conversations, more than slots, in a seeded random interleaving (`workload.py`): states leave their slots and
come back, some conversations share a system prompt, two share a long prefix and differ in one early token, two
are byte-identical twins in different scopes; turns are cancelled during their prompt and during their reply; the
engine restarts with its states saved. `engine_check.py` proves two things for every turn: it reused only cells
its own conversation made, and its first-token distribution is a fresh engine's. The seed is in every finding;
`COREAI_ISOLATION_SEED` replays another one. The same check on the embedded model, longer:
`bench/bench_isolation.py` (docs/benchmarks.md#isolation).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pyruntime.model.client.slot_moves import SlotMoves
from pyruntime.model.client.slots import SlotUse
from pyruntime.model.hosting.process import LlamaServerProcess
from tests.isolation.engine_check import Report, compare, fresh_distributions, run_schedule
from tests.isolation.workload import Schedule, Turn, build_schedule
from tests.support.fixtures import start_llama_server

SEED = int(os.environ.get("COREAI_ISOLATION_SEED", "40"))


def engine(model: Path, **settings: Any) -> Callable[[], LlamaServerProcess]:
    """Engines as the runtime hosts them, flash attention off (then a fresh engine's distribution is exact)."""
    return lambda: start_llama_server(model, flash_attention="off", **settings)


def checked(schedule: Schedule, model: Path, folder: Path, **settings: Any) -> Report:
    report = asyncio.run(run_schedule(schedule, engine(model, prompt_cache_dir=folder, **settings)))
    fresh = asyncio.run(fresh_distributions(schedule.probes, engine(model, slots=1, prompt_cache_mb=0)))
    compare(report, fresh)
    return report


@pytest.mark.parametrize("parked_mb", [64, 1])  # 1 MiB holds a few tiny states: parked ones are evicted too
def test_every_turn_reuses_only_its_own_state_and_sees_only_its_own_prompt(tiny_model_path: Path, tmp_path: Path,
                                                                          parked_mb: int) -> None:
    schedule = build_schedule(SEED, conversations=10, rounds=8, restarts=2)
    report = checked(schedule, tiny_model_path, tmp_path / "cache", slots=4, prompt_cache_mb=parked_mb)
    assert not report.findings, "\n".join([f"seed {SEED}:", *report.findings])
    # It exercised what it claims: reuse, parked states coming back, cancels, restarts with saved states.
    assert report.reused >= len(schedule.probes) // 3
    assert report.slot_actions.get("save", 0) >= 10 and report.slot_actions.get("restore", 0) >= 5
    assert report.cancelled >= 3 and report.restarts == 2


def test_the_check_names_a_turn_that_reused_another_conversations_state(tiny_model_path: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The mix-up the runtime prevents: slots change hands with their cells (nothing parked, nothing started afresh).
    async def reuse_whatever_is_there(self: SlotMoves, use: SlotUse) -> bool:
        return False

    monkeypatch.setattr(SlotMoves, "prepare", reuse_whatever_is_there)
    schedule = build_schedule(SEED, conversations=7, rounds=4, restarts=0)
    report = checked(schedule, tiny_model_path, tmp_path / "cache", slots=2)
    crossed = [f for f in report.findings if "crossed from one conversation to another" in f]
    assert crossed, report.findings
    assert f"(seed {SEED}) reused" in crossed[0] and "which held" in crossed[0]


class SystemPromptLeak:
    """The engine answers one turn as if another conversation's system prompt were its own (llama.cpp issue 27422):
    a client middleware that rewrites that turn's request on its way."""

    def __init__(self, leaked: str, victim: Turn) -> None:
        self._leaked, self._victim = leaked, victim

    async def __call__(self, request: aiohttp.ClientRequest,
                       handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        if request.url.path.endswith("/chat/completions"):
            sent = request.body
            body = json.loads(sent if isinstance(sent, bytes) else await sent.as_bytes())
            if not body.get("stream") and body["messages"] == list(self._victim.messages):
                body["messages"][0]["content"] = self._leaked
                await request.update_body(json.dumps(body).encode())
        return await handler(request)


def test_the_check_names_a_turn_the_engine_answered_with_another_conversations_prompt(tiny_model_path: Path,
                                                                                      tmp_path: Path) -> None:
    schedule = build_schedule(SEED, conversations=7, rounds=3, restarts=0)
    leaked = next(c.system for c in schedule.conversations if c.group == "one-token")
    victim = next(turn for turn in schedule.probes if turn.conversation.group == "shared-system")
    report = asyncio.run(run_schedule(schedule, engine(tiny_model_path, slots=2, prompt_cache_dir=tmp_path / "c"),
                                      SystemPromptLeak(leaked, victim)))
    fresh = asyncio.run(fresh_distributions(schedule.probes, engine(tiny_model_path, slots=1, prompt_cache_mb=0)))
    found = compare(report, fresh)
    assert len(found) == 1 and found[0].startswith(f"{victim.label} (seed {SEED})"), found
