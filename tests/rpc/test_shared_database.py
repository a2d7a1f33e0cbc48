"""Two runtimes on one PostgreSQL database, each with its own turn engine, caches and role table: a conversation that
moves from one to the other and back (its runtime was taken out of the balancer for a while, then returned) is
never answered from stale state, and a role configured on one holds on all. What each runtime's model was sent is
the evidence (the in-process model records it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from pyruntime.app import RuntimeModel
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing import ChatRequest, FunctionModel
from pyruntime.turns import ToolCallMode
from tests.rpc.conftest import Runtime, start_runtime

ROLE = "SmartChat"  # built in: chat history persisted
PLAYER = AgentMemoryScope("studio", "alex")


def _prompt(request: ChatRequest) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.messages)


@pytest.fixture
def two_runtimes(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Runtime, Runtime, FunctionModel, FunctionModel]]:
    models = (FunctionModel(lambda r: f"reply to: {r.messages[-1]['content']}"),
              FunctionModel(lambda r: f"reply to: {r.messages[-1]['content']}"))
    runtimes = [start_runtime(tmp_path / name, model=RuntimeModel(None, "double", client=model), store=postgres_url,
                              tool_mode=ToolCallMode.NATIVE) for name, model in zip("ab", models, strict=True)]
    yield runtimes[0], runtimes[1], models[0], models[1]
    for runtime in runtimes:
        runtime.handle.stop(1.0)


@pytest.mark.parametrize("transport", ["grpc", "connect"])
def test_a_conversation_back_on_its_first_runtime_sees_what_the_other_stored(two_runtimes, transport: str) -> None:
    a, b, model_a, model_b = two_runtimes
    with a.client(transport) as on_a, b.client(transport) as on_b:
        on_a.run_task("my name is Alex", role_id=ROLE, scope=PLAYER)
        on_b.apply_memory_tool(ROLE, {"action": "append", "content": "Alex likes dark ale"}, scope=PLAYER)
        on_b.run_task("I sailed from Tortuga", role_id=ROLE, scope=PLAYER)
        on_a.apply_memory_tool(ROLE, {"action": "append", "content": "Alex owes 3 gold"}, scope=PLAYER)
        on_a.run_task("what do you know of me?", role_id=ROLE, scope=PLAYER)
        on_b.run_task("and now?", role_id=ROLE, scope=PLAYER)
        history = [m.content for m in on_a.get_chat_history(ROLE, scope=PLAYER)]
    # B's first turn of the conversation: A's turn and B's memory write are in its prompt.
    first_on_b = _prompt(model_b.requests[0])
    assert "my name is Alex" in first_on_b and "reply to: my name is Alex" in first_on_b
    assert "Alex likes dark ale" in first_on_b
    # Back on A: B's turn and the memory as it is now, not as A last saw it.
    back_on_a = _prompt(model_a.requests[-1])
    for seen in ("my name is Alex", "I sailed from Tortuga", "reply to: I sailed from Tortuga",
                 "Alex likes dark ale", "Alex owes 3 gold"):
        assert seen in back_on_a, seen
    last_on_b = _prompt(model_b.requests[-1])
    assert "what do you know of me?" in last_on_b and "Alex owes 3 gold" in last_on_b
    assert history == ["my name is Alex", "reply to: my name is Alex", "I sailed from Tortuga",
                       "reply to: I sailed from Tortuga", "what do you know of me?",
                       "reply to: what do you know of me?", "and now?", "reply to: and now?"]


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll until check() (a liveness bound for a notification, never a speed claim)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.05)


def test_a_role_configured_on_one_runtime_holds_on_every_runtime_of_the_database(
        two_runtimes, tmp_path: Path, postgres_url: str) -> None:
    a, b, _, model_b = two_runtimes
    bram = AgentMemoryPolicy().configure_role("Bram", system_prompt="You are Bram the smith.",
                                              persist_chat_history=True, max_output_tokens=64)
    with a.client("grpc") as on_a, b.client("connect") as on_b:
        assert on_a.configure_role(bram) == bram
        _wait_for(lambda: on_b.get_role_config("Bram") == bram, "the role reaching the other runtime")
        on_b.run_task("hello", role_id="Bram", scope=PLAYER)
        assert "You are Bram the smith." in _prompt(model_b.requests[-1])
        # Persisted on B as the role says (the built-in default keeps the history in the process only).
        assert [m.content for m in on_a.get_chat_history("Bram", scope=PLAYER)] == ["hello", "reply to: hello"]
    later = start_runtime(tmp_path / "c", store=postgres_url)  # started afterwards: reads the table at start
    try:
        with later.client("grpc") as on_c:
            assert on_c.get_role_config("Bram") == bram
    finally:
        later.handle.stop(1.0)


def test_a_runtime_that_lost_its_listening_connection_catches_up(two_runtimes, postgres_url: str) -> None:
    a, b, _, _ = two_runtimes
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = 'coreai-runtime-listener'").fetchall()
    assert len(ended) == 2  # one per runtime
    quiet = AgentMemoryPolicy().configure_role("Quiet", max_output_tokens=8)
    with a.client("grpc") as on_a, b.client("grpc") as on_b:
        on_a.configure_role(quiet)  # notified while both listeners are gone: read again once they reconnect
        _wait_for(lambda: on_b.get_role_config("Quiet") == quiet, "the other runtime catching up")
        _wait_for(lambda: on_a.get_role_config("Quiet") == quiet, "the same runtime keeping its own role")


def test_an_unreadable_stored_role_is_skipped_and_the_others_apply(tmp_path: Path, postgres_url: str) -> None:
    from pyruntime.policy import config_to_proto
    from pyruntime.stores.postgres import PostgresDatabase

    PostgresDatabase(postgres_url).close()  # the schema
    good = AgentMemoryPolicy().configure_role("Good", max_output_tokens=8)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO coreai_roles (role_id, config) VALUES ('Bad', %s), ('Good', %s)",
                     (b"\xff\xff not a message", config_to_proto(good).SerializeToString()))
    runtime = start_runtime(tmp_path / "c", store=postgres_url)
    try:
        with runtime.client("grpc") as client:
            assert client.get_role_config("Good") == good
            assert client.get_role_config("Bad") == AgentMemoryPolicy().get("Bad")  # the defaults
    finally:
        runtime.handle.stop(1.0)
