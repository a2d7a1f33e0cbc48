"""A game server's load: hundreds of players through the public async client, over both transports, against the
recording test engine (`pyruntime.testing.engine`: every request served at once, 28 ms to the first token, 24
tokens 4 ms apart), with `serve --llm-url` as it ships: the engine's concurrency asked or set, every turn admitted
(it waits for a place rather than being refused), nothing lost, each request naming its one conversation.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import AsyncRuntimeClient
from pyruntime.model.client.concurrency import DEFAULT_EXTERNAL_CONCURRENCY
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.service.admission import running_places
from pyruntime.testing.engine import LatencyEngine, LatencyEngineServer, LatencyModel
from pyruntime.turns.planning.tail_anchors import conversation_digest
from tests.rpc.conftest import TOKEN, Runtime, start_runtime

ROLE = "SmartChat"  # memory tool on, history saved
MARKER = r"P\d{4}T\d"


@pytest.fixture
def engine() -> Iterator[LatencyEngineServer]:
    with LatencyEngineServer(LatencyEngine(marker=MARKER)) as server:
        yield server


def external(tmp_path: Path, engine: LatencyEngineServer, **settings: Any) -> Runtime:
    """`serve --llm-url` at the test engine, started as serve starts it (the engine asked for its concurrency)."""
    return start_runtime(tmp_path / "data", no_model=False, llm_url=engine.base_url, **settings)


def scope(player: int) -> AgentMemoryScope:
    return AgentMemoryScope(tenant_id="game", user_id=f"player-{player:04d}")


async def players(url: str, count: int, turns: int, seed: int = 1) -> dict[int, list[str]]:
    """`count` players, each saying `turns` lines (streamed) with a short pause after each reply; what was
    acknowledged (a final event with status OK), per player. Any refusal fails the test."""
    acknowledged: dict[int, list[str]] = {}

    async def player(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        async with AsyncRuntimeClient(url, token=TOKEN, timeout=120) as client:
            await asyncio.sleep(rng.uniform(0, 0.3))
            for turn in range(turns):
                line = f"P{index:04d}T{turn} I found a ring near the mill."
                final = None
                async for event in client.stream_task(line, role_id=ROLE, scope=scope(index), max_output_tokens=32):
                    if event.HasField("final"):
                        final = event.final
                assert final is not None and final.status == pb.TURN_STATUS_OK, final
                acknowledged.setdefault(index, []).append(line)
                await asyncio.sleep(rng.uniform(0.1, 0.3))

    await asyncio.gather(*(player(i) for i in range(count)))
    return acknowledged


def check_nothing_lost(runtime: Runtime, acknowledged: dict[int, list[str]]) -> None:
    for index, lines in acknowledged.items():
        with runtime.client("connect") as client:
            said = [m.content for m in client.get_chat_history(ROLE, scope=scope(index)) if m.role == "user"]
        assert said == lines  # every acknowledged line, once, in order


def check_one_conversation_per_request(engine: LatencyEngineServer, count: int) -> None:
    expected = {f"P{i:04d}": conversation_digest(storage_key(ROLE, scope(i))) for i in range(count)}
    for request in engine.engine.requests:
        owners = {marker[:5] for marker in request.markers}
        assert len(owners) == 1, owners  # no request mixing two players' lines
        owner = owners.pop()
        assert request.user == request.conversation == expected[owner]  # its conversation, named both ways


@pytest.mark.parametrize(("count", "transport"), [(100, "grpc"), (200, "connect")])
def test_hundreds_of_players_are_all_served_nothing_lost_and_no_request_mixes_two(
        tmp_path: Path, engine: LatencyEngineServer, count: int, transport: str) -> None:
    runtime = external(tmp_path, engine)
    try:
        acknowledged = asyncio.run(players(runtime.url(transport), count, turns=2))
        assert sum(map(len, acknowledged.values())) == 2 * count
        check_nothing_lost(runtime, acknowledged)
        check_one_conversation_per_request(engine, count)
        # The engine batches: it was sent many calls at once, not one after the other.
        assert engine.engine.stats.peak > 8
        text = runtime.services.metrics.render().decode()
        assert 'coreai_turns_total{status="resource_exhausted"}' not in text
    finally:
        runtime.handle.stop()


def test_the_concurrency_is_asked_of_the_engine_and_the_flag_overrides_it(tmp_path: Path) -> None:
    with LatencyEngineServer(LatencyEngine(slots=12)) as props_engine, \
            LatencyEngineServer(LatencyEngine()) as plain_engine:
        for engine, settings, expected in ((props_engine, {}, 12),  # llama-server's /props total_slots
                                           (props_engine, {"llm_concurrency": 3}, 3),  # --llm-concurrency wins
                                           (plain_engine, {}, DEFAULT_EXTERNAL_CONCURRENCY)):  # no /props
            runtime = external(tmp_path / str(expected), engine, **settings)
            try:
                assert runtime.orchestrator.queue.capacity == expected
                with runtime.client("grpc") as client:
                    health = client.health()
                assert (health.model_concurrency, health.max_turns_running) == (expected, running_places(expected))
            finally:
                runtime.handle.stop()


def test_calls_beyond_the_engines_concurrency_wait_in_the_runtime(tmp_path: Path, engine: LatencyEngineServer) -> None:
    runtime = external(tmp_path, engine, llm_concurrency=2)
    try:
        acknowledged = asyncio.run(players(runtime.url("grpc"), 12, turns=1))
        assert len(acknowledged) == 12
        assert engine.engine.stats.peak == 2  # never more calls at once than the engine was said to run
    finally:
        runtime.handle.stop()


def test_the_metrics_show_what_the_runtime_added_to_each_streamed_first_token(tmp_path: Path) -> None:
    """`coreai_turn_first_token_added_seconds`: a player's first token less the engine's own time to it."""
    slow_first_token = 0.4
    with LatencyEngineServer(LatencyEngine(LatencyModel(first_token_s=slow_first_token, tokens=4))) as slow:
        runtime = external(tmp_path, slow)
        try:
            async def two_lines() -> list[float]:
                firsts = []
                async with AsyncRuntimeClient(runtime.url("connect"), token=TOKEN, timeout=60) as client:
                    for line in ("I found a ring near the mill.", "Do you sell rope?"):
                        began = time.perf_counter()
                        first = None
                        async for event in client.stream_task(line, role_id=ROLE, scope=scope(1)):
                            if first is None and event.HasField("text_delta"):
                                first = time.perf_counter() - began
                        assert first is not None
                        firsts.append(first)
                    await client.run_task("And a lantern?", role_id=ROLE, scope=scope(1))  # not streamed: not counted
                return firsts

            firsts = asyncio.run(two_lines())
            text = runtime.services.metrics.render().decode()
        finally:
            runtime.handle.stop()
    count = re.search(r"^coreai_turn_first_token_added_seconds_count (\S+)$", text, re.M)
    total = re.search(r"^coreai_turn_first_token_added_seconds_sum (\S+)$", text, re.M)
    assert count is not None and total is not None
    assert float(count.group(1)) == 2.0
    assert all(first >= slow_first_token for first in firsts)  # the players waited for the engine...
    added = float(total.group(1))
    assert 0 < added < sum(firsts) - 2 * slow_first_token + 0.01  # ...which is not counted as the runtime's
