"""Memory writes over both transports (Python client): the pending flag, WaitMemoryWrites, waiting in the call
and at the end of a stream. A model double answers the turns and decides as the writer would (the writer design, as
every small hosted model gets it), so what each write kept is asserted exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from coreai.v1 import orchestrator_pb2 as pb
from pyruntime.app import RuntimeModel
from pyruntime.errors import InvalidArgumentError
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, RecordingModel
from pyruntime.turns.writer.decision import MemoryDesign
from pyruntime.turns.writer.prompt import WRITER_SYSTEM
from tests.rpc.conftest import TRANSPORTS
from tests.rpc.test_turn_rpcs import TurnRuntime, turn_runtime

SCOPE = AgentMemoryScope(user_id="player-7")
DECISIONS = {"My name is Tobin.": ("name", "Tobin"), "I owe you 25 gold.": ("debt", "25 gold"),
             "My horse is called Clover.": ("horse", "Clover"), "I love apples.": ("likes", "apples")}


def _npc_and_writer(request: ChatRequest) -> str:
    """The writer's decision for a decision request (JSON), else the NPC's reply."""
    if request.system_prompt != WRITER_SYSTEM:
        return "Aye."
    topic, value = DECISIONS.get(request.last_text, ("", ""))
    return json.dumps({"kind": "fact" if value else "nothing", "topic": topic, "value": value})


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TurnRuntime]:
    model = RuntimeModel(None, "npc-double", client=RecordingModel(_npc_and_writer))
    rt = turn_runtime(model, tmp_path_factory.mktemp("writes") / "data", memory_design=MemoryDesign.WRITER)
    yield rt
    rt.runtime.handle.stop(1.0)
    rt.runtime.services.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_pending_write_is_said_and_waited_for_by_trace_id(turns: TurnRuntime, transport: str) -> None:
    role = f"Smith{transport}"
    with turns.runtime.client(transport) as client:
        client.configure_role(RoleMemoryConfig(role, max_output_tokens=6, temperature=0.0))
        stated = client.run_task("My name is Tobin.", role_id=role, scope=SCOPE, trace_id=f"w-{transport}")
        waited = client.wait_memory_writes(role, scope=SCOPE, trace_id=stated.trace_id, timeout_ms=60_000)
        again = client.wait_memory_writes(role, scope=SCOPE, trace_id=stated.trace_id, timeout_ms=1)
        elsewhere = client.wait_memory_writes(role, trace_id=stated.trace_id, timeout_ms=1)  # another conversation
        asked = client.run_task("Where is the smithy?", role_id=role, scope=SCOPE)
        nothing_pending = client.wait_memory_writes(role, scope=SCOPE, timeout_ms=1)
    assert stated.status == pb.TURN_STATUS_OK and stated.memory_write_pending
    assert not stated.HasField("memory_write")
    assert not waited.pending and [w.trace_id for w in waited.writes] == [stated.trace_id]
    write = waited.writes[0]
    assert (write.summary, write.changed, [line.stored for line in write.lines], write.version) == (
        "stored: Player's name: Tobin", True, ["Player's name: Tobin"], 1)
    assert list(again.writes) == list(waited.writes)
    assert not elsewhere.writes and not elsewhere.pending
    assert not asked.memory_write_pending  # a question: decided at once, nothing to come
    assert not nothing_pending.writes and not nothing_pending.pending


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_waiting_in_the_call_and_at_the_end_of_the_stream(turns: TurnRuntime, transport: str) -> None:
    role = f"Keeper{transport}"
    with turns.runtime.client(transport) as client:
        client.configure_role(RoleMemoryConfig(role, max_output_tokens=6, temperature=0.0))
        waited = client.run_task("I owe you 25 gold.", role_id=role, scope=SCOPE, wait_memory_write=True)
        events = list(client.stream_task("My horse is called Clover.", role_id=role, scope=SCOPE,
                                         wait_memory_write=True, trace_id=f"s-{transport}"))
        plain = list(client.stream_task("I love apples.", role_id=role, scope=SCOPE))
        client.wait_memory_writes(role, scope=SCOPE, timeout_ms=60_000)
    assert not waited.memory_write_pending and waited.HasField("memory_write")
    assert (waited.memory_write.trace_id, waited.memory_write.summary) == (waited.trace_id,
                                                                            "stored: Player's debt: 25 gold")
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["cut_report", "text_delta", "final", "memory_write"]
    assert events[-2].final.memory_write_pending and events[-1].memory_write.trace_id == f"s-{transport}"
    assert events[-1].memory_write.summary == "stored: Player's horse: Clover"
    assert [e.WhichOneof("event") for e in plain] == ["cut_report", "text_delta", "final"]
    assert plain[-1].final.memory_write_pending


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("options", [{"timeout_ms": -1}, {"timeout_ms": 120_001}, {"trace_id": "x" * 257}])
def test_bad_waits_are_refused(turns: TurnRuntime, transport: str, options: dict) -> None:
    with turns.runtime.client(transport) as client, pytest.raises(InvalidArgumentError):
        client.wait_memory_writes("Smith", scope=SCOPE, **options)
