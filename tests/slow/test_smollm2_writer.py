"""The real SmolLM2-135M with the memory writer pass (its default design): facts kept, small talk not, corrections."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyruntime.model.hosting.process import LlamaServerProcess
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, ToolCallMode, build_orchestrator
from pyruntime.turns.writer.decision import MemoryDesign
from pyruntime.turns.writer.passes import MemoryPassOutcome

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROLE = "SmartChat"
MAX_TOKENS = 24
TURN_TIMEOUT_S = 60.0
# Lines that are not in the eval's data file.
FACTS = (("My name is Alaric.", "Alaric"), ("I owe the guild 30 silver.", "30 silver"),
         ("I want to buy an iron shield.", "iron shield"), ("My cat is called Pebble.", "Pebble"),
         ("I love roasted chestnuts.", "chestnut"))
FACTS_NEEDED = 4
SMALL_TALK = ("Good morning!", "What a lovely day.", "Thanks, see you later!", "I'll be careful out there.",
              "How are you today?")
SMALL_TALK_MAX_WRITES = 1


def converse(server: LlamaServerProcess, data_dir: Path, *lines: str) -> list[MemoryPassOutcome]:
    """Turns as the chat runs them (the factory's profile for the hosted model); the passes' outcomes."""

    async def go() -> list[MemoryPassOutcome]:
        stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir)
        orchestrator = build_orchestrator(server=server, stores=stores, tool_mode=ToolCallMode.STRUCTURED)
        assert orchestrator.settings.memory_design is MemoryDesign.WRITER  # SmolLM2 is a small hosted model
        outcomes = []
        try:
            for line in lines:
                await orchestrator.run_task(AiTaskRequest(hint=line, role_id=ROLE, source_tag="Chat",
                                                          max_output_tokens=MAX_TOKENS, timeout=TURN_TIMEOUT_S))
                outcomes += await orchestrator.memory_passes.drain()
        finally:
            await orchestrator.client.aclose()
        return outcomes

    return asyncio.run(go())


def memory_on_disk(data_dir: Path) -> str:
    loaded = open_stores(AgentMemoryPersistenceMode.PERSISTENT, data_dir).scoped().try_load(ROLE)
    return loaded.state.memory if loaded.state is not None else ""


def test_smollm2_keeps_stated_facts(smollm2_server: LlamaServerProcess, tmp_path: Path) -> None:
    stored = []
    for index, (line, key) in enumerate(FACTS):
        converse(smollm2_server, tmp_path / f"fact{index}", line)
        memory = memory_on_disk(tmp_path / f"fact{index}")
        stored.append((key.lower() in memory.lower(), memory))
    print(f"SmolLM2 + writer kept {sum(ok for ok, _ in stored)}/{len(FACTS)} facts: {stored}")
    assert sum(ok for ok, _ in stored) >= FACTS_NEEDED, stored
    for _, memory in stored:
        assert all(line.startswith("Player's ") for line in memory.splitlines()), memory


def test_smollm2_small_talk_rarely_writes_memory(smollm2_server: LlamaServerProcess, tmp_path: Path) -> None:
    outcomes = converse(smollm2_server, tmp_path, *SMALL_TALK)
    written = [o for o in outcomes if o.stored]
    print(f"SmolLM2 + writer wrote on {len(written)}/{len(SMALL_TALK)} small-talk lines: {outcomes}")
    assert len(written) <= SMALL_TALK_MAX_WRITES, outcomes
    # Lines without a statement about the player never reach the model.
    assert sum(o.model_calls for o in outcomes) < len(SMALL_TALK)


def test_smollm2_correction_replaces_the_old_fact(smollm2_server: LlamaServerProcess, tmp_path: Path) -> None:
    outcomes = converse(smollm2_server, tmp_path, "My name is Alaric.", "Sorry, I misspoke: my name is Aldous.")
    memory = memory_on_disk(tmp_path)
    print(f"after the correction: {memory!r} ({outcomes})")
    assert "Aldous" in memory and "Alaric" not in memory, outcomes


def test_smollm2_keeps_one_name_among_small_talk_and_other_names(smollm2_server: LlamaServerProcess,
                                                                 tmp_path: Path) -> None:
    # Seen with SmolLM2: `Player's name: I'll look around a bit` and `Player's name: Saltmere` beside the real name.
    # Lines that are not in the eval's data file.
    outcomes = converse(smollm2_server, tmp_path, "My name is Berengar.", "I'll look around a bit.",
                        "I need some rest.", "My mule is called Turnip.", "I need a ride to Westmarch.")
    memory = memory_on_disk(tmp_path)
    print(f"memory: {memory!r} ({outcomes})")
    names = [line for line in memory.splitlines() if line.startswith("Player's name:")]
    assert names == ["Player's name: Berengar"], memory
    assert "look around" not in memory and "rest" not in memory
    assert len({line.split(":", 1)[0] for line in memory.splitlines()}) == len(memory.splitlines())  # topics once


def test_chat_with_the_embedded_model_shows_what_it_stored(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pyruntime.cli", "chat", "--data-dir", str(tmp_path), "--max-tokens", str(MAX_TOKENS)],
        input="My name is Alaric.\nWhat a lovely day.\n/memory\n", capture_output=True, text=True, timeout=300,
        cwd=ROOT, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    assert "memory on (writer pass after each reply)" in run.stdout
    assert "[stored: Player's name: Alaric]" in run.stdout
    assert "[nothing stored (no statement about the player)]" in run.stdout
    assert "Player's name: Alaric" in memory_on_disk(tmp_path)
