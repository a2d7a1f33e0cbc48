"""The memory-last request layout (pure): the whole memory as one block after the history (issues 25, 24)."""

from __future__ import annotations

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.memory_last import assemble_memory_last
from pyruntime.turns.prompt import MemoryNote, TailBlocks, assemble_messages

HISTORY = [HistoryMessage("user", "hi"), HistoryMessage("assistant", "hello")]
TAIL = TailBlocks(request_system_instructions="be terse", memory="Player's name: Tobin", world_state="It is night.",
                  memory_updates="Added: x", memory_folded=MemoryNote(2, "Added: y"), memory_notes=(MemoryNote(3, "z"),))


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_the_memory_goes_right_after_the_tail_where_that_was_first_sent() -> None:
    messages = assemble_memory_last(system_prompt="SYS", summary="they met", history=HISTORY, tail=TAIL,
                                    user_payload="What is my name?", tail_after=1, memory_with_tail=True)
    assert [m["role"] for m in messages] == ["system", "system", "user", "system", "system", "assistant", "user"]
    assert _headings(messages[1]["content"]) == ["## Conversation Summary"]
    assert _headings(messages[3]["content"]) == ["## Request System Instructions", "## World State"]
    assert messages[4]["content"] == "## Notes about the player\nPlayer's name: Tobin"
    assert messages[5] == {"role": "assistant", "content": "hello"}  # the exchanges since then follow it
    assert sum("Player's name" in m["content"] for m in messages) == 1 and "updates" not in str(messages)
    # Without a place (the first turn, an edit, a fold: `place_tail` says None or the end) it is last.
    last = assemble_memory_last(system_prompt="SYS", history=HISTORY, tail=TAIL, user_payload="x", tail_after=2,
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
