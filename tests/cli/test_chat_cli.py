"""`coreai-runtime chat` as a real subprocess: lines on stdin, files on disk.

The commands, the turns and the writer's lines run against the scripted model served on loopback (`--llm-url`), so
what the chat prints and saves is exact; one chat hosts the tiny model itself, as a user's first chat does. Usage
errors, refused before anything starts, run in-process (the `cli` fixture).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyruntime.cli.chat_view import tool_marker
from pyruntime.memory import MemoryTool
from pyruntime.scopes import AgentMemoryScope
from pyruntime.testing.scripted import Script
from pyruntime.testing.scripted_server import ScriptedModelServer
from pyruntime.turns import ToolCallEvent, ToolResultEvent
from pyruntime.turns.writer.prompt import WRITER_SYSTEM
from tests.cli.conftest import file_bundle, memory_on_disk
from tests.support.cli import CliRun

ROOT = Path(__file__).resolve().parents[2]
CHAT_TIMEOUT_S = 90
U1 = AgentMemoryScope(user_id="u1")
SWORD_LINE = "Remember this: my sword is called Dawnbreaker."
REPLY = "A fine name for a blade."


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    """The scripted model on a free loopback port: one reply for every turn, the writer keeps the sword's name."""
    writer = WRITER_SYSTEM[:30]
    script = Script.from_dict({"rules": [
        {"when": {"system": writer, "hint": "Dawnbreaker"},
         "reply": json.dumps({"kind": "fact", "topic": "sword", "value": "Dawnbreaker"})},
        {"when": {"system": writer}, "reply": json.dumps({"kind": "nothing", "topic": "", "value": ""})},
    ], "default": {"reply": REPLY}})
    server = ScriptedModelServer(script)
    asyncio.run(server.start())  # it serves on a thread of its own
    yield server.base_url
    asyncio.run(server.stop())


def chat(*args: object, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m pyruntime.cli chat ARGS` with `stdin` as its input (EOF after it)."""
    return subprocess.run(
        [sys.executable, "-m", "pyruntime.cli", "chat", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=CHAT_TIMEOUT_S, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def scripted_chat(url: str, data_dir: Path, *lines: str, role: str = "SmartChat") -> subprocess.CompletedProcess[str]:
    """A chat with the scripted model, the writer pass as a small hosted model gets it, user u1."""
    return chat("--llm-url", url, "--memory-design", "writer", "--data-dir", data_dir, "--role", role, "--user", "u1",
                "--max-tokens", "24", "--timeout", "60", stdin="".join(f"{line}\n" for line in lines))


def test_chat_turns_commands_and_saves_on_disk(scripted_url: str, tmp_path: Path) -> None:
    data = tmp_path / "saves"  # does not exist yet: the chat creates it
    first = scripted_chat(scripted_url, data, SWORD_LINE, "/history")
    assert first.returncode == 0, first.stderr
    assert f"Saves: {data / 'CoreAI'}" in first.stdout
    # Memory is written by the writer pass, shown after each turn.
    assert "Chatting with SmartChat (memory on (writer pass after each reply), chat history saved" in first.stdout
    assert f"SmartChat> {REPLY}\n[stored: Player's sword: Dawnbreaker]\n" in first.stdout
    assert first.stdout.rstrip().endswith("Bye.")  # EOF quits cleanly
    assert "Traceback" not in first.stderr
    # SmartChat persists its history: a fresh set of stores (another process) reads the turn back.
    history = file_bundle(data).scoped(U1).get_chat_history("SmartChat")
    assert [(m.role, m.content) for m in history] == [("user", SWORD_LINE), ("assistant", REPLY)]
    assert f"user: {SWORD_LINE}\nassistant: {REPLY}\n" in first.stdout  # /history
    assert memory_on_disk(data, "SmartChat", U1) == "Player's sword: Dawnbreaker"

    # Memory written elsewhere (the saves CLI, the game) shows in /memory and /versions; /revert changes the file.
    tool = MemoryTool(file_bundle(data).memory, file_bundle(data).scoped(U1).key("SmartChat"))
    assert tool.execute({"action": "write", "content": "Sword: Dawnbreaker"}).success
    assert tool.execute({"action": "append", "content": "Horse: Shadowfax"}).success
    before = memory_on_disk(data, "SmartChat", U1)
    second = scripted_chat(scripted_url, data, "/memory", "/versions", "/history", "/revert 2", "/clear", "/history",
                           "/quit", "never sent")
    assert second.returncode == 0, second.stderr
    out = second.stdout
    assert f"Memory of SmartChat (version 3, {len(before)} chars):\n{before}\n" in out
    assert "v1  " in out and "write" in out and "v3  " in out and "chars 18->35 (+17)" in out
    assert f"user: {SWORD_LINE}" in out  # history from the first process
    assert "Reverted the memory to version 2 (now version 4)." in out
    assert memory_on_disk(data, "SmartChat", U1) == "Sword: Dawnbreaker"
    assert f"Cleared the chat history ({len(history)} message(s)) and the conversation summary" in out
    assert out.count("The chat history of SmartChat is empty.") == 1  # after /clear
    assert file_bundle(data).scoped(U1).get_chat_history("SmartChat") == []
    assert file_bundle(data).scoped(U1).get_transcript("SmartChat") == []
    assert memory_on_disk(data, "SmartChat", U1) == "Sword: Dawnbreaker"  # /clear keeps the memory
    assert "SmartChat> " not in out  # /quit stopped before the last line was sent


def test_chat_role_config_file_and_memory_design_flag(scripted_url: str, tmp_path: Path,
                                                     cli: Callable[..., CliRun]) -> None:
    config = tmp_path / "npc.json"
    config.write_text('{"roleId": "Bram", "useMemoryTool": true, "persistChatHistory": true, '
                      '"systemPrompt": "You are Bram, the blacksmith."}', encoding="utf-8")
    run = chat("--llm-url", scripted_url, "--data-dir", tmp_path, "--role", "Bram", "--role-config", config,
               "--memory-design", "tool", "--max-tokens", "8", stdin=f"{SWORD_LINE}\n")
    assert run.returncode == 0, run.stderr
    # The file's settings are the role's (history saved is not a default), and the explicit design wins.
    assert "Chatting with Bram (memory tool on (append), chat history saved" in run.stdout
    assert f"Bram> {REPLY}\n" in run.stdout and "[stored" not in run.stdout and "[nothing stored" not in run.stdout
    assert [(m.role, m.content) for m in file_bundle(tmp_path).scoped().get_chat_history("Bram")] == [
        ("user", SWORD_LINE), ("assistant", REPLY)]
    # A file for another role, or not a role config, is a usage error before anything starts (run in-process).
    other = cli("chat", "--llm-url", scripted_url, "--data-dir", tmp_path, "--role", "Mira", "--role-config", config)
    assert other.rc == 2 and "names another role" in other.err
    config.write_text('{"noSuchField": 1}', encoding="utf-8")
    bad = cli("chat", "--llm-url", scripted_url, "--data-dir", tmp_path, "--role", "Bram", "--role-config", config)
    assert bad.rc == 2 and "RoleMemoryConfig" in bad.err


def test_chat_command_errors_change_nothing(scripted_url: str, tmp_path: Path) -> None:
    run = scripted_chat(scripted_url, tmp_path, "/revert x", "/revert 7", "/nope", "/help")
    assert run.returncode == 0, run.stderr
    assert "Usage: /revert N" in run.stdout
    assert "Not reverted: cannot revert:" in run.stdout
    assert "Unknown command /nope; /help lists the commands." in run.stdout
    assert "/clear       clear the chat history and the conversation summary" in run.stdout
    assert not list((tmp_path / "CoreAI").rglob("*.json*"))  # no document, no history written


def test_chat_usage_errors_are_one_line(cli: Callable[..., CliRun], tmp_path: Path) -> None:
    # Refused before anything starts, so they run in-process (the `cli` fixture): the same exit code and stderr.
    missing = cli("chat", "--model", tmp_path / "missing.gguf", "--data-dir", tmp_path / "d")
    assert (missing.rc, missing.err.strip()) == (2, "error: --model must be an existing .gguf file")
    assert not (tmp_path / "d").exists()  # nothing created
    afile = tmp_path / "file"
    afile.write_text("x")
    assert cli("chat", "--data-dir", afile).err.strip() == "error: --data-dir exists but is not a directory"
    assert cli("chat", "--role", "  ", "--data-dir", tmp_path / "d").rc == 2
    bad_url = cli("chat", "--llm-url", "ftp://x", "--data-dir", tmp_path / "d")
    assert (bad_url.rc, bad_url.err.strip()) == (2, "error: --llm-url must be an http:// or https:// URL")
    bad_layers = cli("chat", "--n-gpu-layers", "-2", "--data-dir", tmp_path / "d")
    assert (bad_layers.rc, bad_layers.err.strip()) == (2, "error: --n-gpu-layers must be -1 (all), 0 (CPU) or more")
    assert not (tmp_path / "d").exists()


def test_a_chat_hosts_its_model_and_saves_where_the_user_keeps_data(tiny_model_path: Path, tmp_path: Path) -> None:
    # The chat a user starts first: it hosts the GGUF itself (a real llama-server), with the default data folder.
    run = chat("--model", tiny_model_path, "--max-tokens", "8", stdin="hello\n", env={"XDG_DATA_HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert f"Saves: {tmp_path / 'coreai-runtime' / 'CoreAI'}" in run.stdout
    assert (tmp_path / "coreai-runtime").is_dir()
    assert "Loading model tiny (" in run.stdout and "Model ready in" in run.stdout
    # The tiny model is a small hosted model: memory is written by the writer pass, shown after each turn (a greeting
    # states nothing, so no model call decides it; what a decision shows is asserted with the scripted model above).
    assert "Chatting with SmartChat (memory on (writer pass after each reply)" in run.stdout
    assert "SmartChat> " in run.stdout and "\n[nothing stored (no statement about the player)]\nBye.\n" in run.stdout
    assert "Traceback" not in run.stderr


def test_unreachable_llm_url_fails_the_turn_in_one_line(tmp_path: Path) -> None:
    run = chat("--llm-url", "http://127.0.0.1:9/v1", "--data-dir", tmp_path, stdin="hello\n")
    assert run.returncode == 0
    lines = [line for line in run.stdout.splitlines() if line.startswith("[turn failed")]
    assert lines == ["[turn failed: cannot connect to the model server at http://127.0.0.1:9/v1]"]
    assert "Traceback" not in run.stderr


def test_tool_marker() -> None:
    call = ToolCallEvent("c1", "memory", '{"action": " Append ", "content": "x"}')
    assert tool_marker(call, ToolResultEvent("c1", "memory", True, "{}")) == "[memory append ✓]"
    failed = ToolResultEvent("c1", "memory", False, '{"Success": false, "Error": "content is required"}')
    assert tool_marker(call, failed) == "[memory append ✗ content is required]"
    other = ToolResultEvent("c2", "roll", False, "invalid arguments for tool 'roll': " + "x" * 200)
    marker = tool_marker(None, other)
    assert marker.startswith("[roll ✗ invalid arguments") and marker.endswith("…]") and len(marker) < 100
