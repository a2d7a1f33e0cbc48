"""The real SmolLM2-135M: it stores a stated fact, rarely writes memory on small talk, memory and history persist."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path
from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns import AiTaskRequest, TaskResult, ToolCallMode, build_orchestrator
from pyruntime.turns.planning.prompt import MEMORY_HEADING
from pyruntime.turns.writer.decision import MemoryDesign
from tests.support.fixtures import start_llama_server
from tests.turns.conftest import RecordingClient

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROLE = "SmartChat"
FACT_HINT = "Remember this: my sword is called Dawnbreaker."
FACT = "Dawnbreaker"
SMALL_TALK = ("Hi! How are you today?", "hello, how are you?", "What a nice day it is.", "Tell me a joke.",
              "Thanks, see you later!")
SMALL_TALK_MAX_WRITES = 2  # measured 1/5 with the guard; 3/5 on the same seeds without it (6/10 over 10)
TRIES = 5
NEEDED = 3
MAX_TOKENS = 160
TURN_TIMEOUT_S = 60.0  # generous: a shared 2-core CI machine can be slow; the assertions are about meaning, not speed
CHAT_TIMEOUT_S = 120


def file_stores(data_dir: Path) -> StoreBundle:
    """Fresh file stores on data_dir: what another process sees."""
    return open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)


def memory_on_disk(data_dir: Path, role: str = ROLE) -> str:
    loaded = file_stores(data_dir).scoped().try_load(role)
    return loaded.state.memory if loaded.state is not None else ""


def turn(server: LlamaServerProcess, data_dir: Path, hint: str, seed: int,
         client: RecordingClient | None = None) -> TaskResult:
    """One SmartChat turn as the chat runs it (structured mode, the chat's orchestrator)."""

    async def go() -> TaskResult:
        # The memory tool in the reply, chosen explicitly: for SmolLM2 the model profile picks the writer pass
        # (tests/slow/test_smollm2_writer.py); the tool stays the contract's interface and is tested here.
        orchestrator = build_orchestrator(server=server, stores=file_stores(data_dir), client=client,
                                          tool_mode=ToolCallMode.STRUCTURED, memory_design=MemoryDesign.TOOL)
        try:
            return await orchestrator.run_task(AiTaskRequest(
                hint=hint, role_id=ROLE, source_tag="Chat", max_output_tokens=MAX_TOKENS, timeout=TURN_TIMEOUT_S,
                extra={"seed": seed}))
        finally:
            await orchestrator.client.aclose()

    return asyncio.run(go())


def chat(*args: object, stdin: str) -> subprocess.CompletedProcess[str]:
    """`python -m pyruntime.cli chat ARGS` in its own process, `stdin` then EOF."""
    return subprocess.run([sys.executable, "-m", "pyruntime.cli", "chat", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=CHAT_TIMEOUT_S, cwd=ROOT, env=dict(os.environ))


def test_smollm2_stores_a_stated_fact_through_the_memory_tool(smollm2_server: LlamaServerProcess,
                                                               tmp_path: Path) -> None:
    outcomes = []
    for seed in range(TRIES):
        data_dir = tmp_path / f"try{seed}"
        result = turn(smollm2_server, data_dir, FACT_HINT, seed)
        stored_by_tool = any(c.name == "memory" and r.success and FACT in c.arguments_json
                             # a call cut off has no result
                             for c, r in zip(result.tool_calls, result.tool_results, strict=False))
        outcomes.append((stored_by_tool and FACT in memory_on_disk(data_dir), result.status.name,
                         result.usage.model_calls))
    stored = sum(ok for ok, _, _ in outcomes)
    print(f"SmolLM2 stored the fact in {stored}/{TRIES} tries: {outcomes}")  # the honest number, with -s
    assert stored >= NEEDED, f"stored in {stored}/{TRIES} tries: {outcomes}"


def test_smollm2_small_talk_rarely_writes_memory(smollm2_server: LlamaServerProcess, tmp_path: Path) -> None:
    # Before the format-example guard, about 6 in 10 small-talk turns stored the contract's example fact.
    written = []
    for seed, line in enumerate(SMALL_TALK):
        data_dir = tmp_path / f"talk{seed}"
        result = turn(smollm2_server, data_dir, line, 1000 + seed)
        memory = memory_on_disk(data_dir)
        if memory.strip():
            written.append((line, memory, result.status.name))
    print(f"SmolLM2 wrote memory on {len(written)}/{len(SMALL_TALK)} small-talk lines: {written}")
    assert len(written) <= SMALL_TALK_MAX_WRITES, written


def test_a_fact_stored_in_one_lifetime_is_in_the_memory_block_of_the_next(smollm2_server: LlamaServerProcess,
                                                                        tmp_path: Path) -> None:
    # Lifetime 1: its own model server and orchestrator; the model stores the fact. Each try starts from an
    # empty folder, as in the test above (which needs 3 of its 5 seeds): a failed try's history would change
    # the next try's prompt. Sampling differs between engines, so which seeds store it is not pinned.
    first = start_llama_server(embedded_model_path(), alias=EMBEDDED_MODEL_ALIAS)
    try:
        for seed in range(TRIES):
            data_dir = tmp_path / f"try{seed}"
            turn(first, data_dir, FACT_HINT, seed)
            if FACT in memory_on_disk(data_dir):
                break
    finally:
        first.stop()
    stored = memory_on_disk(data_dir)
    assert FACT in stored
    # Lifetime 2: another server, fresh stores on the same folder; the next turn's request carries the memory.
    client = RecordingClient(smollm2_server.base_url)
    result = turn(smollm2_server, data_dir, "What is my sword called?", 0, client)
    assert result.status.completed, result.error
    messages = client.bodies[0]["messages"]
    tail = [m["content"] for m in messages if MEMORY_HEADING + "\n" in m["content"]]
    assert len(tail) == 1 and f"{MEMORY_HEADING}\n{stored}" in tail[0]
    assert messages[0]["role"] == "system" and FACT not in messages[0]["content"]  # memory stays out of the prefix


def test_plainchat_history_survives_a_restart_and_creator_history_does_not(smollm2_server: LlamaServerProcess,
                                                                           tmp_path: Path) -> None:
    def say(role: str, text: str) -> subprocess.CompletedProcess[str]:
        run = chat("--llm-url", smollm2_server.base_url, "--data-dir", tmp_path, "--role", role,
                   "--max-tokens", 24, stdin=text + "\n/history\n")
        assert run.returncode == 0, run.stderr
        return run

    for role in ("PlainChat", "Creator"):
        first = say(role, f"Hello, this is my first message to {role}.")
        assert f"user: Hello, this is my first message to {role}." in first.stdout  # kept within the process
    plain = say("PlainChat", "Second message.")
    creator = say("Creator", "Second message.")
    assert "user: Hello, this is my first message to PlainChat." in plain.stdout  # persisted
    assert "Hello, this is my first message to Creator." not in creator.stdout  # session only
    assert [m.content for m in file_stores(tmp_path).scoped().get_chat_history("PlainChat") if m.role == "user"] == [
        "Hello, this is my first message to PlainChat.", "Second message."]
    assert file_stores(tmp_path).scoped().get_chat_history("Creator") == []
