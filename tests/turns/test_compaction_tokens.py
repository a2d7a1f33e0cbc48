"""The long-session token targets on a scripted session, counted with SmolLM2's own tokenizer (deterministic,
no decoding).

`bench/compaction_tokens.py` plays `bench_npcs.py`'s session (one NPC, a 10-message window, a fact every
8 turns) through the runtime as `build_orchestrator` wires it and as the naive game sends it, and
counts the prompt tokens sent and those llama.cpp's KV sequence evaluates. The figures are in
docs/benchmarks.md#compaction-tokens-sent-and-evaluated; this keeps them from sliding back.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from bench.bench_npcs import Setup
from bench.compaction_tokens import compare, naive_counts, runtime_counts
from pyruntime.history import LlamaTokenCounter
from pyruntime.model.hosting.embedded import embedded_model_path


@pytest.fixture(scope="module")
def counted() -> tuple[Setup, object, object]:
    model = embedded_model_path()
    counter = LlamaTokenCounter(model)
    setup = Setup(1, 1, 40, 10, 8, 10)
    return setup, asyncio.run(runtime_counts(setup, 200, counter, model)), naive_counts(setup, 200, counter)


def test_past_the_window_the_runtime_sends_fewer_prompt_tokens_than_the_naive_game(counted) -> None:
    setup, runtime, naive = counted
    c = compare(setup, runtime, naive)
    assert c.sent_ratio <= 0.7, c  # 0.54 measured
    assert c.sent_over == 0, c  # with 200-char replies, on no turn past the window
    # Bounded: the runtime's prompt stops growing with the conversation, the naive game's does not.
    assert max(runtime.sent[-10:]) < 1.5 * statistics.median(runtime.sent[c.past:])
    assert naive.sent[-1] > 2 * runtime.sent[-1]


def test_no_turn_evaluates_the_compaction_while_the_player_waits(counted) -> None:
    setup, runtime, naive = counted
    c = compare(setup, runtime, naive)
    assert c.evaluated_ratio <= 1.0, c  # 0.88
    # Before: every compaction turn with a memory edit re-evaluated the head and the history (174-276 tokens).
    assert c.evaluated_max_over_median <= 3.0, c  # 2.0 (the writer design's memory-last layout)
    assert max(runtime.evaluated[1:]) < 100


def test_with_the_memory_tool_an_edit_on_a_folds_turn_costs_its_note_not_the_tail_again() -> None:
    # The tool design (the memory tool's contract in the system prompt, the memory in the head and in notes), as
    # bench_npcs.py --memory-design tool plays it: the game's edit comes on the turn that sends a fold made between
    # turns. Before, its note went before the re-placed tail, and the tail was evaluated again (84 tokens, 3.5x).
    model = embedded_model_path()
    counter = LlamaTokenCounter(model)
    setup = Setup(1, 1, 40, 10, 8, 10)
    runtime = asyncio.run(runtime_counts(setup, 60, counter, model, "tool"))
    c = compare(setup, runtime, naive_counts(setup, 60, counter))
    assert c.evaluated_max_over_median <= 3.0, c  # 2.6 measured (62 tokens)
    assert max(runtime.evaluated[1:]) < 70, runtime.evaluated
