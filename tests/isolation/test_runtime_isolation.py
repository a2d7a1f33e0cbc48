"""Every request the runtime sends the model carries the canaries of exactly one conversation.

Two players, each talking to a smith and to two guard instances (actors) at once, over gRPC and Connect, with
memory writes (the model's memory tool, the memory writer pass, and ApplyMemoryTool), short history windows and
LLM folds between turns, prewarms, a ClearChatHistory, and a restart of the runtime in the middle. The model is
first an external `--llm-url` server that records each request (`runtime_check.RecordingModel`), then the hosted
llama-server on two slots (conversations parked and restored, the writer pass on the shared slot), recorded under
the runtime's own engine client with the slot provenance rule (`runtime_check.EngineRecorder`). A self-test mixes
two conversations' staged folds and checks that the rule names the request. Longer, on the embedded model:
`bench/bench_isolation.py --runtime` (docs/benchmarks.md#isolation).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from coreai.v1 import orchestrator_pb2
from pyruntime.app import Runtime as AppRuntime
from pyruntime.app import RuntimeSettings
from pyruntime.client import RuntimeClient
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns.between.prewarm import PREWARM_MAX_TOKENS
from pyruntime.turns.rounds.modes import ToolCallMode
from tests.isolation.runtime_check import Cast, EngineRecorder, RecordingModel
from tests.isolation.runtime_harness import TOKEN, DebugSlotsEngine, Served, serve
from tests.support.runtime import RuntimeThread

SEED = int(os.environ.get("COREAI_ISOLATION_SEED", "40"))
NPCS = (("Smith", (None,)), ("Guard", ("guard-1", "guard-2")))


def cast() -> Cast:
    return Cast.build(SEED, ("alice", "bob"), NPCS)


def roles(people: Cast) -> tuple[RoleMemoryConfig, ...]:
    """Each NPC's persona carries its canary; short windows and LLM folds, so histories are folded between turns."""
    return tuple(RoleMemoryConfig(role, system_prompt=people.npc_personas[role], max_chat_history_messages=4,
                                  use_llm_context_compaction=True, persist_chat_history=True) for role, _ in NPCS)


def play(clients: Callable[[str], RuntimeClient], people: Cast, rounds: range) -> None:
    """Every conversation at once (half over gRPC, half over Connect), one turn after the other in each."""
    def talk(index: int) -> None:
        conversation = people.conversations[index]
        where: dict[str, Any] = {"scope": conversation.scope, "actor": conversation.actor}
        with clients("grpc" if index % 2 else "connect") as client:
            for number in rounds:
                if number % 3 == 1:  # the game writes memory too
                    client.apply_memory_tool(conversation.npc, {"action": "append", "content":
                                                                f"Seen {conversation.canary} at {number}"}, **where)
                result = client.run_task(conversation.line(number), role_id=conversation.npc,
                                         wait_memory_write=True, **where)
                assert result.status == orchestrator_pb2.TURN_STATUS_OK, result.error

    with ThreadPoolExecutor(len(people.conversations)) as pool:
        list(pool.map(talk, range(len(people.conversations))))


class ExternalModel:
    """The recording model server, and runtimes that use it as `--llm-url`."""

    def __init__(self, people: Cast) -> None:
        self.model = RecordingModel(people)
        self.server = ScriptedModelServer(self.model)  # type: ignore[arg-type]  # answers as a Script does
        asyncio.run(self.server.start())

    def runtime(self, data_dir: Path, people: Cast) -> RuntimeThread:
        settings = RuntimeSettings(data_dir=data_dir, grpc_port=0, connect_port=0, token=TOKEN, grace=2.0,
                                   llm_url=self.server.base_url, prewarm=True, roles=roles(people),
                                   tool_mode=ToolCallMode.STRUCTURED)  # native tools are never prewarmed
        return RuntimeThread(AppRuntime(settings))

    def close(self) -> None:
        asyncio.run(self.server.stop())


def clients_of(handle: RuntimeThread) -> Callable[[str], RuntimeClient]:
    def client(transport: str) -> RuntimeClient:
        url = f"grpc://127.0.0.1:{handle.grpc_port}" if transport == "grpc" else handle.connect_url
        return RuntimeClient(url, token=TOKEN, timeout=120)

    return client


def run_external(data_dir: Path, people: Cast) -> RecordingModel:
    """Four rounds, a ClearChatHistory, a restart of the runtime, four more rounds, then one conversation alone (a
    dialogue: its next prompt is prewarmed between turns), against the recording server."""
    external = ExternalModel(people)
    try:
        handle = external.runtime(data_dir, people)
        try:
            play(clients_of(handle), people, range(4))
            first = people.conversations[0]
            with clients_of(handle)("grpc") as client:
                client.clear_chat_history(first.npc, scope=first.scope, actor=first.actor)
        finally:
            handle.stop()
        handle = external.runtime(data_dir, people)
        try:
            play(clients_of(handle), people, range(4, 8))
            play(clients_of(handle), Cast(people.conversations[-1:], people.npc_personas), range(8, 11))
        finally:
            handle.stop()
    finally:
        external.close()
    return external.model


def test_every_request_to_an_external_model_carries_one_conversations_canaries(tmp_path: Path) -> None:
    people = cast()
    model = run_external(tmp_path / "data", people)
    assert not model.findings(), "\n".join([f"seed {SEED}:", *model.findings()[:20]])
    # It exercised what it claims: folds (a summary in the prompt), the model's memory writes, prewarms.
    texts = [str(b.get("messages")) for b in model.bodies]
    assert sum("## Conversation Summary" in t for t in texts) >= len(people.conversations)
    assert sum("Fact: " in t for t in texts) >= len(people.conversations)
    assert sum(b.get("max_tokens") == PREWARM_MAX_TOKENS for b in model.bodies) >= 1


def test_the_check_names_a_request_that_carries_another_conversations_summary(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A per-scope cache mixed up: a conversation without a rolling summary is handed the one saved last.
    last: list[str] = []
    save, load = ScopedAgentMemoryStore.save_summary, ScopedAgentMemoryStore.load_summary

    def save_and_keep(self: ScopedAgentMemoryStore, role_id: str, summary: str, persist: bool = True) -> None:
        last[:] = [summary]
        save(self, role_id, summary, persist)

    def load_or_last(self: ScopedAgentMemoryStore, role_id: str, *, persisted_only: bool = False) -> str | None:
        return load(self, role_id, persisted_only=persisted_only) or (last[0] if last else None)

    monkeypatch.setattr(ScopedAgentMemoryStore, "save_summary", save_and_keep)
    monkeypatch.setattr(ScopedAgentMemoryStore, "load_summary", load_or_last)
    model = run_external(tmp_path / "data", cast())
    assert any("carries the canaries of 2 conversations" in f for f in model.findings()), model.findings()[:5]


class RecordingEngine(DebugSlotsEngine):
    """The hosted engine with a recorder under the runtime's own client of it."""

    people: Cast
    recorder: EngineRecorder | None = None

    def client_options(self) -> dict[str, Any]:
        options = super().client_options()
        self.recorder = EngineRecorder(self.people)
        self.recorder.restored(self.slots.holders())
        options["middlewares"] = (self.recorder,)
        return options


@pytest.fixture
def hosted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cast]:
    """The isolation harness serves a RecordingEngine, for the cast of this test."""
    people = cast()
    RecordingEngine.people = people
    monkeypatch.setattr("tests.isolation.runtime_harness.DebugSlotsEngine", RecordingEngine)
    yield people


def test_every_request_to_the_hosted_engine_carries_one_conversations_canaries_and_its_own_slot_state(
        tiny_model_path: Path, tmp_path: Path, hosted: Cast) -> None:
    recorders: list[EngineRecorder] = []
    for rounds in (range(3), range(3, 6)):  # a graceful restart in between: states saved, restored
        served: Served = serve(tiny_model_path, tmp_path / "data", roles=roles(hosted), slots=2, prompt_cache_mb=64)
        try:
            play(clients_of(served.handle), hosted, rounds)
        finally:
            served.stop()
        engine = served.engine
        assert isinstance(engine, RecordingEngine) and engine.recorder is not None
        recorders.append(engine.recorder)
    findings = [f for r in recorders for f in r.findings]
    assert not findings, "\n".join([f"seed {SEED}:", *findings[:20]])
    actions = {a: sum(r.slot_actions.get(a, 0) for r in recorders) for a in ("save", "restore")}
    assert actions["save"] >= 5 and actions["restore"] >= 3  # six conversations on two slots
    assert sum(len(r.bodies) for r in recorders) >= 6 * 6 * 2  # turns, writer passes, folds, prewarms
