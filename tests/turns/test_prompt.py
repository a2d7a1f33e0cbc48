"""Pure request assembly: message order, tail blocks, `System context update:` folding, template detection."""

from __future__ import annotations

import json

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.planning.prompt import (
    DEFAULT_ROLE_PROMPTS,
    SYSTEM_CONTEXT_UPDATE_PREFIX,
    MemoryNote,
    TailBlocks,
    assemble_messages,
    build_system_prompt,
    role_system_prompt,
)
from pyruntime.turns.planning.templates import template_accepts_later_system
from tests.support.tiny_model import CHATML_TEMPLATE

FULL_TAIL = TailBlocks(
    request_system_instructions="be terse",
    memory="likes swords",
    memory_updates="Added: likes shields",
    tool_availability="Only memory.",
    world_state="It is night.",
    memory_notes=(MemoryNote(3, "Added: likes shields"),),
)


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


HISTORY = [
    HistoryMessage("user", "hi"),
    HistoryMessage("assistant", "hello"),
    HistoryMessage("tool", "Tool results:\nmemory (ok): DONE"),
]


def test_messages_follow_the_cache_stable_order() -> None:
    # What changes only at a compaction (snapshot, summary) before the history; the rest after it.
    messages = assemble_messages(
        system_prompt="SYS", summary="they met", history=HISTORY, tail=FULL_TAIL, user_payload="what now?"
    )
    assert [m["role"] for m in messages] == ["system", "system", "user", "assistant", "user", "system", "system",
                                             "user"]
    assert messages[0]["content"] == "SYS"
    head = messages[1]["content"]
    # The snapshot (rarely changed), then the summary (a fold only appends to it).
    assert _headings(head) == ["## Memory", "## Conversation Summary"]
    assert head.startswith("## Memory\nlikes swords\n\n## Conversation Summary\n")
    assert "context only, not instructions" in head and head.endswith("they met")
    assert messages[4]["content"] == "Tool results:\nmemory (ok): DONE"  # tool results replay as user messages
    assert messages[-1] == {"role": "user", "content": "what now?"}
    # The tail without the memory, then the memory delta as its own note (placed by `place_notes`): where both
    # follow the same message the tail goes first, so a new note after a moved tail costs the note alone.
    assert _headings(messages[5]["content"]) == [
        "## Request System Instructions",
        "## Tool Availability (current request)",
        "## World State",
    ]
    assert messages[6]["content"] == "## Memory (updates)\nAdded: likes shields"


def test_a_new_turn_extends_the_previous_request_up_to_the_tail() -> None:
    # The point of the layout: with an unchanged snapshot and summary, the next turn's request starts
    # with every message of the previous one except its tail and payload (those are all it evaluates).
    tail = TailBlocks(memory="likes swords", memory_updates="Added: hates rain", world_state="Rain.")
    before = assemble_messages(system_prompt="SYS", summary="s", history=HISTORY, tail=tail, user_payload="a")
    after = assemble_messages(system_prompt="SYS", summary="s", history=[*HISTORY, HistoryMessage("user", "a"),
                              HistoryMessage("assistant", "b")], tail=tail, user_payload="c")
    assert after[: len(before) - 2] == before[:-2]


def test_empty_blocks_are_left_out() -> None:
    messages = assemble_messages(system_prompt="SYS", tail=TailBlocks(memory="m", world_state="  "), user_payload="x")
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[1]["content"] == "## Memory\nm"
    bare = assemble_messages(system_prompt="SYS", summary=" ", tail=TailBlocks(), user_payload="x")
    assert bare == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "x"}]


def test_later_system_messages_fold_into_context_updates() -> None:
    messages = assemble_messages(
        system_prompt="SYS", summary="s", history=[HistoryMessage("user", "hi")], tail=FULL_TAIL,
        user_payload="go", system_messages_after_first=False,
    )
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[0] == {"role": "system", "content": "SYS"}
    updates = [m for m in messages if m["content"].startswith(SYSTEM_CONTEXT_UPDATE_PREFIX)]
    assert [m["role"] for m in updates] == ["user", "user", "user"]
    head = SYSTEM_CONTEXT_UPDATE_PREFIX + "\n## Memory\nlikes swords\n\n## Conversation Summary"
    assert updates[0]["content"].startswith(head)
    assert "## World State\nIt is night." in updates[1]["content"]
    assert updates[2]["content"] == SYSTEM_CONTEXT_UPDATE_PREFIX + "\n## Memory (updates)\nAdded: likes shields"


def test_system_prompt_is_role_prompt_plus_contract() -> None:
    assert role_system_prompt("Merchant") == DEFAULT_ROLE_PROMPTS["Merchant"]
    assert role_system_prompt("Merchant", "Custom.") == "Custom."
    assert "BlacksmithNPC" in role_system_prompt("BlacksmithNPC")
    assert build_system_prompt("Role.", "## Tools\n- x") == "Role.\n\n## Tools\n- x"
    assert build_system_prompt("Role.", "") == "Role."


def test_template_detection() -> None:
    assert template_accepts_later_system(CHATML_TEMPLATE)
    strict = (
        "{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
        "{{ raise_exception('System role only at the start') }}{% endif %}{{ m['content'] }}{% endfor %}"
    )
    assert not template_accepts_later_system(strict)
    dropping = (
        "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% endif %}"
        "{% for m in messages %}{% if m['role'] != 'system' %}{{ m['content'] }}{% endif %}{% endfor %}"
    )
    assert not template_accepts_later_system(dropping)
    assert not template_accepts_later_system("{% for m in messages %}{{ m.content ")  # broken template


def test_an_unchanged_tail_stays_where_it_was_first_sent() -> None:
    from pyruntime.turns.planning.prompt import TailAnchor, place_tail

    turn1 = [HistoryMessage("user", "hi", order=1), HistoryMessage("assistant", "hello", order=2)]
    at, anchor = place_tail(None, "## World State\nRain.", turn1, compacted=False)
    assert (at, anchor) == (2, TailAnchor("## World State\nRain.", 2))
    turn2 = [*turn1, HistoryMessage("user", "and?", order=3), HistoryMessage("assistant", "wet", order=4)]
    assert place_tail(anchor, "## World State\nRain.", turn2, compacted=False) == (2, anchor)
    # Changed, compacted, or its message folded away: right before the payload again, anchored anew.
    sun = "## World State\nSun."
    assert place_tail(anchor, sun, turn2, compacted=False) == (4, TailAnchor(sun, 4))
    assert place_tail(anchor, "## World State\nRain.", turn2, compacted=True)[0] == 4
    assert place_tail(anchor, "## World State\nRain.", turn2[2:], compacted=False) == (2, TailAnchor(anchor.text, 4))
    # Sent before any history: it stays first; an order-less history always puts it last.
    first = place_tail(None, "t", [], compacted=False)
    assert first == (0, TailAnchor("t", 0))
    assert place_tail(first[1], "t", turn1, compacted=False)[0] == 0
    unknown = [HistoryMessage("user", "hi"), HistoryMessage("assistant", "hello")]
    assert place_tail(TailAnchor("t", 5), "t", unknown, compacted=False)[0] == 2
    messages = assemble_messages(system_prompt="SYS", history=turn2, tail=TailBlocks(world_state="Rain."),
                                 user_payload="go", tail_after=2)
    assert [m["content"] for m in messages] == ["SYS", "hi", "hello", "## World State\nRain.", "and?", "wet", "go"]


def test_tail_anchors_survive_a_save_as_digests_and_a_bad_file_loads_none(tmp_path) -> None:
    from collections import OrderedDict

    from pyruntime.turns.planning.prompt import NoteAnchor, PromptAnchors, TailAnchor, place_tail, text_digest
    from pyruntime.turns.planning.tail_anchors import conversation_digest, load_anchors, save_anchors

    tail = "## World State\nRain."
    history = [HistoryMessage("user", "hi", order=1), HistoryMessage("assistant", "hello", order=2)]
    key = conversation_digest("Smith|player-1")
    notes = (NoteAnchor(1, 7), NoteAnchor(2, 9))
    anchors = OrderedDict([(key, PromptAnchors(TailAnchor(tail, 1), notes, head_version=5)),
                           (conversation_digest("x"), PromptAnchors(TailAnchor("other", 0)))])
    path = tmp_path / "anchors.json"
    save_anchors(path, anchors)
    assert "Rain" not in path.read_text() and "Smith" not in path.read_text()
    loaded = load_anchors(path, limit=10)
    assert list(loaded) == list(anchors)
    # Numbers only: the notes' and the folded block's texts are rebuilt from the memory versions.
    assert (loaded[key].notes, loaded[key].head_version) == (notes, 5)
    assert place_tail(loaded[key].tail, tail, history, compacted=False)[0] == 1  # where it was sent before the save
    assert place_tail(loaded[key].tail, "## World State\nSun.", history, compacted=False)[0] == 2  # a changed tail
    assert list(load_anchors(path, limit=1)) == [conversation_digest("x")]  # the most recent ones
    digest = text_digest(tail)
    path.write_text(json.dumps({"format": 1, "anchors": [["k", digest, 2]]}))  # a file from before the notes
    assert load_anchors(path, limit=10) == OrderedDict([("k", PromptAnchors(TailAnchor(digest, 2)))])
    for bad in (b"{not json", b'{"format": 1, "anchors": [["k", "Rain.", 1]]}', b'{"format": 9, "anchors": []}',
                b'{"format": 2, "anchors": [["k", "%s", 1, [[1, -2]], 0]]}' % digest.encode(),
                b'{"format": 2, "anchors": [["k", "%s", 1, [], "5"]]}' % digest.encode(),
                b'{"format": 2, "anchors": [["k", "%s", 1]]}' % digest.encode()):
        path.write_bytes(bad)
        assert load_anchors(path, limit=10) == OrderedDict()
    assert load_anchors(tmp_path / "missing.json", limit=10) == OrderedDict()


def test_a_memory_note_stays_where_it_was_first_sent_and_new_ones_come_last() -> None:
    from pyruntime.turns.planning.prompt import NoteAnchor, place_notes

    turn1 = [HistoryMessage("user", "hi", order=1), HistoryMessage("assistant", "hello", order=2)]
    turn2 = [*turn1, HistoryMessage("user", "and?", order=3), HistoryMessage("assistant", "wet", order=4)]
    first = MemoryNote(5, "Added: likes rain")
    places, anchors = place_notes((), (first,), turn1)
    assert (places, anchors) == ((2,), (NoteAnchor(2, 5),))
    second = MemoryNote(6, "Added: owns a boat")
    places, anchors = place_notes(anchors, (first, second), turn2)
    assert (places, anchors) == ((2, 4), (NoteAnchor(2, 5), NoteAnchor(4, 6)))
    tail = TailBlocks(world_state="Rain.", memory_notes=(first, second))
    messages = assemble_messages(system_prompt="SYS", history=turn2, tail=tail, user_payload="go",
                                 tail_after=0, notes_after=places)
    assert [m["content"] for m in messages] == [
        "SYS", "## World State\nRain.", "hi", "hello", "## Memory (updates)\nAdded: likes rain", "and?", "wet",
        "## Memory (updates)\nAdded: owns a boat", "go"]
    # The next turn appends only: the previous request minus its payload is this one's start.
    turn3 = [*turn2, HistoryMessage("user", "go", order=5), HistoryMessage("assistant", "ok", order=6)]
    again = assemble_messages(system_prompt="SYS", history=turn3, tail=tail, user_payload="next", tail_after=0,
                              notes_after=place_notes(anchors, (first, second), turn3)[0])
    assert again[: len(messages) - 1] == messages[:-1]
    # A note whose message is gone goes last, and every note after it too (the notes keep their order);
    # so does one whose version is not the anchor's (the notes were rebuilt after a consolidation).
    assert place_notes(anchors, (first, second), turn2[2:]) == ((2, 2), (NoteAnchor(4, 5), NoteAnchor(4, 6)))
    assert place_notes(anchors, (MemoryNote(8, "x"),), turn2)[0] == (4,)
    assert place_notes(anchors, (), turn2) == ((), ())


def test_a_compaction_folds_the_notes_into_the_head_after_the_summary() -> None:
    folded = MemoryNote(7, "Added: likes rain\nowns a boat")
    tail = TailBlocks(memory="likes swords", memory_folded=folded, world_state="Rain.")
    messages = assemble_messages(system_prompt="SYS", summary="they met", history=HISTORY, tail=tail,
                                 user_payload="go")
    head = messages[1]["content"]
    assert _headings(head) == ["## Memory", "## Conversation Summary", "## Memory (updates)"]
    assert head.endswith("they met\n\n## Memory (updates)\nAdded: likes rain\nowns a boat")
    # The next fold only appends to the summary: the snapshot and the old summary stay a prefix.
    later = assemble_messages(system_prompt="SYS", summary="they met\n- and talked", history=HISTORY, tail=tail,
                              user_payload="go")
    assert later[1]["content"].startswith(head.split("\n\n## Memory (updates)")[0])
