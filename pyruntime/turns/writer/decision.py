"""The memory writer: what a small model keeps from a player's line, decided after the reply. Pure logic.

Some models cannot use the `memory` tool inside their reply: SmolLM2-135M stored a stated fact 0 of
15 times that way, pasted the tool contract's example as a fact and wrote memory on small talk
(docs/design/memory-writer.md). For them the runtime runs a separate, grammar-constrained decision after the reply
(`MemoryDesign.WRITER`): one small JSON object, `{"kind": "fact"|"nothing", "topic": ..., "value": ...}`.
The runtime, not the model, turns it into a memory edit:

- the fact becomes one short labelled line, `Player's <topic>: <value>` (recall-friendly);
- the topic must fit the value: a `name` is the player's own name, said as one ("my name is", "call
  me", "I'm <Name>"), or the value goes under the thing it names ("my horse is called Clover": `horse`)
  or is refused (`fitted_topic`);
- a topic is stored once: a fact whose topic is already stored replaces that line, a correction
  replaces the line it corrects, anything else is appended;
- the value must come from the player's own words (`grounded_value`): a copied few-shot example or
  an invented detail is refused, so examples can be concrete without becoming facts;
- a line that only asks questions, or is small talk ("I'll look around a bit", "I need some rest"),
  is not sent to the model at all (`only_questions`, `small_talk`).

`MemoryDesign.TOOL` keeps the contract's `memory` tool in the reply (capable models). Which design a
model gets is decided in one place: `pyruntime.turns.factory.model_profile`. The request to the model
(instructions, few-shot pairs, schema) and the parsed decision are `writer/prompt.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.errors import SettingChoice
from pyruntime.turns.writer.prompt import WriterDecision

LINE_PREFIX = "Player's "
NAME_TOPIC = "name"
NOTE_TOPIC = "note"  # a fact with no topic of its own; notes are never replaced by topic (they differ)


class MemoryDesign(SettingChoice, setting="memory design"):
    """How memory gets written: the `memory` tool in the reply, or the writer pass after it."""

    TOOL = "tool"
    WRITER = "writer"


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_WORD = re.compile(r"[A-Za-z0-9]+")
STOPWORDS = frozenset(
    "a an the and or but of to for in on at by with from as is are was were be been am i me my mine you your "
    "he she it its we our they their this that these those do does did have has had will would can could "
    "should not no yes so very just please player player's s some any".split()
)


FIRST_PERSON = frozenset("i i'm im i'd i'll i've me my mine myself we our us".split())
CORRECTION_CUES = frozenset(
    "actually wait sorry oops no not instead change changed mixed wrong meant correct correction real "
    "forgive rather".split()
)


def about_the_player(text: str) -> bool:
    """True when the line speaks in the first person: only then can it state a fact about the player."""
    words = {w.lower() for w in re.findall(r"[A-Za-z']+", text)}
    return bool(words & FIRST_PERSON)


def is_correction(text: str) -> bool:
    """True when the line carries a correction cue ("actually", "not", "instead", "I meant", ...)."""
    return bool(set(_words(text)) & CORRECTION_CUES)


# Words of small talk in a game: resting, waiting, leaving and coming back, looking around, greetings,
# thanks, feelings, time words. A first-person line made only of these (and filler) states no fact.
SMALL_TALK_WORDS = frozenset(
    "rest resting sleep sleeping nap tired exhausted wait waiting sit sitting stay staying look looking around "
    "bit little careful worry worried fine okay ok alright good great nice glad happy pleased sure right "
    "back later soon now here there today tonight tomorrow next week while moment minute again first "
    "thanks thank bye goodbye farewell hello hi hey greetings see tell told said say come coming go going "
    "leave leaving off forward enjoy enjoying it's that's".split()
)
# Verbs with no content of their own ("I will", "I need", "I'll have ...") and wishes or opinions
# ("I hope", "I think"): the first kind is dropped when looking for content, the second makes the
# sentence small talk whatever follows ("I hope the sea is calm").
FILLER_VERBS = frozenset("will ll shall would need want wanted get got make let really also too maybe perhaps".split())
WISH_VERBS = frozenset("hope hoping wish wishing guess think thinking wonder wondering suppose bet believe".split())


_CONTRACTION_PARTS = frozenset(
    "t ll m re ve d don won didn doesn isn wasn aren haven hasn couldn wouldn shouldn".split())
_PRONOUNS = frozenset("he him his she her hers they them us one".split())


def small_talk(text: str) -> bool:
    """True when a first-person line states nothing to keep: only small-talk words, or a wish or an opinion.

    Measured on SmolLM2-135M: asked about "I'll look around a bit" it stored `Player's name: I'll look
    around a bit` next to the player's real name. A line with any other word is not small talk
    (a correction carries its new value, so it never is).
    """
    words = _words(text)
    if words[:1] in (["i"], ["we"]) and any(w in WISH_VERBS for w in words[1:3]):
        return True
    ignored = STOPWORDS | FIRST_PERSON | FILLER_VERBS | _CONTRACTION_PARTS | _PRONOUNS
    return all(w in SMALL_TALK_WORDS for w in words if w not in ignored)


def worth_asking(text: str) -> bool:
    """True when the line may hold a fact to keep: first person or a correction, not only questions or small talk.

    Measured on SmolLM2-135M: asked about every line, it called 15 of 35 greetings and small-talk lines
    a fact; the lines it is not asked about cost no model call either.
    """
    return (about_the_player(text) or is_correction(text)) and not only_questions(text) and not small_talk(text)


MAX_STATEMENTS = 3  # decisions for one line at most: each is a model call behind player turns
_CLAUSE_BREAK = re.compile(r"\s*(?:,\s*and\s+|\band\s+|[,;]\s*|\s+but\s+)", re.IGNORECASE)


def statements(text: str) -> list[str]:
    """The parts of a line to decide on one at a time: its first-person sentences and clauses, at most 3.

    One decision keeps one fact, so "My name is Alaric and I love horses." kept only the horse. A
    sentence is cut at "and", "but", a comma or a semicolon only between two first-person clauses (the
    next starts with "I …", or "my …" with a verb: "…, my horse is …"), so "I owe you 10 gold and 5
    silver", "I love bread and my horse" and "Sorry, I said it wrong, my name is …" stay whole (a clause
    with a correction cue keeps what follows). A line with a single statement is returned whole, as before.
    """
    if not worth_asking(text):
        return []
    parts: list[str] = []
    for sentence in (s.strip() for s in _SENTENCE.findall(text)):
        parts.extend(_clauses(sentence))
    kept = [p for p in parts if worth_asking(p)]
    return kept[:MAX_STATEMENTS] if len(kept) > 1 else [text]


def _clauses(sentence: str) -> list[str]:
    """The sentence cut at every break between two first-person clauses."""
    clauses: list[str] = []
    start = 0
    for match in _CLAUSE_BREAK.finditer(sentence):
        before = sentence[start:match.start()]
        # A correction is never cut: "Sorry, I said it wrong, my name is Osric." gave 'Player's name: Sorry'.
        if _starts_a_clause(sentence[match.end():]) and about_the_player(before) and not is_correction(before):
            clauses.append(before.strip(" ,;"))
            start = match.end()
    clauses.append(sentence[start:].strip(" ,;"))
    return [c for c in clauses if c]


def _starts_a_clause(text: str) -> bool:
    """True when the text opens a first-person clause: "I …", "we …", or "my/our <noun> is|was …"."""
    words = _words(text)
    if not words:
        return False
    if words[0] in ("i", "we"):
        return True
    return words[0] in ("my", "our") and any(w in ("is", "are", "was", "were", "s") for w in words[1:5])


def only_questions(text: str) -> bool:
    """True when every sentence of the line is a question: it states nothing to keep."""
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip(" .!?")]
    return bool(sentences) and all(s.endswith("?") for s in sentences)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _matches(word: str, said: set[str]) -> bool:
    """The word was said, allowing an inflection (dragon/dragons, owe/owed) for longer words."""
    if word in said:
        return True
    stem = word[:5]
    return len(word) >= 4 and any(len(s) >= 4 and s[:5] == stem for s in said)


def _said(word: str, said: set[str]) -> bool:
    """A value word the player said: a number exactly, any other word allowing an inflection."""
    return word in said if word.isdigit() else word in STOPWORDS or _matches(word, said)


def grounded_value(value: str, player_text: str) -> str:
    """The part of the value the player said: its words up to the first one they did not say ("" if none).

    A small model continues a right value with invented words ("25 gold to the debt of 40 people"): the
    grounded start ("25 gold") is kept. A value copied from an example or invented from its first
    word ("Ella" for "Eliza") leaves nothing, and nothing is stored.
    """
    said = set(_words(player_text))
    kept: list[str] = []
    for token in value.split():
        if not all(_said(w, said) for w in _words(token)):
            break
        kept.append(token)
    while kept and all(w in STOPWORDS for w in _words(kept[-1])):
        kept.pop()  # "25 gold to the" -> "25 gold"
    text = " ".join(kept).strip(" ,;:-")
    return text if any(w not in STOPWORDS for w in _words(text)) else ""


def grounded(value: str, player_text: str) -> bool:
    """True when the whole value comes from the player's words (every name, number and word was said)."""
    return bool(value.strip()) and grounded_value(value, player_text) == " ".join(value.split()).strip(" ,;:-")


def normalize_topic(topic: str) -> str:
    """A topic's comparable form: lower case, without 'player'/'my'/'the' and a plural s."""
    words = [w for w in _words(topic) if w not in ("player", "players", "s", "my", "the", "your")]
    text = " ".join(words)
    return text[:-1] if len(text) > 3 and text.endswith("s") and not text.endswith("ss") else text


def memory_line(topic: str, value: str) -> str:
    """The stored line of a fact: `Player's <topic>: <value>`."""
    return f"{LINE_PREFIX}{normalize_topic(topic) or NOTE_TOPIC}: {value.strip().rstrip('.')}"


def line_topic(line: str) -> str | None:
    """The normalized topic of a stored `Player's <topic>: …` line, None for any other line."""
    stripped = line.strip()
    if not stripped.startswith(LINE_PREFIX) or ":" not in stripped:
        return None
    return normalize_topic(stripped[len(LINE_PREFIX):].split(":", 1)[0])


@dataclass(frozen=True)
class MemoryEdit:
    """What to do to the document: append `line`, or replace `old_line` with it; `reason` when nothing."""

    line: str = ""
    old_line: str | None = None
    reason: str = ""

    @property
    def changes(self) -> bool:
        """True when the edit writes something."""
        return bool(self.line)

    def tool_arguments(self) -> dict[str, Any]:
        """The `memory` tool call that performs the edit (versioned, durable, size-limited like any call)."""
        if self.old_line is not None:
            return {"action": "str_replace", "old_text": self.old_line, "new_text": self.line}
        return {"action": "append", "content": self.line}


# "my name is", "my real name's", "call me", "I'm called", "they call me", "name's": the player names themself.
_NAMES_ITSELF = re.compile(r"\b(?:(?:my|our)\s+(?:\w+\s+)?name|call\s+me|called\s+me|name'?s|i\s+am\s+called|"
                           r"i'?m\s+called|i\s+am\s+named|i'?m\s+named)\b", re.IGNORECASE)
# "my horse is called Clover", "my sister's name is Poppy": the name of a thing or a person the player has.
_NAMES_A_THING = re.compile(r"\bmy\s+(\w+)(?:'s\s+name)?\s+(?:is\s+|was\s+)?(?:called|named|name\s+is)?\s*",
                            re.IGNORECASE)
# Verbs that precede a value without naming what it is ("I need passage to X": the topic is "passage").
TOPIC_VERBS = frozenset("need want like love buy bought order ordered have had get got go going travel traveling "
                        "travelling live lived am is are was were be called named".split())


def fitted_topic(topic: str, value: str, player_text: str) -> str:
    """The topic a grounded value is stored under ("" when it fits none).

    A small model calls most facts `name` (SmolLM2-135M: `Player's name: Saltmere` for "I need passage
    to Saltmere." beside the player's real name). A `name` is kept only when the line names the player
    ("my name is", "call me", "I'm Tobin") and the value is a name (capitalized); otherwise the value goes
    under the thing it names ("my horse is called Clover": `horse`) or the word just before it
    ("passage to Saltmere": `passage`), else a name goes under `note` and anything else nowhere.
    """
    normalized = normalize_topic(topic)
    if normalized != NAME_TOPIC:
        return normalized
    first = value.split()[0] if value.split() else ""
    is_a_name = first[:1].isupper()
    thing = _NAMES_A_THING.search(player_text)
    if thing and thing.group(1).lower() not in ("name", "real", "full", "first", "last") and thing.end() <= (
            player_text.find(first) if first in player_text else len(player_text)):
        return normalize_topic(thing.group(1))
    if is_a_name and (_NAMES_ITSELF.search(player_text) or re.search(
            r"\b(?:i'?m|i\s+am|this\s+is)\s+" + re.escape(first) + r"\b", player_text, re.IGNORECASE)):
        return NAME_TOPIC
    return _word_before(value, player_text) or (NOTE_TOPIC if is_a_name else "")


def _word_before(value: str, player_text: str) -> str:
    """The content word right before the value in the line (not a verb), normalized; "" when none."""
    at = player_text.lower().find(value.lower())
    if at <= 0:
        return ""
    before = [w for w in _words(player_text[:at]) if w not in STOPWORDS and w not in FIRST_PERSON]
    if not before or before[-1] in TOPIC_VERBS or before[-1] in CORRECTION_CUES:
        return ""
    return normalize_topic(before[-1])


MAX_VALUE_WORDS = 10
_CLAUSE_STOPS = frozenset("not instead rather but than".split())  # "30 logs instead of 20": the old value stays out


def to_clause_end(value: str, player_text: str) -> str:
    """The value run on to the end of its clause in the line, up to 10 words ("fought at the battle" -> "fought at
    the battle of Redford"); unchanged when it is not found, already ends its clause, or would grow too long.

    SmolLM2-135M often cuts its value before the phrase's object (the eval's quests, birthdays, orders:
    "the arena fight" for "I won the arena fight against the ogre."); the rest is the player's own words.
    """
    words = value.split()
    if not words:
        return value
    pattern = r"\b" + r"\W+".join(re.escape(w) for w in words) + r"\b"
    found = re.search(pattern, player_text, re.IGNORECASE)
    if found is None:
        return value
    rest = []
    clause = re.match(r"[^,.;:!?]*", player_text[found.end():])  # always matches (possibly empty)
    for word in (clause.group(0) if clause else "").split():
        if word.lower() in _CLAUSE_STOPS:
            break
        rest.append(word.strip("'\""))
    return " ".join(words + rest) if len(words) + len(rest) <= MAX_VALUE_WORDS else value


_SUBJECT = frozenset("i i'm im i'll i've i'd am was will really".split())


def _without_subject(value: str) -> str:
    """The value without a leading first-person subject ("I'm allergic to honey" -> "allergic to honey")."""
    tokens = value.split()
    while len(tokens) > 1 and tokens[0].lower().strip(",") in _SUBJECT:
        tokens.pop(0)
    return " ".join(tokens)


def plan_edit(memory: str, decision: WriterDecision, player_text: str) -> MemoryEdit:
    """The edit a decision makes to `memory`: a grounded fact replaces its topic's line or is appended.

    A topic is stored once: the same topic replaces its line (a correction or a newer value); a
    correction under another topic replaces the line it corrects.
    """
    if not decision.keep:
        return MemoryEdit(reason="nothing to keep")
    if not decision.value.strip():
        return MemoryEdit(reason="the fact has no value")
    value = _without_subject(to_clause_end(grounded_value(decision.value, player_text), player_text))
    if not value:
        return MemoryEdit(reason="the value is not in the player's message")
    topic = fitted_topic(decision.topic, value, player_text)
    if not topic:
        return MemoryEdit(reason=f"the value does not fit the topic '{normalize_topic(decision.topic)}'")
    line = memory_line(topic, value)
    lines = memory.splitlines()
    if line in (entry.strip() for entry in lines):
        return MemoryEdit(reason="already stored")
    for entry in lines:
        if topic != NOTE_TOPIC and line_topic(entry) == topic:
            return MemoryEdit(line=line, old_line=entry.strip())
    if not is_correction(player_text):
        return MemoryEdit(line=line)
    # The model's topic for a correction often differs from the first one ("order" / "order type"):
    # then the correction replaces the stored line sharing the most words with the player's line. Its
    # new topic is kept: the first one often carries the old value ("Player's cider: a mug of cider").
    return MemoryEdit(line=line, old_line=_closest_line(lines, player_text))


def _closest_line(lines: Sequence[str], player_text: str) -> str | None:
    """The stored writer line sharing the most content words with the text (None when none shares one)."""
    said = {w for w in _words(player_text) if w not in STOPWORDS and w not in CORRECTION_CUES}
    best, best_hits = None, 0
    for entry in lines:
        if line_topic(entry) is None:
            continue
        hits = sum(1 for w in set(_words(entry)) - STOPWORDS if _matches(w, said))
        if hits > best_hits:
            best, best_hits = entry.strip(), hits
    return best
