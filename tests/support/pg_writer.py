"""A runtime process writing one save of a shared PostgreSQL store (for the multi-process tests).

`python -m tests.support.pg_writer URL MODE KEY WORKER COUNT`; prints `ack <i>` once call i returned
(the write is acknowledged), or `inside` when it stopped in the middle of a transaction to be killed.

- `write`: COUNT times: mutate (append line `w<WORKER>-<i>` to the memory), then one transcript append
  of three rows (tool call, tool result, chat), all tagged `w<WORKER>-<i>`.
- `die-in-append`: one three-row append that stops after its rows are inserted, before its commit.
- `die-in-mutate`: one mutate of a new key that stops after its row is created, before its commit.
"""

from __future__ import annotations

import sys
import time
from functools import partial

from pyruntime.memory.state import AgentMemoryState
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.postgres import PostgresAgentMemoryStore, PostgresDatabase


def rows(tag: str) -> list[TranscriptEntry]:
    """The three rows one call appends."""
    return [TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", tag, call_id=tag),
            TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", tag, call_id=tag),
            TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", tag, is_chat_message=True)]


def _with_tag(tag: str, state: AgentMemoryState) -> AgentMemoryState:
    """The memory with one more line, `tag`."""
    return state.evolve(memory=f"{state.memory}\n{tag}" if state.memory else tag)


def _stop_here(*_args: object) -> None:
    print("inside", flush=True)
    time.sleep(600)  # killed by the test long before


def main(url: str, mode: str, key: str, worker: int, count: int) -> None:
    """Run one mode (see the module docstring)."""
    db = PostgresDatabase(url, pool_size=2, lock_timeout=30.0)
    store = PostgresAgentMemoryStore(db)
    if mode == "write":
        for i in range(count):
            tag = f"w{worker}-{i}"
            store.mutate(key, partial(_with_tag, tag))
            store.append_transcript(key, rows(tag))
            print(f"ack {i}", flush=True)
    elif mode == "die-in-append":
        store.trim_every = 1  # _trim runs inside the append's transaction, after its inserts
        # the fault injected: the process stops inside the append's transaction
        PostgresAgentMemoryStore._trim = lambda self, conn, key: _stop_here()  # type: ignore[method-assign]
        store.append_transcript(key, rows(f"w{worker}-dead"))
    elif mode == "die-in-mutate":
        store.mutate(key, lambda s: _stop_here())
    else:
        raise SystemExit(f"unknown mode {mode}")
    db.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
