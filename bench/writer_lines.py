"""The memory writer alone on the eval's lines: facts captured, junk writes, corrections, with no replies.

The writer pass decides on the player's line and the memory so far, never on the NPC's reply, so running
only the passes, line by line in order, gives the memory `bench/memory_eval.py`'s (c) ends with (same
model, temperature 0) in a fraction of its time. For iterating on the writer (turns/writer/decision.py);
the figures to report come from the eval itself.

Run: `nice -n 10 .venv/bin/python bench/writer_lines.py [--conversations N] [--show]`
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.memory_eval import DATA, ConfigResult, count_lines, fraction, load_conversations, score_memory  # noqa: E402
from pyruntime.cli.chat import free_port  # noqa: E402
from pyruntime.memory import MemoryTool  # noqa: E402
from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.client.queue import ModelRequestQueue  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config  # noqa: E402
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores  # noqa: E402
from pyruntime.turns.writer.passes import run_memory_pass  # noqa: E402

ROLE = "SmartChat"


async def run(conversations: Sequence, base_url: str, api_key: str | None, show: bool) -> ConfigResult:
    """The passes of every line, conversation by conversation, scored as the eval scores (c)."""
    result = ConfigResult("c")
    count_lines(result, conversations)
    stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
    queue = ModelRequestQueue()
    async with OpenAICompatClient(base_url, api_key=api_key) as client:
        for conversation in conversations:
            key = f"writer-lines-{conversation.id}"
            tool = MemoryTool(stores.memory, key)
            writes: list[str] = []
            before = ""
            for line in conversation.lines:
                outcome = await run_memory_pass(client, queue, tool, ROLE, line.text)
                result.model_calls += outcome.model_calls
                loaded = stores.memory.try_load(key)
                memory = loaded.state.memory if loaded.state is not None else ""
                added = set(memory.splitlines()) - set(before.splitlines())
                if memory != before:
                    writes.append("\n".join(sorted(added)))
                before = memory
                if show:
                    print(f"  {conversation.id} {line.kind:10} {line.text!r} -> {outcome.summary()}", file=sys.stderr)
            score_memory(result, conversation, before, writes)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Print captured / junk / corrections for the writer alone."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--show", action="store_true", help="print every line's outcome")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data, args.conversations)
    server = LlamaServerProcess(hosted_model_config(None, port=free_port(), n_threads=args.threads))
    server.start()
    began = time.perf_counter()
    try:
        r = asyncio.run(run(conversations, server.base_url, server.api_key, args.show))
    finally:
        server.stop()
    print(f"captured {fraction(r.captured, r.facts)}, junk {fraction(r.junk_writes, r.nothing_lines)}, "
          f"corrections {fraction(r.corrections_applied, r.corrections)}, example copies {r.example_copies}, "
          f"model calls {r.model_calls}; {len(conversations)} conversations, {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
