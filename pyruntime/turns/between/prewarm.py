"""Warm the next turn's prefix while the player reads the reply (docs/design/prompt-layout.md).

Past the history window most turns only append, but a turn that compacts changes the head message
(new summary, memory notes folded into the head), so llama.cpp evaluates the head and the whole history
again while the player waits. After a turn (and its memory writer pass) the orchestrator predicts
the next turn's request for the same conversation with the same preparation it would run, and when
its prefix differs from what llama.cpp holds, sends that prefix - everything but the player's line:
the system prompt, the head, the history, the tail blocks - as a one-token request behind player
turns (`Priority.BACKGROUND`). llama.cpp evaluates it then; the hosted server's prompt cache (or its
KV cache) keeps it, and the next turn evaluates only the player's line. The tail is predicted from
this turn's request (world state, instructions, tools): when the next one differs, the next turn
evaluates it, as it would have anyway.

It is a pure prediction: nothing is stored. Committing the predicted compaction now would take the
fold out of the next turn's cut report, persist a summary no successful turn has sent (contract §5), and
fold by a budget that depends on the next player line, which is not known yet. A wrong prediction
costs one background request and changes nothing a turn sends, stores or reports.

This module is the pure part and the bookkeeping; the prediction itself is the orchestrator's own
preparation (`RequestPlanner.predict_prefix`, turns/planning/planner.py), so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.model.client.queue import ModelRequestQueue, Preempted, Priority
from pyruntime.model.client.seam import ModelClient
from pyruntime.model.client.types import UsageDelta

log = logging.getLogger("pyruntime.turns")

PREWARM_MAX_TOKENS = 1  # llama.cpp must evaluate the prompt; one token is the least a completion generates
DRAIN_TIMEOUT_S = 60.0


def needs_prewarm(prefix: Sequence[dict[str, Any]], sent: Sequence[dict[str, Any]], *, displaced: bool) -> bool:
    """True unless llama.cpp already holds `prefix`: the request this turn sent starts it, and no other came since.

    `displaced`: another request (the memory writer pass) ran after the turn, so the single KV cache
    holds that one's prompt (a prompt cache may still hold the turn's; a prewarm then costs little).
    """
    if displaced:
        return True
    return len(prefix) < len(sent) or list(prefix[: len(sent)]) != list(sent)


RECENT_TURNS = 2  # turns looked at to tell a dialogue (one conversation) from NPCs taking turns


def prompt_cache_has_room(status: Mapping[str, object]) -> bool | None:
    """Whether the hosted server's RAM prompt cache can hold a prewarm's state without pushing another
    conversation's out: room for two more states of its average size (the prewarm's, and the stale one a
    compaction leaves until it is evicted). None: the server keeps no prompt cache."""
    limit, used, entries = (status.get(k) for k in ("prompt_cache_limit_bytes", "prompt_cache_used_bytes",
                                                     "prompt_cache_entries"))
    if not isinstance(limit, int) or limit <= 0:
        return None
    used = used if isinstance(used, int) and used > 0 else 0
    average = used // entries if isinstance(entries, int) and entries > 0 else 0
    return used + 2 * average <= limit


def in_own_slot(slots: int, recent: Sequence[str], conversation: str) -> bool:
    """Whether a prewarm of `conversation` lands in a slot of its own on an engine of `slots` parallel slots.

    Then it needs no room in the host prompt cache: the conversation keeps its slot while it is warm
    (model/client/slots.py), the prewarm goes there and the next turn looks there; the host cache is llama-server's
    LRU store for conversations that lost their slot, full by design in a long session. Gating on its room
    skipped 180 of 240 prewarms in a 200-turn session (every one after ~60 turns), so each turn evaluated
    the memory block again (440 tokens median against 26; docs/benchmarks.md#long-conversations-against-the-naive-game).
    """
    return slots > 1 and len({*recent, conversation}) <= slots


def worth_prewarming(cache_room: bool | None, recent: Sequence[str], conversation: str) -> bool:
    """Whether a prewarm of `conversation` can pay off (`recent`: the conversations of the last turns).

    With a prompt cache, only while it has room: NPCs in rotation near its budget would otherwise
    evict the very state the next turn needs (least recently used goes first), and every turn goes
    cold. Without one, llama.cpp keeps a single sequence: the next turn of another conversation
    replaces the prewarmed prefix, so only a dialogue (the last turns all this conversation's) gains.
    """
    if cache_room is None:
        return all(c == conversation for c in recent)
    return cache_room


async def send_prewarm(client: ModelClient, queue: ModelRequestQueue, messages: list[dict[str, Any]],
                       still_due: Callable[[], bool], on_sent: Callable[[], None] | None = None, *,
                       conversation: str | None = None) -> int | None:
    """Evaluate `messages` behind player turns: the prompt tokens llama.cpp evaluated (0 when the server
    reports no usage), None when it was no longer due once the model was free.

    The queue hands the slot to a waiting player call first, so a prewarm never starts while one
    waits; a player call that comes while it runs pre-empts it (`Preempted`: its stream is closed,
    and the player's call gets the model; a server that cannot stop a prompt's evaluation halfway
    finishes it first). `on_sent` is called as the request goes out: from then on the model server
    holds (or is evaluating) this prefix, pre-empted or not.
    """
    evaluated = 0
    async with queue.slot(Priority.BACKGROUND, preemptible=True):
        if not still_due():
            return None
        # Streamed for the usage chunk: the hosted server counts cached tokens only there.
        # In the conversation's own slot of the hosted engine, where its next turn will look for it.
        async with client.stream_chat(messages, temperature=0.0, max_tokens=PREWARM_MAX_TOKENS,
                                      conversation=conversation) as stream:
            if on_sent is not None:
                on_sent()
            async for delta in stream:
                if isinstance(delta, UsageDelta):
                    evaluated = delta.usage.prompt_tokens - delta.usage.cached_tokens
    return evaluated


@dataclass
class PrewarmStats:
    """What the prewarms did since start: sent to the model, skipped (warm already, superseded), failed."""

    sent: int = 0
    skipped: int = 0
    failed: int = 0
    preempted: int = 0  # stopped by a player's call (counted as skipped in `counts`)
    evaluated_tokens: int = 0  # prompt tokens the sent prewarms had llama.cpp evaluate (work moved off turns)

    def counts(self) -> tuple[int, int, int]:
        """(sent, skipped, failed), as `/metrics` reports them."""
        return self.sent, self.skipped + self.preempted, self.failed


class Prewarms:
    """The work between turns still running (prewarms, and the folds before them), one due per conversation;
    a newer turn of it supersedes its prewarm. A conversation's works run one after the other."""

    def __init__(self) -> None:
        """None yet."""
        self.stats = PrewarmStats()
        self._running: set[asyncio.Task[None]] = set()
        self._due: dict[str, object] = {}  # conversation -> the token of its one prewarm still due
        self._last: dict[str, asyncio.Task[None]] = {}  # conversation -> its latest work, while it runs
        self._of: dict[str, set[asyncio.Task[None]]] = {}  # conversation -> its works still running

    @property
    def pending(self) -> int:
        """Prewarms not finished yet."""
        return len(self._running)

    def supersede(self, conversation: str) -> None:
        """A turn of `conversation` starts: a prewarm still waiting for it is no longer due."""
        self._due.pop(conversation, None)

    def start(self, conversation: str, work: Callable[[Callable[[], bool]], Awaitable[int | None]]) -> None:
        """Run `work(still_due)` in the background, after the conversation's earlier work: the tokens a sent
        prewarm evaluated, None skipped.

        A failure is counted and logged by its type only (a model or store message may quote game text).
        """
        token = object()
        self._due[conversation] = token
        previous = self._last.get(conversation)

        def still_due() -> bool:
            return self._due.get(conversation) is token

        async def run() -> None:
            try:
                if previous is not None and not previous.done():
                    await asyncio.wait({previous})  # one fold at a time per conversation: this one builds on it
                outcome = await work(still_due)
            except asyncio.CancelledError:
                raise
            except Preempted:  # a player's call took the model: the next turn evaluates its prefix itself
                self.stats.preempted += 1
                return
            except Exception as exc:  # noqa: BLE001 - never a turn's failure: the next turn evaluates its prefix itself
                self.stats.failed += 1
                log.warning("prewarm failed (%s)", type(exc).__name__)
                return
            finally:
                if still_due():
                    del self._due[conversation]
            if outcome is None:
                self.stats.skipped += 1
            else:
                self.stats.sent += 1
                self.stats.evaluated_tokens += outcome

        task = asyncio.ensure_future(run())
        self._running.add(task)
        self._last[conversation] = task
        self._of.setdefault(conversation, set()).add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._running.discard(finished)
            if self._last.get(conversation) is finished:
                del self._last[conversation]
            mine = self._of.get(conversation)
            if mine is not None:
                mine.discard(finished)
                if not mine:
                    del self._of[conversation]

        task.add_done_callback(done)

    async def forget(self, conversation: str) -> None:
        """Stop every work of `conversation` (its saves are being erased): nothing of it is evaluated again."""
        self.supersede(conversation)
        tasks = set(self._of.get(conversation, ()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Wait (up to `timeout` s) for the running prewarms."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)

    async def cancel(self) -> None:
        """Stop the running prewarms (shutdown: nobody will take the next turn)."""
        tasks = set(self._running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
