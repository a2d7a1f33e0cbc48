"""The memory eval's smoke run (5 conversations, every configuration): its mechanics, not the model's quality."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.memory_eval import CONFIGS, LABELS, copies, has_key, load_conversations
from pyruntime.turns.writer.decision import only_questions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONS = 5
EVAL_TIMEOUT_S = 1800  # 5 conversations x 4 configurations of SmolLM2 turns on a shared 2-core machine


def test_has_key_and_copies() -> None:
    assert has_key("Player's order: four honey cakes", "honey cake")  # a plural counts
    assert has_key("owes 25 gold", "25") and not has_key("owes 250 gold", "25")  # numbers are whole words
    assert not has_key("Hedda", "Edda")  # a key starts a word
    assert copies("Your name is Zed.") and copies("I will remember Shadowfax") and not copies("Zedekiah")


def test_the_data_file_has_forty_conversations_with_every_kind_of_line() -> None:
    conversations = load_conversations()
    assert len(conversations) >= 40
    kinds = {line.kind for c in conversations for line in c.lines}
    assert kinds == {"chat", "question", "fact", "correction"}
    for conversation in conversations:
        assert conversation.recall, conversation.id
        for line in conversation.lines:
            # A key is in its own line (the naive baseline must be able to capture it).
            assert all(has_key(line.text, k) for k in line.keys), (conversation.id, line.text)
        for correction in conversation.corrections():
            assert any(f.slot == correction.slot for f in conversation.lines if f.kind == "fact"), conversation.id


@pytest.mark.timeout(EVAL_TIMEOUT_S + 60)
def test_smoke_run_of_every_configuration(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    run = subprocess.run(
        [sys.executable, "bench/memory_eval.py", "--conversations", str(CONVERSATIONS), "--max-tokens", "16",
         "--out", str(out), "--work-dir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=EVAL_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    results = {r["name"]: r for r in report["results"]}
    assert set(results) == set(CONFIGS)
    for label in (LABELS[name] for name in CONFIGS):
        assert label in run.stdout  # the table
    conversations = load_conversations(limit=CONVERSATIONS)
    lines = sum(len(c.lines) for c in conversations)
    facts = sum(len(c.kept_facts()) for c in conversations)
    recall = sum(len(c.recall) for c in conversations)
    for name, result in results.items():
        assert result["turns"] == lines and len(result["latencies"]) == lines, name
        assert result["facts"] == facts and result["recall_questions"] == recall, name
        assert 0 <= result["recalled"] <= recall, name
        assert result["model_calls"] >= lines and result["prompt_tokens"] > 0, name
        assert set(result["recall_replies"]) == {c.id for c in conversations}, name
    # (a) has no memory document: its memory metrics are not numbers.
    assert results["a"]["captured"] is None and results["a"]["junk_writes"] is None
    # (b) is deterministic: every statement is written down, so every kept fact is captured, no correction
    # removes the old value, and every statement without a key is a junk write.
    naive = results["b"]
    assert naive["captured"] == facts and naive["corrections_applied"] == 0
    expected_junk = sum(1 for c in conversations for line in c.lines
                        if not only_questions(line.text) and not any(has_key(line.text, k) for k in c.all_keys()))
    assert naive["junk_writes"] == expected_junk
    # The naive game writes its notes before it answers; (c) captures once its writes land (WaitMemoryWrites).
    assert naive["captured_at_return"] == naive["captured_when_written"] == facts
    assert results["c"]["captured_at_return"] <= results["c"]["captured_when_written"] <= facts
    assert results["a"]["captured_at_return"] is None
    # Recall ran twice for (a), (b), (c): with the saved history and without it (memory or notes only).
    for name in ("a", "b", "c"):
        assert 0 <= results[name]["recalled_without_history"] <= recall, name
        assert set(results[name]["recall_replies_without_history"]) == {c.id for c in conversations}, name
    # (c) and (d): the memory documents are the writer's labelled lines, read back from disk.
    for name in ("c", "d"):
        for memory in results[name]["memories"].values():
            assert all(line.startswith("Player's ") for line in memory.splitlines()), (name, memory)
        # One reply, at most one pass and one prewarm per line (the hosted profile's --prewarm on).
        assert results[name]["model_calls"] <= 3 * lines
    # Recall ran in new processes: none of the processes that held the conversations.
    for name in ("a", "c", "d"):
        assert results[name]["recall_pids"] and not set(results[name]["recall_pids"]) & set(
            results[name]["conversation_pids"]), name
    assert "Command: nice -n 10 .venv/bin/python bench/memory_eval.py --conversations 5" in run.stdout
