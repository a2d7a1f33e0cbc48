"""The design note's request layout, kept for the benchmarks that compare it with the runtime's.

The note's order (the one contract §7 departs from): system prompt, `## Conversation Summary`,
the history, then one tail message with every block — request instructions, `## Memory` (the
snapshot), `## Memory (updates)` (the cumulative delta), tool availability, world state — and the
player's line. The runtime's own layout (`pyruntime.turns.planning.prompt.assemble_messages`) puts the snapshot
and the summary in a head before the history and each memory change in a note of its own (the reasons are
in docs/design/prompt-layout.md, the figures in docs/benchmarks.md#prompt-layout). With
`compaction_target_ratio=1.0` (no hysteresis) this is the design note's runtime:

    build_orchestrator(..., assemble=assemble_design_note, compaction_target_ratio=1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyruntime.history.messages import HistoryMessage
from pyruntime.turns.planning.prompt import TailBlocks, context_message, history_message, summary_block

NO_HYSTERESIS = 1.0  # the compaction_target_ratio of the design note: fold only what does not fit


def assemble_design_note(
    *,
    system_prompt: str,
    summary: str = "",
    history: Sequence[HistoryMessage | Mapping[str, str]] = (),
    tail: TailBlocks = TailBlocks(),
    user_payload: str = "",
    system_messages_after_first: bool = True,
    tail_after: int | None = None,  # the runtime's places: the design note has none (the tail is always last)
    notes_after: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """The messages of one request in the design note's order (`assemble_messages`' signature)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    for text in (summary_block(summary), *history, "\n\n".join(tail.render())):
        if isinstance(text, str):
            if text:
                messages.append(context_message(text, system_messages_after_first=system_messages_after_first))
        else:
            messages.append(history_message(text))
    if user_payload:
        messages.append({"role": "user", "content": user_payload})
    return messages
