"""The byte-exact file layout of contract §3.1: stems, `<stem>.json`, history rows, summaries, legacy rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyruntime.errors import InvalidArgumentError, UnsafeKeyError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.file_layout import (
    DocumentError,
    decode_history_row,
    decode_memory_document,
    decode_summary,
    encode_history_rows,
    encode_memory_document,
    encode_summary,
    file_stem,
    fnv1a32_utf16,
    parse_history,
    retained_mask,
    stale_row_count,
)
from pyruntime.stores.legacy_layout import legacy_conversation_rows

GOLDEN = Path(__file__).parent / "golden"


def reference_fnv(key: str) -> int:
    """An independent FNV-1a-32 over UTF-16 code units, written from the definition."""
    units = []
    for ch in key:
        cp = ord(ch)
        if cp > 0xFFFF:  # a surrogate pair, as C# strings store it
            units += [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        else:
            units.append(cp)
    h = 0x811C9DC5
    for unit in units:
        h = ((h ^ unit) * 0x01000193) % (1 << 32)
    return h


GOLDEN_STATE = AgentMemoryState(
    memory='likes swords ⚔\nsays "hi"',
    last_system_prompt="You are a teacher.",
    system_prompt_memory_snapshot="likes swords ⚔",
    system_prompt_memory_version=1,
    max_memory_versions=30,
    versions=(
        MemoryVersion(1, 1_700_000_000, "write", "likes swords ⚔", "chars 0->14 (+14)"),
        MemoryVersion(2, 1_700_000_100, "append", 'likes swords ⚔\nsays "hi"', "chars 14->24 (+10)"),
    ),
)

GOLDEN_ROWS = [
    TranscriptEntry(TranscriptKind.USER, "user", "Hallo, Lehrerin ✏", None, 1_700_000_000, 1, True),
    TranscriptEntry(
        TranscriptKind.TOOL_CALL, "memory", '{"action":"append","content":"likes swords"}', "call_1", 1_700_000_001, 2
    ),
    TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", "DONE: appended", "call_1", 1_700_000_002, 3),
    TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "Gut!\n\tWie geht's?", None, 1_700_000_003, 4, True),
]


# -- stems -----------------------------------------------------------------


def test_published_fnv1a32_vectors_hold_for_ascii_code_units():
    # For ASCII, a UTF-16 code unit equals the byte, so the published FNV-1a-32 vectors apply.
    assert fnv1a32_utf16("") == 0x811C9DC5
    assert fnv1a32_utf16("a") == 0xE40C292C
    assert fnv1a32_utf16("foobar") == 0xBF9CF968


def test_fnv_hashes_code_units_not_utf8_bytes():
    # "é" is one code unit 0x00E9: one FNV step on 0xE9 (two steps if it hashed UTF-8 bytes C3 A9).
    assert fnv1a32_utf16("é") == ((0x811C9DC5 ^ 0xE9) * 16777619) % (1 << 32)
    # An astral character is two code units (a surrogate pair), each XORed as a 16-bit value.
    emoji = "\U0001f600"
    assert fnv1a32_utf16(emoji) == reference_fnv(emoji) == reference_fnv("\ud83d\ude00")


@pytest.mark.parametrize("key", ["A/B", "npc:guard", 'a<b>c:d"e/f\\g|h?i*j\x01k', "Lehrer/ü/\U0001f600", "tab\there"])
def test_keys_with_invalid_characters_get_underscores_and_the_hash(key):
    replaced = "".join("_" if ch in '<>:"/\\|?*' or ord(ch) < 32 else ch for ch in key)
    assert file_stem(key) == f"{replaced}_{reference_fnv(key):08x}"


def test_hand_checked_stems():
    assert file_stem("Teacher") == "Teacher"
    assert file_stem("scope-v1-" + "ab" * 32) == "scope-v1-" + "ab" * 32
    # FNV-1a-32 of "A/B" step by step: 0x811c9dc5 ^ 0x41 = 0x811c9d84, * 16777619 mod 2^32 = 0xc40bf6cc;
    # ^ 0x2f = 0xc40bf6e3, * p = 0x59a8e5b2 ... ; the result is pinned here and matches reference_fnv.
    assert reference_fnv("A/B") == 0x7E560F81
    assert file_stem("A/B") == "A_B_7e560f81"
    assert file_stem("a") == "a"
    assert file_stem("a:") == f"a__{reference_fnv('a:'):08x}"


def test_fnv_intermediate_steps_of_a_slash_b():
    h = (0x811C9DC5 ^ 0x41) * 16777619 % 2**32
    assert h == 0xC40BF6CC
    h = (h ^ 0x2F) * 16777619 % 2**32
    h = (h ^ 0x42) * 16777619 % 2**32
    assert h == 0x7E560F81


@pytest.mark.parametrize("key", ["", "   ", "\t\n"])
def test_blank_keys_are_refused(key):
    with pytest.raises(InvalidArgumentError):
        file_stem(key)


@pytest.mark.parametrize("key", [".", "..", "..."])
def test_keys_resolving_outside_the_root_are_refused(key):
    with pytest.raises(UnsafeKeyError):
        file_stem(key)


def test_path_separators_never_survive_in_a_stem():
    for key in ["../x", "..\\x", "/etc/passwd", "C:\\x"]:
        stem = file_stem(key)
        assert "/" not in stem and "\\" not in stem and ":" not in stem


def test_overlong_keys_are_refused_with_a_clear_error():
    with pytest.raises(InvalidArgumentError, match="too long"):
        file_stem("x" * 300)


# -- <stem>.json -----------------------------------------------------------


def test_memory_document_bytes_match_the_golden_file():
    assert encode_memory_document(GOLDEN_STATE) == (GOLDEN / "Teacher.json").read_bytes()


def test_golden_memory_document_decodes_to_the_state():
    document = decode_memory_document((GOLDEN / "Teacher.json").read_bytes())
    assert document.state == GOLDEN_STATE
    assert not document.has_legacy_conversation


def test_empty_state_has_fields_in_order_and_empty_versions_string():
    assert encode_memory_document(AgentMemoryState()) == (
        b'{"lastSystemPrompt":"","memory":"","chatHistoryJson":"","transcriptEntriesJson":"",'
        b'"versionsJson":"","systemPromptMemorySnapshot":"","systemPromptMemoryVersion":0,"maxMemoryVersions":30}'
    )


def test_versions_json_is_a_string_holding_a_compact_array():
    obj = json.loads((GOLDEN / "Teacher.json").read_bytes())
    assert isinstance(obj["versionsJson"], str)
    assert json.loads(obj["versionsJson"])[0] == {
        "Version": 1,
        "Timestamp": 1_700_000_000,
        "Action": "write",
        "ContentAfter": "likes swords ⚔",
        "Note": "chars 0->14 (+14)",
    }


def test_lone_surrogates_are_escaped_and_round_trip():
    state = AgentMemoryState(memory="broken \ud800 pair")
    data = encode_memory_document(state)
    data.decode("utf-8")  # strictly valid UTF-8
    assert b"\\ud800" in data
    assert decode_memory_document(data).state == state


def test_documents_are_read_tolerantly_where_safe():
    document = decode_memory_document('\ufeff{"memory":"m","versionsJson":null,"extra":1}'.encode())
    assert document.state == AgentMemoryState(memory="m")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe not utf8",
        b'{"memory":"secret',
        b'["memory"]',
        b'{"memory":42}',
        b'{"memory":"m","versionsJson":"[{broken"}',
        b'{"memory":"m","versionsJson":"{\\"a\\":1}"}',
        b'{"memory":"m","maxMemoryVersions":"thirty"}',
    ],
)
def test_unreadable_documents_raise_without_content(data):
    with pytest.raises(DocumentError) as info:
        decode_memory_document(data)
    assert "secret" not in str(info.value)


# -- history rows ----------------------------------------------------------


def test_history_rows_match_the_golden_file():
    assert encode_history_rows(GOLDEN_ROWS) == (GOLDEN / "Teacher.history.jsonl").read_bytes()


def test_golden_history_parses_back():
    parsed = parse_history((GOLDEN / "Teacher.history.jsonl").read_bytes())
    assert parsed.rows == GOLDEN_ROWS
    assert parsed.skipped == 0 and not parsed.torn_tail


def test_rows_omit_empty_optional_fields():
    line = encode_history_rows([TranscriptEntry(TranscriptKind.USER, "npc", "x", call_id="", timestamp=5)])
    assert line == b'{"k":0,"r":"npc","c":"x","t":5}\n'


def test_legacy_rows_without_order_and_ms_timestamps_are_read():
    row = decode_history_row(b'{"k":1,"r":"assistant","c":"hi","t":1700000005000,"m":true}')
    assert row == TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "hi", None, 1_700_000_005, 0, True)


def test_torn_and_corrupt_lines_are_skipped_and_counted():
    good = encode_history_rows(GOLDEN_ROWS[:2])
    data = (good + b'{"k":9,"r":"x","c":"y","t":1}\n' + b"garbage\n" + encode_history_rows(GOLDEN_ROWS[2:3])
            + b'{"k":0,"r":"us')
    parsed = parse_history(data)
    assert parsed.rows == GOLDEN_ROWS[:3]
    assert parsed.skipped == 3
    assert parsed.torn_tail


# -- summaries -------------------------------------------------------------


def test_summary_bytes_match_the_golden_file():
    text = "Previous conversation summary:\n- user: hi ✓"
    assert encode_summary(text) == (GOLDEN / "summary.json").read_bytes()
    assert decode_summary((GOLDEN / "summary.json").read_bytes()) == text


def test_unreadable_summary_raises():
    with pytest.raises(DocumentError):
        decode_summary(b'{"Summary":3}')


# -- legacy conversation ---------------------------------------------------


def test_legacy_golden_file_yields_every_message_and_entry_once_in_seconds():
    document = decode_memory_document((GOLDEN / "legacy_Teacher.json").read_bytes())
    assert document.has_legacy_conversation
    assert document.state.memory == "likes swords"
    rows = legacy_conversation_rows(document)
    assert rows == [
        TranscriptEntry(TranscriptKind.USER, "user", "hello", None, 1_700_000_000, 0, True),
        TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", "{}", "c1", 1_700_000_001, 0, False),
        TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", "DONE", "c1", 1_700_000_002, 0, False),
        TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "hi there", None, 1_700_000_005, 0, True),
        TranscriptEntry(TranscriptKind.USER, "user", "bye", None, 1_700_000_009, 0, True),
    ]


def test_legacy_wrapper_objects_named_kinds_and_iso_timestamps_are_understood():
    chat = json.dumps({"Messages": [{"Role": "system", "Content": "be nice", "Timestamp": "2023-11-14T22:13:20Z"}]})
    transcript = json.dumps(
        {"items": [{"kind": "ToolCall", "toolName": "memory", "content": "{}", "timestamp": "1700000000"}]})
    document = decode_memory_document(
        json.dumps({"chatHistoryJson": chat, "transcriptEntriesJson": transcript}).encode())
    assert legacy_conversation_rows(document) == [
        TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", "{}", None, 1_700_000_000, 0, False),
        TranscriptEntry(TranscriptKind.USER, "system", "be nice", None, 1_700_000_000, 0, True),
    ]


def test_unreadable_legacy_field_raises():
    document = decode_memory_document(b'{"chatHistoryJson":"not json"}')
    with pytest.raises(DocumentError):
        legacy_conversation_rows(document)


# -- retention -------------------------------------------------------------


def test_a_row_is_retained_while_in_either_window():
    # rows: chat, 5 tool rows, chat, chat ; chat cap 2, transcript cap 3
    flags = [True, False, False, False, False, False, True, True]
    assert retained_mask(flags, chat_cap=2, transcript_cap=3) == [False] * 5 + [True] * 3
    # with chat cap 3 the oldest chat row is still in the chat window
    assert retained_mask(flags, chat_cap=3, transcript_cap=3) == [True] + [False] * 4 + [True] * 3
    assert stale_row_count(flags, chat_cap=3, transcript_cap=3) == 4
