"""A CoreAI save in either of its in-document history formats moves into the history file losing nothing.

`golden/coreai/` holds one save per format, written in the shapes CoreAI's serializers give them:
`v0_*.json` is the first `FileAgentMemoryStore` (`lastSystemPrompt`, `memory`, and `chatHistoryJson` as
JsonUtility's `{"Items":[{"Role","Content","Timestamp"}]}` with millisecond times); `v1_*.json` adds the
transcript (`transcriptEntriesJson`, Newtonsoft's indented `[{"Kind","Key","Content","CallId","Timestamp"}]`
with Windows line endings, `Key` naming the speaker or the tool) and the versions. Its transcript cap had
already dropped the first chat message's transcript entry, as CoreAI's separate caps did. `*.history.jsonl`
and `*.migrated.json` are what the migration must write, byte for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pyruntime.stores.base import TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore

GOLDEN = Path(__file__).parent / "golden" / "coreai"
ROLE = "BlacksmithNPC"
FORMATS = ["v0", "v1"]

CHAT = [
    ("user", "Hi! Can you forge me a sword?", 1_700_000_000),
    ("assistant", "Of course \u2014 45 gold.", 1_700_000_004),
    ("user", 'Deal. Remember I prefer "curved" blades.\nAnd no runes.', 1_700_000_010),
    ("assistant", "Noted: curved, no runes \u2713\tSee you at dawn.", 1_700_000_015),
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "CoreAI"


def install(root: Path, version: str) -> Path:
    folder = root / "AgentMemory"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOLDEN / f"{version}_{ROLE}.json", folder / f"{ROLE}.json")
    return folder


def data_files(root: Path) -> dict[str, bytes]:
    """Every save file with its bytes (the lock folder is not a save)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.relative_to(root).parts}


def touch_everything(store: FileAgentMemoryStore) -> None:
    """What a game's first turn does with a save: reads memory, history and transcript."""
    store.try_load(ROLE)
    store.get_chat_history(ROLE)
    store.get_transcript(ROLE)
    store.history_status(ROLE)


@pytest.mark.parametrize("version", FORMATS)
def test_each_format_migrates_every_row_speaker_and_tool_name_in_order(root, version):
    folder = install(root, version)
    store = FileAgentMemoryStore(root)
    assert [(m.role, m.content, m.timestamp) for m in store.get_chat_history(ROLE)] == CHAT
    assert (folder / f"{ROLE}.history.jsonl").read_bytes() == (GOLDEN / f"{version}_{ROLE}.history.jsonl").read_bytes()
    assert (folder / f"{ROLE}.json").read_bytes() == (GOLDEN / f"{version}_{ROLE}.migrated.json").read_bytes()
    assert store.stats.legacy_migrations == 1


def test_the_transcript_keeps_each_tool_name_call_id_and_place(root):
    install(root, "v1")
    rows = FileAgentMemoryStore(root).get_transcript(ROLE)
    assert [(r.kind, r.name, r.call_id, r.is_chat_message) for r in rows] == [
        (TranscriptKind.USER, "user", None, True),  # its transcript entry was capped away: from the chat list
        (TranscriptKind.ASSISTANT, "assistant", None, True),
        (TranscriptKind.USER, "user", None, True),
        (TranscriptKind.TOOL_CALL, "memory", "call_7", False),
        (TranscriptKind.TOOL_RESULT, "memory", "call_7", False),
        (TranscriptKind.TOOL_CALL, "craft_item", "call_8", False),
        (TranscriptKind.TOOL_RESULT, "craft_item", "call_8", False),
        (TranscriptKind.ASSISTANT, "assistant", None, True),
    ]
    state = FileAgentMemoryStore(root).try_load(ROLE).state
    assert state is not None and state.memory == "prefers curved blades, no runes"
    assert [(v.version, v.action, v.timestamp) for v in state.versions] == [(1, "append", 1_700_000_012)]


@pytest.mark.parametrize("version", FORMATS)
def test_migrating_twice_changes_nothing(root, version):
    install(root, version)
    touch_everything(FileAgentMemoryStore(root))
    migrated = data_files(root)
    again = FileAgentMemoryStore(root)
    touch_everything(again)
    assert data_files(root) == migrated and again.stats.legacy_migrations == 0

    # A crash between the migration's two writes: the history file is written, `<stem>.json` still legacy.
    install(root, version)
    touch_everything(FileAgentMemoryStore(root))
    assert data_files(root) == migrated


@pytest.mark.parametrize("version", FORMATS)
def test_a_crash_after_a_capped_migration_adds_no_row_twice(root, version):
    """With a transcript cap smaller than the save's, the first migration keeps only the windows' rows; a second
    run after a crash between its two writes recognises them and adds nothing."""
    install(root, version)
    touch_everything(FileAgentMemoryStore(root, chat_cap=10, transcript_cap=3))
    history = (root / "AgentMemory" / f"{ROLE}.history.jsonl").read_bytes()
    install(root, version)
    again = FileAgentMemoryStore(root, chat_cap=10, transcript_cap=3)
    touch_everything(again)
    assert (root / "AgentMemory" / f"{ROLE}.history.jsonl").read_bytes() == history
    assert [(m.role, m.content, m.timestamp) for m in again.get_chat_history(ROLE)] == CHAT


def test_the_cli_shows_a_migrated_save_with_its_speakers_and_tools(root, tmp_path, capsys):
    from pyruntime.cli import main

    install(root, "v1")
    assert main(["history", "show", "--data-dir", str(tmp_path), "--role", ROLE, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(row["name"], row.get("callId", "")) for row in shown["history"]] == [
        ("user", ""), ("assistant", ""), ("user", ""), ("memory", "call_7"), ("memory", "call_7"),
        ("craft_item", "call_8"), ("craft_item", "call_8"), ("assistant", "")]
