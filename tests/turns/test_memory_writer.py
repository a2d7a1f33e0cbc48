"""The memory writer's pure rules: the decision schema, which lines are asked, grounding, and the edit."""

from __future__ import annotations

import json

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.turns.writer.decision import (
    MemoryDesign,
    MemoryEdit,
    fitted_topic,
    grounded,
    grounded_value,
    is_correction,
    line_topic,
    memory_line,
    only_questions,
    plan_edit,
    small_talk,
    statements,
    to_clause_end,
    worth_asking,
)
from pyruntime.turns.writer.prompt import (
    EXAMPLE_MARKERS,
    WRITER_EXAMPLES,
    WriterDecision,
    example_copies,
    parse_decision,
    value_spans,
    writer_messages,
    writer_schema,
)


def fact(topic: str, value: str) -> WriterDecision:
    return WriterDecision(True, topic, value)


def test_design_parse() -> None:
    assert MemoryDesign.parse(" Writer ") is MemoryDesign.WRITER
    assert MemoryDesign.parse(MemoryDesign.TOOL) is MemoryDesign.TOOL
    for bad in ("notes", "", 3):
        with pytest.raises(InvalidArgumentError, match="unknown memory design"):
            MemoryDesign.parse(bad)  # type: ignore[arg-type]


def test_schema_and_messages() -> None:
    schema = writer_schema()
    assert schema["required"] == ["kind", "topic", "value"]
    assert schema["properties"]["kind"] == {"enum": ["fact", "nothing"]}
    messages = writer_messages("My name is Tobin.")
    assert messages[0]["role"] == "system" and messages[-1] == {"role": "user", "content": "My name is Tobin."}
    # Every few-shot answer is valid under the schema's own parser, and a fact example's value is
    # grounded in its own example line (so the examples teach what the rules accept).
    answers = [json.loads(m["content"]) for m in messages if m["role"] == "assistant"]
    assert len(answers) == len(WRITER_EXAMPLES)
    for (text, answer) in WRITER_EXAMPLES:
        decision = parse_decision(json.dumps(answer))
        if decision.keep:
            assert grounded(decision.value, text), text


def test_the_value_is_a_run_of_the_players_words() -> None:
    assert value_spans("Call me Wren!") == ["Call", "Call me", "Call me Wren", "me", "me Wren", "Wren"]
    spans = value_spans("a b c d e f g h")
    assert "a b c d e f" in spans and "a b c d e f g" not in spans  # at most 6 words
    assert writer_schema("Call me Wren!")["properties"]["value"] == {"enum": ["", *value_spans("Call me Wren!")]}
    # A very long line (or none) gets a free, length-capped value.
    assert "maxLength" in writer_schema(" ".join(["word"] * 41))["properties"]["value"]
    assert "maxLength" in writer_schema()["properties"]["value"]


def test_parse_decision() -> None:
    assert parse_decision('{"kind": "nothing", "topic": "x", "value": "y"}') == WriterDecision(False)
    assert parse_decision('{"kind":"fact","topic":" name ","value":"Tobin\\n"}') == fact("name", "Tobin")
    for bad, why in (('{"kind": "fact"', "not complete JSON"), ("[]", "not a JSON object"),
                     ('{"kind": "maybe"}', "kind must be"), ('{"kind": "fact", "topic": 1, "value": "x"}', "strings")):
        with pytest.raises(InvalidArgumentError, match=why):
            parse_decision(bad)


@pytest.mark.parametrize("text, asked", [
    ("My name is Tobin.", True),
    ("I owe you 40 gold.", True),
    ("Actually make it a green cloak, not blue.", True),  # a correction without "I"
    ("Good morning, Bram!", False),  # no statement about the player
    ("Nice weather for traveling.", False),
    ("Do you sell horseshoes?", False),  # only a question
    ("Can I ask you something? Where is my horse?", False),
    ("I lost my map. Have you seen it?", True),  # a statement and a question
])
def test_which_lines_are_worth_a_model_call(text: str, asked: bool) -> None:
    assert worth_asking(text) is asked


def test_only_questions_and_correction_cues() -> None:
    assert only_questions("Where? Why?") and not only_questions("Hello.") and not only_questions("")
    assert is_correction("Sorry, my name is Osric.") and is_correction("Make it four, not three.")
    assert not is_correction("My name is Osric.")


def test_grounded_value_keeps_what_the_player_said() -> None:
    said = "Sorry, I was wrong: I owe you 25 gold, not 40."
    assert grounded_value("25 gold to the debt of 40 people", said) == "25 gold"  # an invented tail is cut
    assert grounded_value("books about dragons", "I'm looking for books about dragons.") == "books about dragons"
    assert grounded_value("Dragon books", "I'm looking for books about dragons.") == "Dragon books"  # inflection
    assert grounded_value("Ella", "I'm Eliza, a traveling bard.") == ""  # a garbled name is not stored
    assert grounded_value("Zed", "Thank you for your help.") == ""  # a copied example detail
    assert grounded_value("12 apples", "I bought 120 apples.") == ""  # numbers must match exactly
    assert grounded_value("the", "the") == ""  # nothing but filler words
    assert grounded("a steel dagger", "change my order to a steel dagger") is True
    assert grounded_value("a steel dagger please", "change my order to a steel dagger") == "a steel dagger"
    assert grounded("a bronze dagger", "change my order to a steel dagger") is False


def test_memory_lines_are_labelled_and_parsed_back() -> None:
    assert memory_line("Order_Type", "a steel dagger.") == "Player's order type: a steel dagger"
    assert memory_line("", "x") == "Player's note: x"
    assert memory_line("horses", "Clover") == "Player's horse: Clover"
    assert line_topic("Player's order type: a steel dagger") == "order type"
    assert line_topic("  Player's Name: Tobin") == "name"
    assert line_topic("Sword: Dawnbreaker") is None and line_topic("Player's nothing") is None


def test_plan_edit_appends_refuses_and_deduplicates() -> None:
    assert plan_edit("", WriterDecision(False), "hi") == MemoryEdit(reason="nothing to keep")
    assert plan_edit("", fact("name", " "), "My name is Tobin.").reason == "the fact has no value"
    assert plan_edit("", fact("name", "Zed"), "My name is Tobin.").reason == "the value is not in the player's message"
    edit = plan_edit("", fact("name", "Tobin"), "My name is Tobin.")
    assert edit == MemoryEdit(line="Player's name: Tobin") and edit.changes
    assert edit.tool_arguments() == {"action": "append", "content": "Player's name: Tobin"}
    assert plan_edit("Player's name: Tobin", fact("name", "Tobin"), "My name is Tobin.").reason == "already stored"


def test_a_name_is_kept_only_when_the_line_names_the_player() -> None:
    # SmolLM2 labels a town and a horse "name" (a second, wrong name line beside the real one).
    memory = "Player's name: Quentin"
    assert plan_edit(memory, fact("name", "Saltmere"), "I need passage to Saltmere.") == MemoryEdit(
        line="Player's passage: Saltmere")
    assert plan_edit(memory, fact("name", "Clover"), "My horse is called Clover.") == MemoryEdit(
        line="Player's horse: Clover")
    assert plan_edit(memory, fact("name", "red one"), "I'll buy the red one.").reason == (
        "the value does not fit the topic 'name'")
    for said, name in (("My name is Tobin.", "Tobin"), ("I'm Eliza, a traveling bard.", "Eliza"),
                       ("Call me Wren.", "Wren"), ("I am called Brigid.", "Brigid"),
                       ("My name is Lord Aldric.", "Lord")):
        assert fitted_topic("name", name, said) == "name", said
    assert fitted_topic("sister", "Poppy", "My sister is called Poppy.") == "sister"  # other topics stay


def test_a_topic_is_stored_once() -> None:
    # A duplicate topic is a replacement (a newer value) or nothing (the same value), never a second line.
    memory = "Player's name: Tobin\nPlayer's order: a steel longsword"
    assert plan_edit(memory, fact("order", "a steel dagger"), "I want a steel dagger.") == MemoryEdit(
        line="Player's order: a steel dagger", old_line="Player's order: a steel longsword")
    assert plan_edit(memory, fact("name", "Tobin"), "I'm Tobin.").reason == "already stored"


@pytest.mark.parametrize(("value", "said", "kept"), [
    ("fought at the battle", "I fought at the battle of Redford.", "fought at the battle of Redford"),
    ("arena fight", "I won the arena fight against the ogre.", "arena fight against the ogre"),
    ("Eliza", "I'm Eliza, a traveling bard.", "Eliza"),  # the clause ends at the comma
    ("30 logs", "Let's say 30 logs instead of 20.", "30 logs"),  # a correction's old value stays out
    ("25 gold", "Sorry, I was wrong: I owe you 25 gold, not 40.", "25 gold"),
    ("I", "I want to order a steel longsword in the style of my father the great smith.", "I"),  # too long: as is
    ("Zed", "My name is Tobin.", "Zed"),  # not in the line: as is (grounding refuses it)
])
def test_a_value_runs_on_to_the_end_of_its_clause(value: str, said: str, kept: str) -> None:
    assert to_clause_end(value, said) == kept


def test_a_leading_first_person_subject_is_not_part_of_the_value() -> None:
    assert plan_edit("", fact("allergy", "I'm allergic to honey"), "I'm allergic to honey.") == MemoryEdit(
        line="Player's allergy: allergic to honey")


@pytest.mark.parametrize("text", ["I'll look around a bit.", "I need some rest now.", "I'll be careful, don't worry.",
                                  "I hope the sea is calm.", "I'm fine, thanks.", "I'll be right back.", "No, wait."])
def test_small_talk_is_not_asked(text: str) -> None:
    assert small_talk(text) and not worth_asking(text) and statements(text) == []


@pytest.mark.parametrize("text", ["I need a potion of night vision.", "I'll have my usual, a mug of cider.",
                                  "I don't like carrots.", "Wait, change my order to a steel dagger.",
                                  "I live in the mill by the river.", "I'm Tobin."])
def test_facts_are_not_small_talk(text: str) -> None:
    assert not small_talk(text) and worth_asking(text)


def test_a_correction_replaces_its_topic_or_the_closest_line() -> None:
    memory = "Player's name: Oswin\nPlayer's order: a steel longsword\nSword: Dawnbreaker"
    by_topic = plan_edit(memory, fact("name", "Osric"), "Sorry, I said it wrong, my name is Osric.")
    assert by_topic == MemoryEdit(line="Player's name: Osric", old_line="Player's name: Oswin")
    assert by_topic.tool_arguments() == {"action": "str_replace", "old_text": "Player's name: Oswin",
                                         "new_text": "Player's name: Osric"}
    # Another topic ("order type"): the line sharing the player's words ("order", "steel") is replaced.
    closest = plan_edit(memory, fact("order_type", "a steel dagger"), "Wait, change my order to a steel dagger.")
    assert closest.old_line == "Player's order: a steel longsword"
    # A line the writer did not write (no "Player's" label) is never replaced by a guess.
    other = plan_edit("Sword: Dawnbreaker", fact("sword", "Dawnbreaker II"), "No, my sword is Dawnbreaker II.")
    assert other == MemoryEdit(line="Player's sword: Dawnbreaker II")


def test_example_copies() -> None:
    assert example_copies(["Your name is Zed.", "Hello", "a clay pot for you"]) == 2
    assert all(marker for marker in EXAMPLE_MARKERS)


@pytest.mark.parametrize(("text", "parts"), [
    ("My name is Alaric and I love horses.", ["My name is Alaric", "I love horses."]),
    ("I'm Tobin. I'd like an ale.", ["I'm Tobin.", "I'd like an ale."]),
    ("I'm Bo, and I owe you 5 gold.", ["I'm Bo", "I owe you 5 gold."]),
    ("Call me Bo, I like mint tea.", ["Call me Bo", "I like mint tea."]),
    ("My horse is Shadowfax, my sword is Dawn, I live in Oakvale and I owe Tom 3 gold.",
     ["My horse is Shadowfax", "my sword is Dawn", "I live in Oakvale"]),  # at most three decisions
    # One statement: the line is decided whole, as before.
    ("I owe you 10 gold and 5 silver.", ["I owe you 10 gold and 5 silver."]),
    ("I love bread, cheese and my horse.", ["I love bread, cheese and my horse."]),
    ("Sorry, I misspoke: my name is Aldous.", ["Sorry, I misspoke: my name is Aldous."]),
    # A correction keeps the clause after its cue: split, the apology became a fact (the eval's c12, c25).
    ("Sorry, I said it wrong, my name is Osric.", ["Sorry, I said it wrong, my name is Osric."]),
    ("Forgive me, my real name is Cassius, not Corvin.", ["Forgive me, my real name is Cassius, not Corvin."]),
    ("Actually, my name is Bo and I owe 5 gold.", ["Actually, my name is Bo and I owe 5 gold."]),
    ("Hello there! My name is Tobin.", ["Hello there! My name is Tobin."]),
    ("My name is Ann. What is yours?", ["My name is Ann. What is yours?"]),
    # Nothing to decide.
    ("What is my name?", []),
    ("Nice weather today.", []),
])
def test_a_line_is_decided_statement_by_statement(text: str, parts: list[str]) -> None:
    assert statements(text) == parts
