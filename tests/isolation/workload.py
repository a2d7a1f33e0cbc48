"""The engine isolation workload (pure): many conversations and a seeded random interleaving of what happens to them.

The conversations are built to tempt every reuse the engine can make: more of them than slots (states leave their
slots and come back), groups that share a system prompt and diverge in their histories, pairs that share a long
prefix and differ in one early token, and twins whose prompts are byte-identical but belong to two scopes. The
schedule interleaves turns (alone and several at once), turns cancelled while the prompt is evaluated and while the
reply streams, folds (the history replaced by a summary) and restarts of the engine with saved states.

`tests/isolation/engine_check.py` runs a schedule against the hosted engine and checks every turn's first-token
distribution against a fresh engine's; `bench/bench_isolation.py` runs a longer one on the embedded model.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pyruntime.model.client.slots import conversation_id

# Words the tiny test model has pieces for, and ordinary ones: histories are random sentences of them.
WORDS = ("the", "a", "to", "and", "you", "is", "it", "hello", "name", "sword", "memory", "river", "bread", "seven",
         "copper", "north", "lantern", "wolf", "harbor", "quiet", "storm", "ember", "silver", "market", "oath")
LONG_PREFIX_REPEATS = 6  # the shared-prefix pair: this many lines of lore after the differing token
SUMMARY = "Summary of the talk so far: the player asked about the road and the weather."


@dataclass(frozen=True)
class Conversation:
    """One conversation: its key (whose digest names it in the engine), system prompt and the player's lines."""

    name: str
    key: str
    system: str
    lines: tuple[str, ...]
    group: str

    @property
    def digest(self) -> str:
        """The name the runtime gives it in the engine (`slots.conversation_id`)."""
        return conversation_id(self.key)

    def messages(self, turn: int, folded: int = 0) -> list[dict[str, str]]:
        """The prompt of `turn` (0-based): lines before `folded` replaced by a summary, one reply after each line."""
        messages = [{"role": "system", "content": self.system}]
        if folded:
            messages.append({"role": "system", "content": f"{SUMMARY} ({folded} lines)"})
        for index in range(folded, turn):
            messages += [{"role": "user", "content": self.lines[index]},
                         {"role": "assistant", "content": f"Noted, {index}."}]
        messages.append({"role": "user", "content": self.lines[turn]})
        return messages


@dataclass(frozen=True)
class Turn:
    """A turn whose first-token distribution is compared with a fresh engine's."""

    label: str
    conversation: Conversation
    messages: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class Step:
    """One thing that happens: `turns` (run at once when several), a cancel, or a restart of the engine."""

    kind: str  # "turns" | "cancel_prompt" | "cancel_stream" | "restart"
    turns: tuple[Turn, ...] = ()


@dataclass
class Schedule:
    """The conversations and the steps, with the seed that made them (printed by a failing check)."""

    seed: int
    conversations: list[Conversation]
    steps: list[Step] = field(default_factory=list)

    @property
    def probes(self) -> list[Turn]:
        """Every compared turn, in order."""
        return [turn for step in self.steps if step.kind == "turns" for turn in step.turns]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def build_conversations(rng: random.Random, count: int, turns: int) -> list[Conversation]:
    """`count` conversations (at least 6) of `turns` lines each, in the groups described above."""
    if count < 6:
        raise ValueError("the workload needs at least 6 conversations (its groups)")
    persona = "You are Mira, the innkeeper of the river town. " + _sentence(rng, 12)
    lore = " ".join(_sentence(rng, 10) for _ in range(LONG_PREFIX_REPEATS))
    twin_lines = tuple(_sentence(rng, 6) for _ in range(turns))
    made: list[Conversation] = []
    # Twins: byte-identical prompts in two scopes (the engine must never hand one's state to the other).
    for twin in ("a", "b"):
        made.append(Conversation(f"twin-{twin}", f"scope-{twin}/Mira", persona, twin_lines, "twins"))
    # A long shared prefix that differs in one early token (a digit: one token in every vocabulary here).
    for digit in ("7", "8"):
        made.append(Conversation(f"gate-{digit}", f"gate-{digit}/Warden", f"Gate {digit}. {lore}",
                                 tuple(_sentence(rng, 6) for _ in range(turns)), "one-token"))
    index = 0
    while len(made) < count:  # the rest share the persona and diverge from their first line
        lines = tuple(_sentence(rng, rng.randint(4, 9)) for _ in range(turns))
        made.append(Conversation(f"guest-{index}", f"player-{index}/Mira", persona, lines, "shared-system"))
        index += 1
    return made


def build_schedule(seed: int, *, conversations: int, rounds: int, restarts: int = 1,
                   long_line_words: int = 300) -> Schedule:
    """A seeded interleaving: `rounds` passes over the conversations in random order, `restarts` engine restarts.

    A pass gives each conversation one of: a turn, a turn run at once with others, a cancelled turn (during its
    prompt or its reply) followed later by the turn itself, or a fold (the next turns send a summary instead).
    """
    rng = random.Random(seed)
    made = build_conversations(rng, conversations, rounds + 1)
    schedule = Schedule(seed, made)
    turn_of = {c.name: 0 for c in made}
    folded = {c.name: 0 for c in made}
    restart_at = set(rng.sample(range(1, rounds), min(restarts, rounds - 1))) if rounds > 1 else set()

    def next_turn(conversation: Conversation) -> Turn:
        number = turn_of[conversation.name]
        turn_of[conversation.name] += 1
        messages = conversation.messages(number, folded[conversation.name])
        return Turn(f"{conversation.name}#{number}", conversation, tuple(messages))

    for round_number in range(rounds):
        if round_number in restart_at:
            schedule.steps.append(Step("restart"))
        order = list(made)
        rng.shuffle(order)
        while order:
            conversation = order.pop()
            roll = rng.random()
            if roll < 0.2 and order:  # several turns at once: decoded in one batch
                together = [conversation] + [order.pop() for _ in range(min(len(order), rng.randint(1, 3)))]
                schedule.steps.append(Step("turns", tuple(next_turn(c) for c in together)))
                continue
            if roll < 0.3:
                kind = "cancel_prompt" if roll < 0.25 else "cancel_stream"
                schedule.steps.append(Step(kind, (_cancelled(rng, conversation, turn_of, folded, long_line_words),)))
            elif roll < 0.36 and turn_of[conversation.name] >= 3:
                folded[conversation.name] = turn_of[conversation.name]  # from the next turn on: summary + new lines
            schedule.steps.append(Step("turns", (next_turn(conversation),)))
    for kind in ("cancel_prompt", "cancel_stream"):  # every schedule has each kind of cancel at least once
        if not any(step.kind == kind for step in schedule.steps):
            conversation = rng.choice(made)
            schedule.steps.append(Step(kind, (_cancelled(rng, conversation, turn_of, folded, long_line_words),)))
            schedule.steps.append(Step("turns", (next_turn(conversation),)))
    return schedule


def _cancelled(rng: random.Random, conversation: Conversation, turn_of: dict[str, int], folded: dict[str, int],
               long_line_words: int) -> Turn:
    """The turn the player abandons: its prompt ends with a long line, so there is a prompt to interrupt."""
    messages = conversation.messages(turn_of[conversation.name], folded[conversation.name])
    long_line = _sentence(rng, long_line_words)
    messages[-1] = {"role": "user", "content": f"{messages[-1]['content']} {long_line}"}
    return Turn(f"{conversation.name}#{turn_of[conversation.name]}-cancelled", conversation, tuple(messages))
