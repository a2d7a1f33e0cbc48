"""The memory writer's exchange with the model: its instructions and few-shot pairs, the JSON schema the
decision is constrained to, and the decision parsed from the reply. Pure.

What the runtime then does with a decision (which lines are worth asking about, grounding, topics, the edit)
is `writer/decision.py`'s; `writer/passes.py` runs the call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.errors import InvalidArgumentError

MAX_TOPIC_CHARS = 24
MAX_VALUE_CHARS = 80
WRITER_MAX_TOKENS = 48  # the JSON object is ~20 tokens; the cap bounds a runaway string
KIND_FACT = "fact"
KIND_NOTHING = "nothing"


WRITER_SYSTEM = (
    "You take notes for a game character about the player. Read the player's message and answer with "
    "one JSON object. If the player states a fact about themselves (their name, what they order, owe, "
    "like, dislike, own, did or plan), kind is \"fact\", topic is one word naming what it is about, and "
    "value is the detail, in a few words taken from the message. For greetings, small talk, thanks and "
    "questions, kind is \"nothing\". If the player corrects something, give the new detail."
)

# Few-shot pairs. Their details (Zed, Quill, the miller, a clay pot) are invented: a small model that
# pastes one into another conversation is refused by `grounded`, since the player never said it.
WRITER_EXAMPLES: tuple[tuple[str, dict[str, str]], ...] = (
    ("Greetings, friend!", {"kind": KIND_NOTHING, "topic": "", "value": ""}),
    ("I'm Zed, a wandering cook.", {"kind": KIND_FACT, "topic": "name", "value": "Zed"}),
    ("What a beautiful sunset.", {"kind": KIND_NOTHING, "topic": "", "value": ""}),
    ("I owe the miller 7 copper.", {"kind": KIND_FACT, "topic": "debt", "value": "7 copper to the miller"}),
    ("Thanks, that helps a lot.", {"kind": KIND_NOTHING, "topic": "", "value": ""}),
    ("I hope the rain stops soon.", {"kind": KIND_NOTHING, "topic": "", "value": ""}),
    ("I'll be right back.", {"kind": KIND_NOTHING, "topic": "", "value": ""}),
    ("I'd like to buy a clay pot.", {"kind": KIND_FACT, "topic": "order", "value": "a clay pot"}),
    ("Sorry, I said it wrong: my name is Quill.", {"kind": KIND_FACT, "topic": "name", "value": "Quill"}),
)
EXAMPLE_MARKERS: tuple[str, ...] = ("Zed", "Quill", "miller", "clay pot", "7 copper")
"""Details that exist only in the examples: seen in memory or a reply, they were copied."""


MAX_SPAN_WORDS = 6
MAX_SPAN_LINE_WORDS = 40  # a longer line gets a free value (the enum would grow past a cheap grammar)


def value_spans(player_text: str) -> list[str]:
    """Every run of 1..6 consecutive words of the line (punctuation around words dropped), in order."""
    words = [w.strip(".,!?:;\"()[]") for w in player_text.split()]
    words = [w for w in words if w]
    spans: list[str] = []
    for start in range(len(words)):
        for end in range(start + 1, min(len(words), start + MAX_SPAN_WORDS) + 1):
            span = " ".join(words[start:end])
            if span not in spans:
                spans.append(span)
    return spans


def writer_schema(player_text: str | None = None) -> dict[str, Any]:
    """The JSON schema the decision is constrained to (llama.cpp turns it into a grammar).

    With the player's line, the value can only be a run of its own words: SmolLM2-135M answered
    "Sorry, I misspoke: my name is Aldous." with the example's "Quill" when the value was free
    (on the eval's lines: captured 45/50 vs 43/50, corrections 14/16 both, junk 9/118 vs 6/118).
    """
    # A free topic, not an enum: with a fixed list SmolLM2-135M labelled most facts "name", so they
    # replaced each other (captured 19/25 vs 21/25, corrections 5/8 vs 7/8 on the eval's lines).
    topic = {"type": "string", "maxLength": MAX_TOPIC_CHARS}
    value: dict[str, Any] = {"type": "string", "maxLength": MAX_VALUE_CHARS}
    if player_text is not None and len(player_text.split()) <= MAX_SPAN_LINE_WORDS:
        value = {"enum": ["", *value_spans(player_text)]}
    return {
        "type": "object",
        "properties": {
            "kind": {"enum": [KIND_FACT, KIND_NOTHING]},
            "topic": topic,
            "value": value,
        },
        "required": ["kind", "topic", "value"],
    }


def writer_messages(player_text: str) -> list[dict[str, str]]:
    """The decision request: instructions, the few-shot pairs, then the player's line."""
    messages = [{"role": "system", "content": WRITER_SYSTEM}]
    for text, answer in WRITER_EXAMPLES:
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": json.dumps(answer)})
    messages.append({"role": "user", "content": player_text})
    return messages


@dataclass(frozen=True)
class WriterDecision:
    """The model's decision: keep a fact (`topic`, `value`) or nothing."""

    keep: bool
    topic: str = ""
    value: str = ""


def parse_decision(text: str) -> WriterDecision:
    """The decision in the model's JSON; InvalidArgumentError names what is wrong."""
    try:
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"the memory decision is not complete JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError("the memory decision is not a JSON object")
    kind = data.get("kind")
    if kind not in (KIND_FACT, KIND_NOTHING):
        raise InvalidArgumentError("the memory decision's kind must be 'fact' or 'nothing'")
    if kind == KIND_NOTHING:
        return WriterDecision(False)
    topic, value = data.get("topic"), data.get("value")
    if not isinstance(topic, str) or not isinstance(value, str):
        raise InvalidArgumentError("the memory decision's topic and value must be strings")
    return WriterDecision(True, one_line(topic), one_line(value))


def one_line(text: str) -> str:
    """`text` on one line, its runs of whitespace one space."""
    return " ".join(text.split())


def example_copies(texts: Sequence[str]) -> int:
    """How many of the texts contain a detail that exists only in the writer's examples."""
    return sum(1 for t in texts if any(m.casefold() in t.casefold() for m in EXAMPLE_MARKERS))
