"""A 1000-turn simulated session: the history stays within budget, every message is sent, summarized or reported."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from pyruntime.history.budget import compute_history_budget
from pyruntime.history.fold import render_bullet
from pyruntime.history.fold_marker import split_marker
from pyruntime.history.messages import HistoryMessage
from pyruntime.history.pipeline import Disposition, prepare_scoped_turn_history
from pyruntime.history.prune import strip_think
from pyruntime.history.tokens import HeuristicTokenCounter
from pyruntime.policy import RoleMemoryConfig
from pyruntime.stores import InMemoryAgentMemoryStore, InMemoryConversationSummaryStore, ScopedAgentMemoryStore

WORDS = "the sword shield gold dragon village smith quest north river night price iron fire potion map".split()
TURNS = 1000
CHAT_CAP = 120


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 70)))


def test_a_thousand_turns_stay_within_budget_and_lose_nothing_silently() -> None:
    rng = random.Random(20240601)
    scoped = ScopedAgentMemoryStore(InMemoryAgentMemoryStore(chat_cap=CHAT_CAP), InMemoryConversationSummaryStore())
    config = RoleMemoryConfig("AINpc")
    counter = HeuristicTokenCounter()
    appended: list[HistoryMessage] = []
    ever: dict[int, Counter] = {}  # global message number -> dispositions seen in committed turns
    last_user = ""

    def append(role: str, content: str) -> None:
        scoped.append_chat_message("AINpc", role, content)
        appended.append(HistoryMessage(role, content))

    for turn in range(TURNS):
        user = last_user if rng.random() < 0.05 and last_user else sentence(rng)
        append("user", user)
        last_user = user
        budget_kwargs = dict(model_context_tokens=2048, max_output_tokens=256, system_prompt_tokens=300,
                             user_payload_tokens=counter.count(user))
        attempts = [0, 1] if turn % 7 == 3 else [0]  # some turns overflow once and are retried
        for attempt in attempts:
            budget = compute_history_budget(overflow_attempt=attempt, **budget_kwargs)
            prepared = asyncio.run(
                prepare_scoped_turn_history(scoped, "AINpc", config=config, counter=counter, budget=budget)
            )
            assert prepared.history_tokens <= budget.history_tokens, f"turn {turn} attempt {attempt}"
            assert len(prepared.messages) <= config.max_chat_history_messages
            assert prepared.dispositions.count(Disposition.SENT) == len(prepared.messages)
            assert Disposition.LEFT_OUT not in prepared.dispositions
        prepared.commit()

        first = len(appended) - len(prepared.dispositions)  # global number of the oldest stored message
        for offset, disposition in enumerate(prepared.dispositions):
            number = first + offset
            seen = ever.setdefault(number, Counter())
            if disposition is Disposition.ALREADY_FOLDED:
                assert seen[Disposition.FOLDED] or seen[Disposition.PRUNED], f"message {number} never folded"
            seen[disposition] += 1
        assert all(c[Disposition.FOLDED] <= 1 for c in ever.values()), "a message was folded twice"
        if prepared.cut_report.folded_ids and not prepared.cut_report.summary_chars_dropped:
            body = split_marker(prepared.pending_summary)[0]
            # A bullet is whole, or clipped (so the summary stays smaller than what it replaces) as the report says.
            clipped = {c.message_id: c.chars_kept for c in prepared.cut_report.clipped_bullets}
            for offset, disposition in enumerate(prepared.dispositions):
                if disposition is Disposition.FOLDED:
                    message = appended[first + offset]
                    as_sent = HistoryMessage(message.role, strip_think(message.content))  # older turns lose <think>
                    bullets = [render_bullet(m, clipped.get(m.id, 280)) for m in (message, as_sent)]
                    assert any(b is None or b.line in body for b in bullets), f"message {first + offset}"

        if rng.random() < 0.05:
            continue  # the turn failed: only the user message was recorded
        reply = sentence(rng)
        roll = rng.random()
        if roll < 0.03:
            reply = f"<think>{sentence(rng)}</think>"
        elif roll < 0.2:
            reply = f"<think>{sentence(rng)}</think>{reply}"
        append("assistant", reply)

    # Every message that left the store had been folded (or pruned) before it left: none was lost.
    left_store = len(appended) - CHAT_CAP
    for number in range(left_store):
        seen = ever[number]
        assert seen[Disposition.FOLDED] == 1 or seen[Disposition.PRUNED], f"message {number} lost"
    assert sum(c[Disposition.FOLDED] for c in ever.values()) > 1500
    assert sum(1 for c in ever.values() if c[Disposition.PRUNED]) > 10
