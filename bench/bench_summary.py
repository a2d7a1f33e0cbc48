"""Can the model write the rolling summary? The LLM-assisted fold against the deterministic one, per conversation.

The scripted game conversations of `bench/data/memory_conversations.json` (players state facts, correct
some of them, make small talk), each folded in two steps the way the runtime folds a long conversation
(the first half, then the second half onto that summary), once by the LLM-assisted fold (the exact
request the runtime sends: `history.llm_fold`, the summarizer prompt, temperature 0.15, at most 512
tokens; the hosted embedded SmolLM2-135M by default) and once by the deterministic fold (`fold.py`,
the summary shape the runtime uses). The NPC's side of each exchange is a short stock reply.

Per approach: the summary's tokens against what it replaces (the folded messages as sent verbatim);
facts kept (every key of a fact not corrected later is in the final summary, case-insensitive);
corrections applied (the new keys there, the old ones not); blank or failed calls; the time of each
LLM call (noisy on a shared machine). The runtime accepts an LLM summary only when it is smaller than
what it replaces and keeps most names and numbers the player gave (else it falls back to the deterministic
fold, `llm_fold.summary_rejection`): how often that held is reported too.

Run: `nice -n 10 .venv/bin/python bench/bench_summary.py [--conversations 12] [--model PATH]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.history import HeuristicTokenCounter, LlamaTokenCounter, LlmCompactionOptions  # noqa: E402
from pyruntime.history.budget import summary_bound_tokens  # noqa: E402
from pyruntime.history.fold import SummaryShape, deterministic_fold  # noqa: E402
from pyruntime.history.llm_fold import (  # noqa: E402
    build_compaction_payload,
    compaction_messages,
    salient_terms,
    summary_rejection,
)
from pyruntime.history.messages import HistoryMessage  # noqa: E402
from pyruntime.history.tokens import count_message_tokens  # noqa: E402
from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.hosting.embedded import EMBEDDED_MODEL_ALIAS, embedded_model_path  # noqa: E402
from pyruntime.model.hosting.llama_server import LlamaServerConfig  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess  # noqa: E402
from tests.support.fixtures import free_port  # noqa: E402

CONTEXT_TOKENS = 8192
REPLIES = ["Aye, I hear you.", "Hm. Go on.", "Is that so?", "Right, noted.", "Ha! Fair enough.", "I see."]


@dataclass
class Score:
    """One approach over the conversations."""

    name: str
    ratios: list[float] = field(default_factory=list)  # summary tokens / tokens it replaces
    facts: int = 0
    facts_kept: int = 0
    corrections: int = 0
    corrections_applied: int = 0
    blank: int = 0
    accepted: int = 0  # summaries the runtime would take (`llm_fold.summary_rejection`: smaller, names kept)
    seconds: list[float] = field(default_factory=list)


def dialogue(conversation: dict[str, Any]) -> list[HistoryMessage]:
    """The player's lines, each followed by a short stock reply of the NPC."""
    out = []
    for index, line in enumerate(conversation["lines"]):
        out += [HistoryMessage("user", line[1]), HistoryMessage("assistant", REPLIES[index % len(REPLIES)])]
    return out


def judge(score: Score, conversation: dict[str, Any], summary: str) -> None:
    """Count the facts and corrections the final summary keeps."""
    text = summary.lower()
    lines = conversation["lines"]
    corrected_slots = {line[2] for line in lines if line[0] == "correction"}
    for line in lines:
        if line[0] == "fact" and line[2] not in corrected_slots:
            score.facts += 1
            score.facts_kept += all(key.lower() in text for key in line[3])
        elif line[0] == "correction":
            score.corrections += 1
            score.corrections_applied += all(k.lower() in text for k in line[3]) and not any(
                k.lower() in text for k in line[4])


async def llm_summary(client: OpenAICompatClient, prior: str, messages: list[HistoryMessage],
                      options: LlmCompactionOptions, score: Score) -> str:
    payload = build_compaction_payload(prior, messages, options)
    began = time.perf_counter()
    completion = await client.chat(compaction_messages(payload, options), temperature=options.temperature,
                                   max_tokens=options.max_output_tokens)
    score.seconds.append(time.perf_counter() - began)
    return completion.text.strip()


async def run(conversations: list[dict[str, Any]], model: Path, counter: Any, show: int = 0) -> tuple[Score, Score]:
    options = LlmCompactionOptions()
    shape = SummaryShape(counter, limit_tokens=summary_bound_tokens(CONTEXT_TOKENS), target_ratio=0.5)
    llm, det = Score("LLM-assisted (summarizer call)"), Score("deterministic (fold.py shape)")
    config = LlamaServerConfig(model_path=model, alias=EMBEDDED_MODEL_ALIAS, port=free_port())
    with LlamaServerProcess(config) as server:
        async with OpenAICompatClient(server.base_url, model=EMBEDDED_MODEL_ALIAS, api_key=server.api_key) as client:
            for conversation in conversations:
                messages = dialogue(conversation)
                half = len(messages) // 2 // 2 * 2
                replaced = sum(count_message_tokens(counter, m.content) for m in messages)
                llm_text = ""
                blank = False
                for part in (messages[:half], messages[half:]):
                    step = await llm_summary(client, llm_text, part, options, llm)
                    blank = blank or not step
                    llm_text = step or llm_text
                llm.blank += blank
                det_text = ""
                for part in (messages[:half], messages[half:]):
                    det_text = deterministic_fold(det_text, part, shape).body
                for score, text in ((llm, llm_text), (det, det_text)):
                    tokens = counter.count(text) if text else 0
                    score.ratios.append(tokens / replaced)
                    score.accepted += bool(text) and not summary_rejection(text, replaced, tokens,
                                                                           salient_terms(messages))
                    judge(score, conversation, text)
                print(f"  {conversation['id']}: LLM {counter.count(llm_text) if llm_text else 0} / deterministic "
                      f"{counter.count(det_text)} / verbatim {replaced} tokens", flush=True)
                if show > 0:
                    show -= 1
                    print(f"    LLM: {llm_text!r}\n    deterministic: {det_text!r}", flush=True)
    return llm, det


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the embedded SmolLM2-135M)")
    parser.add_argument("--show", type=int, default=2, help="print the summaries of the first N conversations")
    args = parser.parse_args()
    data = json.loads((ROOT / "bench/data/memory_conversations.json").read_text(encoding="utf-8"))
    conversations = data["conversations"][: args.conversations]
    model = args.model or embedded_model_path()
    try:
        counter: Any = LlamaTokenCounter(model)
    except Exception:  # noqa: BLE001 - a model without a tokenizer we can load: the estimate
        counter = HeuristicTokenCounter()
    llm, det = asyncio.run(run(conversations, model, counter, args.show))
    print(f"\n{len(conversations)} conversations, two folds each, {model.name}")
    print("| approach | summary / replaced tokens, median | accepted by the runtime | facts kept | corrections "
          "applied | blank | call s, median |\n|---|---|---|---|---|---|---|")
    for s in (llm, det):
        seconds = f"{statistics.median(s.seconds):.1f}" if s.seconds else "-"
        print(f"| {s.name} | {statistics.median(s.ratios):.2f} | {s.accepted}/{len(conversations)} | "
              f"{s.facts_kept}/{s.facts} | {s.corrections_applied}/{s.corrections} | {s.blank} | {seconds} |")
    print("\nRun: nice -n 10 .venv/bin/python bench/bench_summary.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
