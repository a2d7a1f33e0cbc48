"""The memory-last request layout (pure): the whole memory as one block after the history."""

from __future__ import annotations

from dataclasses import replace

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.planning.memory_last import (
    LAST_MEMORY_HEADING,
    MAX_MEMORY_ADDITIONS,
    anchors_of_the_block_that_moves,
    assemble_memory_last,
    place_memory_with_tail,
)
from pyruntime.turns.planning.prompt import (
    MemoryNote,
    Placement,
    PromptAnchors,
    TailAnchor,
    TailBlocks,
    assemble_messages,
    text_digest,
)

HISTORY = [HistoryMessage("user", "hi"), HistoryMessage("assistant", "hello")]
TAIL = TailBlocks(request_system_instructions="be terse", memory="Player's name: Tobin", world_state="It is night.",
                  memory_updates="Added: x", memory_folded=MemoryNote(2, "Added: y"),
                  memory_notes=(MemoryNote(3, "z"),))


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_the_memory_goes_right_after_the_tail_where_that_was_first_sent() -> None:
    # With the tail, `memory_notes` are the lines appended since (`place_memory_with_tail`): none here.
    tail = replace(TAIL, memory_notes=())
    messages = assemble_memory_last(system_prompt="SYS", summary="they met", history=HISTORY, tail=tail,
                                    user_payload="What is my name?", tail_after=1, memory_with_tail=True)
    assert [m["role"] for m in messages] == ["system", "system", "user", "system", "system", "assistant", "user"]
    assert _headings(messages[1]["content"]) == ["## Conversation Summary"]
    assert _headings(messages[3]["content"]) == ["## Request System Instructions", "## World State"]
    assert messages[4]["content"] == "## Notes about the player\nPlayer's name: Tobin"
    assert messages[5] == {"role": "assistant", "content": "hello"}  # the exchanges since then follow it
    assert sum("Player's name" in m["content"] for m in messages) == 1 and "updates" not in str(messages)
    # Without a place (the first turn, an edit, a fold: `place_tail` says None or the end) it is last.
    last = assemble_memory_last(system_prompt="SYS", history=HISTORY, tail=tail, user_payload="x", tail_after=2,
                                memory_with_tail=True)
    assert last == assemble_memory_last(system_prompt="SYS", history=HISTORY, tail=TAIL, user_payload="x")
    assert last[-2]["content"].startswith("## Notes about the player")


def test_every_turn_the_memory_is_the_last_context_message_and_nowhere_else() -> None:
    messages = assemble_memory_last(system_prompt="SYS", summary="they met", history=HISTORY, tail=TAIL,
                                    user_payload="What is my name?", tail_after=1)
    assert [m["role"] for m in messages] == ["system", "system", "user", "system", "assistant", "system", "user"]
    assert _headings(messages[1]["content"]) == ["## Conversation Summary"]  # the head keeps the summary only
    # The tail stays where it was first sent (here after the first message), without the memory.
    assert _headings(messages[3]["content"]) == ["## Request System Instructions", "## World State"]
    assert messages[-2]["content"] == "## Notes about the player\nPlayer's name: Tobin"
    assert messages[-1] == {"role": "user", "content": "What is my name?"}
    assert sum("Player's name" in m["content"] for m in messages) == 1 and "updates" not in str(messages)


def test_everything_but_the_memory_is_the_runtime_s_layout() -> None:
    plain = TailBlocks(world_state="It is night.")
    assert assemble_memory_last(system_prompt="SYS", history=HISTORY, tail=plain, user_payload="x") == \
        assemble_messages(system_prompt="SYS", history=HISTORY, tail=plain, user_payload="x")
    # Templates without later system messages get the memory as a context update, like every block.
    folded = assemble_memory_last(system_prompt="SYS", tail=TailBlocks(memory="m"), user_payload="x",
                                  system_messages_after_first=False)
    assert folded[-2] == {"role": "user", "content": "System context update:\n## Notes about the player\nm"}


def _history(n: int) -> list[HistoryMessage]:
    return [HistoryMessage("user" if i % 2 == 0 else "assistant", f"m{i}", order=i + 1) for i in range(n)]


def _render(placement: Placement, history: list[HistoryMessage]) -> list[dict[str, str]]:
    return assemble_memory_last(system_prompt="SYS", history=history, tail=placement.tail, user_payload="line",
                                tail_after=placement.tail_after, notes_after=placement.notes_after,
                                memory_with_tail=True)


def _notes(messages: list[dict[str, str]]) -> list[tuple[int, str]]:
    return [(i, m["content"].removeprefix(LAST_MEMORY_HEADING + "\n")) for i, m in enumerate(messages)
            if m["content"].startswith(LAST_MEMORY_HEADING)]


def test_appended_lines_are_blocks_of_their_own_where_they_were_first_sent() -> None:
    tail = TailBlocks(world_state="night", memory="- a\n- b")
    first = place_memory_with_tail(None, tail, "night", _history(2), compacted=False)
    assert (first.tail_after, first.notes_after, first.tail.memory) == (2, (), "- a\n- b")
    # Two exchanges later the game appends a line: the block stays, the line goes right before the player's.
    grown = replace(tail, memory="- a\n- b\n- c")
    second = place_memory_with_tail(first.kept, grown, "night", _history(6), compacted=False)
    assert (second.tail_after, second.notes_after) == (2, (6,))
    assert _notes(_render(second, _history(6))) == [(4, "- a\n- b"), (9, "- c")]
    before = _render(second, _history(6))[:-1]
    # Later turns only append; a second append is one more block, the first stays where it went.
    more = replace(tail, memory="- a\n- b\n- c\n- d\n- e")
    third = place_memory_with_tail(second.kept, more, "night", _history(8), compacted=False)
    assert (third.tail_after, third.notes_after) == (2, (6, 8))
    messages = _render(third, _history(8))
    assert messages[:len(before)] == before and _notes(messages)[-1] == (len(messages) - 2, "- d\n- e")
    # Rendered once more from the anchors as read back from disk (texts as digests), the same places.
    stored = PromptAnchors(TailAnchor(text_digest(third.kept.tail.text), third.kept.tail.after_order),
                           third.kept.notes)
    assert place_memory_with_tail(stored, more, "night", _history(8), compacted=False) == third._replace(
        kept=replace(third.kept, tail=stored.tail))


def test_a_rewrite_a_fold_or_too_many_runs_put_the_whole_memory_last_again() -> None:
    tail = TailBlocks(memory="- a\n- b")
    first = place_memory_with_tail(None, tail, "", _history(2), compacted=False)
    grown = place_memory_with_tail(first.kept, replace(tail, memory="- a\n- b\n- c"), "", _history(4),
                                   compacted=False)
    assert grown.notes_after == (4,)

    def whole(placement: Placement, memory: str, n: int) -> None:
        assert (placement.tail_after, placement.notes_after, placement.tail.memory) == (n, (), memory)
        assert placement.kept.notes == ()

    rewrite = "- a\n- B\n- c"
    whole(place_memory_with_tail(grown.kept, replace(tail, memory=rewrite), "", _history(6), compacted=False),
          rewrite, 6)
    whole(place_memory_with_tail(grown.kept, replace(tail, memory="- a\n- b\n- c\n- d"), "", _history(6),
                                 compacted=True), "- a\n- b\n- c\n- d", 6)
    # The tail's message left the history (pruned): everything goes last.
    gone = [m for m in _history(6) if m.order > 2]
    whole(place_memory_with_tail(grown.kept, replace(tail, memory="- a\n- b\n- c\n- d"), "", gone,
                                 compacted=False), "- a\n- b\n- c\n- d", 4)
    placement, memory = grown, "- a\n- b\n- c"
    for n in range(MAX_MEMORY_ADDITIONS - 1):
        memory += f"\n- {n}"
        placement = place_memory_with_tail(placement.kept, replace(tail, memory=memory), "", _history(6 + 2 * n),
                                           compacted=False)
    assert len(placement.notes_after) == MAX_MEMORY_ADDITIONS
    memory += "\n- last"
    whole(place_memory_with_tail(placement.kept, replace(tail, memory=memory), "", _history(20), compacted=False),
          memory, 20)


def test_a_block_that_stays_after_one_that_moved_stays_where_that_one_went() -> None:
    # turns/between/block_pace.py switches a conversation between the two placements: no block is moved by the switch.
    tail = TailBlocks(world_state="night", memory="- a\n- b")
    moved = anchors_of_the_block_that_moves(TailAnchor("## World State\nnight", 2), tail.memory, _history(6))
    placement = place_memory_with_tail(moved, tail, "## World State\nnight", _history(8), compacted=False)
    assert (placement.tail_after, placement.notes_after) == (2, (6,))
    assert _notes(_render(placement, _history(8))) == [(8, "- a\n- b")]  # after m5, where the moving turn sent it
    assert anchors_of_the_block_that_moves(moved.tail, "", _history(6)) == PromptAnchors(moved.tail)
