"""Two runtimes on one PostgreSQL behind a real nginx running the documented configuration
(docs/operations/nginx-coreai.conf), with players on gRPC and Connect through the public async client.

What is checked is what a studio would check: which runtime served each call (the balancer's access log),
and what the database holds afterwards. A runtime is SIGKILLed mid-run: its players go on on the other, and
every write and turn a player saw acknowledged is stored exactly once. No timing is asserted.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.client import AsyncRuntimeClient, RuntimeCallError
from pyruntime.scopes import AgentMemoryScope, conversation_id
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, open_stores
from tests.support.loads import loaded
from tests.support.scale_out import NGINX_CONF, ROOT, TOKEN, AccessLine, Deployment, scripted_deployment

ROLE = "SmartChat"  # built in: memory tool on, chat history persisted (the defaults keep it in the process)
REPLY = "Aye, traveller."
# Each piece 40 ms apart: a turn lasts long enough that the kill finds turns in flight.
SCRIPT: dict[str, object] = {
    "rules": [], "default": {"reply": REPLY, "pieces": ["Aye", ", ", "traveller", "."], "delay_ms": 40}}
TRANSPORTS = ("grpc", "connect")


@pytest.fixture
def deployment(tmp_path: Path, postgres_url: str) -> Iterator[Deployment]:
    """Two runtimes with the scripted model (memory tool in the reply: turns write nothing else) behind nginx."""
    started = scripted_deployment(tmp_path, postgres_url, SCRIPT)
    yield started
    started.stop()


def client(deployment: Deployment, transport: str) -> AsyncRuntimeClient:
    """A game server's one client of the balancer for a transport (shared by its players)."""
    return AsyncRuntimeClient(deployment.url(transport), token=TOKEN, ca_cert=deployment.certificates.ca_cert,
                              timeout=60)


def scope_of(player: str) -> AgentMemoryScope:
    return AgentMemoryScope("studio", player)


async def _turn(runtime: AsyncRuntimeClient, line: str, scope: AgentMemoryScope, streamed: bool) -> str:
    """One turn through RunTask or StreamTask; its reply."""
    if streamed:
        events = [e async for e in runtime.stream_task(line, role_id=ROLE, scope=scope)]
        final = events[-1].final
    else:
        final = await runtime.run_task(line, role_id=ROLE, scope=scope)
    assert final.status == pb.TURN_STATUS_OK, final.error
    return final.text


@dataclass
class Player:
    """One player: a memory write and a turn per round, each acknowledged or found stored after a failure."""

    name: str
    runtime: AsyncRuntimeClient
    rounds: int
    acked: list[str] = field(default_factory=list)  # facts and lines the player saw land, in order
    failures: int = 0  # calls that failed (the runtime died under them): checked, then sent again or not
    found_stored: int = 0  # failed calls the check found stored (done before the runtime died, never answered)

    @property
    def scope(self) -> AgentMemoryScope:
        return scope_of(self.name)

    async def play(self, progress: asyncio.Event, count: list[int], kill_at: int) -> None:
        for i in range(self.rounds):
            await self._until_stored(f"{self.name} fact {i}", self._write, self._has_fact)
            await self._until_stored(f"{self.name} line {i}",
                                     partial(_turn, self.runtime, scope=self.scope, streamed=i % 2 == 1),
                                     self._has_line)
            count[0] += 1
            if count[0] >= kill_at:
                progress.set()

    async def _write(self, fact: str) -> None:
        result = await self.runtime.apply_memory_tool(ROLE, {"action": "append", "content": fact}, scope=self.scope)
        assert result.success, result.error

    async def _has_fact(self, fact: str) -> bool:
        state = (await self.runtime.load_state(ROLE, scope=self.scope)).state
        return state is not None and fact in state.memory.split("\n")

    async def _has_line(self, line: str) -> bool:
        messages = await self.runtime.get_chat_history(ROLE, 4, scope=self.scope)
        return any(m.role == "user" and m.content == line for m in messages)

    async def _until_stored(self, item: str, send: Callable[[str], Awaitable[object]],
                            stored: Callable[[str], Awaitable[bool]]) -> None:
        """Send item; after a failure, send it again only when the store does not hold it (the documented retry)."""
        for _ in range(20):
            try:
                await send(item)
                self.acked.append(item)
                return
            except RuntimeCallError:
                self.failures += 1
            for _ in range(20):  # the check goes to the runtime the balancer now picks
                try:
                    if await stored(item):
                        self.acked.append(item)
                        self.found_stored += 1
                        return
                    break
                except RuntimeCallError:
                    await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name} could not get {item!r} stored")


def _conversations(lines: Iterable[AccessLine], players: Iterable[str]) -> dict[str, set[str]]:
    """The runtimes (addresses) that answered each player's conversation in these access lines."""
    ids = {conversation_id(ROLE, scope_of(p)): p for p in players}
    served: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        if line.conversation in ids:
            served[ids[line.conversation]].add(line.served_by)
    return served


def test_each_conversation_stays_on_one_runtime_and_calls_without_one_are_spread(deployment: Deployment) -> None:
    players = [f"{t}-{n}" for t in TRANSPORTS for n in range(8)]

    async def run() -> None:
        for transport in TRANSPORTS:
            async with client(deployment, transport) as runtime:
                for _ in range(8):
                    await runtime.health()
                for player in (p for p in players if p.startswith(transport)):
                    scope = scope_of(player)
                    await runtime.apply_memory_tool(ROLE, {"action": "append", "content": "likes ale"}, scope=scope)
                    await _turn(runtime, "hello", scope, streamed=False)
                    await _turn(runtime, "again", scope, streamed=True)
                    await runtime.get_chat_history(ROLE, scope=scope)

    asyncio.run(run())
    lines = deployment.access_lines(at_least=16)  # the Health calls at least
    served = _conversations(lines, players)
    assert sorted(served) == sorted(players)  # every call about a conversation carried its id, both transports
    assert all(len(runtimes) == 1 for runtimes in served.values()), served
    assert {r for runtimes in served.values() for r in runtimes} == {"127.0.0.2", "127.0.0.3"}
    health = [line for line in lines if line.rpc.endswith("/Health")]
    assert len(health) == 16 and all(line.conversation == "" for line in health)
    assert {line.served_by for line in health} == {"127.0.0.2", "127.0.0.3"}  # no header: round robin
    assert {line.status for line in lines} == {200}


def test_a_runtime_killed_mid_run_loses_no_acknowledged_write_and_its_players_go_on(deployment: Deployment) -> None:
    rounds, per_transport = 6, 8
    killed = deployment.runtimes[0]
    kill_offset: list[int] = []

    async def run() -> list[Player]:
        clients = {t: client(deployment, t) for t in TRANSPORTS}
        players = [Player(f"{t}-{n}", clients[t], rounds) for t in TRANSPORTS for n in range(per_transport)]
        progress, count = asyncio.Event(), [0]
        total = len(players) * rounds

        async def kill() -> None:
            await progress.wait()
            kill_offset.append(deployment.access_log_size())
            await asyncio.to_thread(killed.kill)
            await asyncio.sleep(0.5)  # the calls in flight on it end (failed) meanwhile
            kill_offset.append(deployment.access_log_size())

        killer = asyncio.create_task(kill())
        try:
            await asyncio.gather(*(p.play(progress, count, kill_at=total // 3) for p in players))
        finally:
            await killer
            for runtime in clients.values():
                await runtime.aclose()
        return players

    players = asyncio.run(run())
    names = [p.name for p in players]

    # Before the kill each conversation stayed on one runtime, and the killed one served some of them.
    before = _conversations(deployment.access_lines(0, kill_offset[0]), names)
    assert all(len(runtimes) == 1 for runtimes in before.values()), before
    moved = [p for p, runtimes in before.items() if runtimes == {killed.host}]
    assert moved, "the killed runtime served no conversation before it died"
    # After it, every call was answered by the other runtime: its players went on there.
    after = _conversations(deployment.access_lines(kill_offset[1]), names)
    assert {r for runtimes in after.values() for r in runtimes} <= {"127.0.0.3"}
    assert set(moved) <= set(after)

    # Every acknowledged write and turn is in the database, exactly once and in order; nothing else is.
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=deployment.database_url)
    try:
        for player in players:
            view = stores.scoped(player.scope, None)
            facts = [a for a in player.acked if " fact " in a]
            lines = [a for a in player.acked if " line " in a]
            assert len(facts) == len(lines) == rounds
            assert loaded(view.try_load(ROLE)).memory.split("\n") == facts
            history = [(m.role, m.content) for m in view.get_chat_history(ROLE)]
            assert history == [row for line in lines for row in (("user", line), ("assistant", REPLY))]
    finally:
        stores.close()
    print(f"calls that failed under the kill: {sum(p.failures for p in players)}, "
          f"found stored by the check: {sum(p.found_stored for p in players)}")



def test_the_page_shows_the_configuration_the_tests_run() -> None:
    page = (ROOT / "docs" / "operations" / "scale-out.md").read_text(encoding="utf-8")
    shown = page.split("```nginx\n", 1)[1].split("```", 1)[0]
    assert shown == NGINX_CONF.read_text(encoding="utf-8")
