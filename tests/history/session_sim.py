"""Generated game sessions over the runtime's own history code, checking the history's invariants after every turn.

Everything but the model is real: stores (in-memory, or files with small caps that trim, reopened
to simulate a restart), recording (`record_turn`), the pipeline, prompt assembly and the fit to the
context (`turns.context`). The player's lines, the replies, tool results and the compactor's
output come from the generated plan; token counts use the length heuristic, which is then also
"the model's tokenizer" the request must fit.

Invariants checked after every turn (a violation is a string naming it; no content is needed):
- the request as sent fits the model's context with its completion reserve;
- every stored message has exactly one disposition, consistent with the fold history: a message
  is folded at most once, never sent or folded after it was folded, and only a folded message is
  "already folded"; none is left out; none leaves the store's window unfolded;
- the history sent is the stored SENT messages in order, placed where the request has them;
- the stored summary is exactly what the compactor produced (the deterministic fold or the
  clipped LLM reply), within the stored limit that depends on the model's context only; the summary
  sent is it or its newest suffix;
- the fold marker names the last folded message; the cut report and the turn's log line agree with
  the dispositions.

Used by `tests/history/test_history_properties.py` (bounded) and `bench/history_properties.py` (long).
"""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from pyruntime.history.budget import (
    COMPACTION_TARGET_RATIO,
    stored_summary_tokens,
    summary_bound_tokens,
    summary_cut_tokens,
)
from pyruntime.history.fold import SummaryShape, deterministic_fold, limit_summary_tokens
from pyruntime.history.fold_marker import anchor_of, split_marker
from pyruntime.history.llm_fold import LlmCompactionOptions, clip_summary
from pyruntime.history.messages import HistoryMessage
from pyruntime.history.pipeline import Disposition, PreparedHistory, prepare_scoped_turn_history
from pyruntime.history.prune import strip_think
from pyruntime.history.tokens import HeuristicTokenCounter, count_chat_tokens
from pyruntime.policy import RoleMemoryConfig, ToolResultMemory
from pyruntime.stores import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.turns.planning.context import (
    FixedPartOverflowError,
    fit_history,
    fit_request,
    history_budget,
    summary_block_overhead,
)
from pyruntime.turns.planning.prompt import TailBlocks, assemble_messages, history_message
from pyruntime.turns.recording import TurnRecord, record_turn
from pyruntime.turns.rounds.rules import CallOutcome, ExecutedCall

ROLE = "Innkeeper"
SYSTEM_PROMPT = "You are the innkeeper of the Prancing Goat. Answer briefly and stay in character."
TAIL = TailBlocks(memory="Player name: Alex\nOwes 3 gold", world_state="Night, rain")
COUNTER = HeuristicTokenCounter()
OPTIONS = LlmCompactionOptions()
_WINDOW_LINE = re.compile(
    r"history window: (\d+) stored message\(s\) -> (\d+) sent verbatim"
    r"(?:, (\d+) pruned \([^)]*\))?(?:, (\d+) folded into the rolling summary \(~\d+ tokens sent\))?"
    r"(?:, (\d+) deferred to the next compaction)?"
)

# Small pools make exact repeats (greetings, identical answers, identical tool results) likely.
HINTS = ["hi", "hello", "hi", "What's new?", "bye", "Any rooms free?", "I'll take the ale.", ""]
REPLIES = ["Hello traveler!", "", "<think>who is this</think>Welcome back.", "<think>only thinking</think>",
           "Welcome back.", "The mine collapsed last night."]
RESULTS = ["Sword: Dawnbreaker", "Shield: Oak", "rolled a 6", "error: old_text was not found in memory"]


@dataclass(frozen=True)
class TurnPlan:
    """One turn: the player's line, the reply, tool rounds ((name, success, content) per call), what happens."""

    hint: str
    reply: str
    rounds: tuple[tuple[tuple[str, bool, str], ...], ...] = ()
    completed: bool = True  # False: the turn failed (the hint is recorded, no summary is committed)
    restart_before: bool = False


@dataclass(frozen=True)
class SessionPlan:
    """One generated session and the settings it runs under."""

    turns: tuple[TurnPlan, ...]
    model_ctx: int = 8192
    max_output: int | None = None
    max_messages: int = 30
    persistent: bool = True
    chat_cap: int = 500
    transcript_cap: int = 2000
    compactor: str = "off"  # off | ok | long | fail | blank
    tool_result_memory: ToolResultMemory = ToolResultMemory.COMPACT_SUMMARY
    target_ratio: float = 1.0  # compaction hysteresis (1.0: fold only what does not fit)


@dataclass
class Tally:
    """Counts over sessions: what ran and what broke an invariant."""

    sessions: int = 0
    turns: int = 0
    refused_turns: int = 0  # the fixed part did not fit: refused at once, as the orchestrator does
    messages: int = 0  # stored messages checked, summed over turns
    folds: int = 0
    restarts: int = 0
    violations: list[str] = field(default_factory=list)


# --- strategies ------------------------------------------------------------------------------------

def _text(pool: list[str], long_chars: tuple[int, int]) -> st.SearchStrategy[str]:
    long = st.integers(*long_chars).map(lambda n: ("word " * (n // 5 + 1))[:n])
    return st.one_of(st.sampled_from(pool), st.sampled_from(pool), st.sampled_from(pool), long)


_calls = st.tuples(st.sampled_from(["memory", "roll"]), st.booleans(), st.sampled_from(RESULTS))
turn_plans = st.builds(
    TurnPlan,
    hint=_text(HINTS, (40, 2400)),
    reply=_text(REPLIES, (40, 1200)),
    rounds=st.lists(st.lists(_calls, min_size=1, max_size=2).map(tuple), max_size=2).map(tuple),
    completed=st.sampled_from([True] * 9 + [False]),
    restart_before=st.sampled_from([False] * 7 + [True]),
)


@st.composite
def session_plans(draw: st.DrawFn, max_turns: int = 24) -> SessionPlan:
    """Sessions with repeats, tool rounds, tight and loose budgets, restarts and file-cap trimming."""
    max_messages = draw(st.integers(2, 12))
    persistent = draw(st.booleans())
    # The store's window holds at least two unfolded windows (unfolded <= kept + pruned between them).
    chat_cap = draw(st.integers(2 * max_messages + 8, 2 * max_messages + 40))
    return SessionPlan(
        turns=tuple(draw(st.lists(turn_plans, min_size=1, max_size=max_turns))),
        model_ctx=draw(st.sampled_from([512, 1024, 2048, 8192])),
        max_output=draw(st.sampled_from([None, 16, 64, 300])),
        max_messages=max_messages,
        persistent=persistent,
        chat_cap=chat_cap,
        transcript_cap=draw(st.integers(chat_cap, chat_cap * 3)),
        compactor=draw(st.sampled_from(["off", "off", "ok", "long", "fail", "blank"])),
        tool_result_memory=draw(st.sampled_from(list(ToolResultMemory))),
        target_ratio=draw(st.sampled_from([1.0, COMPACTION_TARGET_RATIO, 0.2])),
    )


# --- running ---------------------------------------------------------------------------------------

class _Compactor:
    """The auxiliary model of the LLM fold, scripted: a short or an over-long summary, a failure, a blank."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reply: str | None = None

    async def __call__(self, messages: list[dict[str, str]], options: object) -> str:
        payload = messages[-1]["content"]
        lines = payload.count("\n")
        if self.kind == "fail":
            raise RuntimeError("compactor down")
        self.reply = {"ok": f"The player and the innkeeper talked ({lines} lines, {len(payload)} chars).",
                      "long": "They talked at length about the inn. " * 150, "blank": "  "}[self.kind]
        return self.reply


class _WindowLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("history window:"):
            self.lines.append(message)


@contextmanager
def _captured() -> Iterator[_WindowLog]:
    logger = logging.getLogger("pyruntime.history")
    handler, level = _WindowLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _open(plan: SessionPlan, folder: Path) -> StoreBundle:
    mode = AgentMemoryPersistenceMode.PERSISTENT if plan.persistent else AgentMemoryPersistenceMode.SESSION_ONLY
    return open_stores(mode, folder if plan.persistent else None, chat_cap=plan.chat_cap,
                       transcript_cap=plan.transcript_cap)


def _rounds(turn: TurnPlan, index: int) -> list[list[ExecutedCall]]:
    return [
        [ExecutedCall(f"t{index}r{r}c{c}", name, "{}", CallOutcome(ok, content, content))
         for c, (name, ok, content) in enumerate(calls)]
        for r, calls in enumerate(turn.rounds)
    ]


async def run_session(plan: SessionPlan, folder: Path, tally: Tally) -> None:
    """Run one session, appending every invariant violation to `tally.violations`."""
    stores = _open(plan, folder)
    config = RoleMemoryConfig(ROLE, max_chat_history_messages=plan.max_messages, persist_chat_history=True)
    folded: dict[int, int] = {}  # store order -> times folded by a committed turn
    seen: set[int] = set()  # orders seen stored (not yet folded) in earlier turns
    tally.sessions += 1
    for index, turn in enumerate(plan.turns):
        if turn.restart_before:
            tally.restarts += 1
            stores = _open(plan, folder)
            if not plan.persistent:  # a session-only history is gone with its process
                folded.clear()
                seen.clear()
        tally.turns += 1
        problems = await _turn(plan, stores, config, turn, index, folded, seen, tally)
        tally.violations += [f"turn {index}: {p}" for p in problems]


async def _turn(plan: SessionPlan, stores: StoreBundle, config: RoleMemoryConfig, turn: TurnPlan, index: int,
                folded: dict[int, int], seen: set[int], tally: Tally) -> list[str]:
    scoped = stores.scoped()
    problems: list[str] = []
    fixed_messages = assemble_messages(system_prompt=SYSTEM_PROMPT, tail=TAIL, user_payload=turn.hint)
    fixed = count_chat_tokens(COUNTER, fixed_messages)
    fit = fit_request(plan.model_ctx, plan.max_output, fixed, summary_block_overhead(COUNTER))
    compactor = _Compactor(plan.compactor)
    logs: list[list[str]] = []

    async def prepare(extra: int) -> PreparedHistory:
        compactor.reply = None
        with _captured() as log:
            prepared = await prepare_scoped_turn_history(
                scoped, ROLE, config=config, counter=COUNTER,
                budget=history_budget(fit, plan.max_output, extra), compact=compactor,
                llm_compaction_enabled=plan.compactor != "off", llm_options=OPTIONS,
                compaction_target_ratio=plan.target_ratio,
            )
        logs.append(log.lines)
        return prepared

    def render(prepared: PreparedHistory | None) -> list[dict[str, str]]:
        return assemble_messages(system_prompt=SYSTEM_PROMPT, summary=prepared.summary_text if prepared else "",
                                 history=prepared.messages if prepared else (), tail=TAIL, user_payload=turn.hint)

    stored = [HistoryMessage.from_chat_message(m) for m in scoped.get_chat_history(ROLE)]
    prior = scoped.load_summary(ROLE)
    refused = fit.room < 0
    prepared: PreparedHistory | None = None
    if not refused:
        try:
            prepared, messages = await fit_history(
                fit, await prepare(0), prepare=prepare, render=render,
                count=lambda m: count_chat_tokens(COUNTER, m), overflow=lambda: FixedPartOverflowError("over"),
            )
        except FixedPartOverflowError:
            refused = True
    if refused:
        tally.refused_turns += 1
    else:
        assert prepared is not None
        tally.messages += len(stored)
        problems += _check(plan, fit, stored, prior, prepared, messages, compactor, logs[-1], folded, seen)
    completed = turn.completed and not refused
    record_turn(scoped, ROLE, TurnRecord(turn.hint, _rounds(turn, index) if completed else (),
                                         turn.reply if completed else None),
                plan.tool_result_memory, persist=True)
    if completed and prepared is not None:
        prepared.commit()
        for message, disposition in zip(stored, prepared.dispositions, strict=False):  # _check reports a mismatch
            if disposition is Disposition.FOLDED:
                folded[message.order] = folded.get(message.order, 0) + 1
                tally.folds += 1
    return problems


def _check(plan: SessionPlan, fit, stored: list[HistoryMessage], prior: str | None, prepared: PreparedHistory,
           messages: list[dict[str, str]], compactor: _Compactor, log_lines: list[str], folded: dict[int, int],
           seen: set[int]) -> list[str]:
    problems: list[str] = []
    sent_tokens = count_chat_tokens(COUNTER, messages)
    if sent_tokens + fit.reserve > fit.max_ctx:
        problems.append(f"request of {sent_tokens} tokens + reserve {fit.reserve} over the {fit.max_ctx}-token context")
    dispositions = prepared.dispositions
    if len(dispositions) != len(stored):
        return problems + [f"{len(dispositions)} dispositions for {len(stored)} stored messages"]

    # Every stored message exactly once, consistent with what earlier turns folded.
    orders = {m.order for m in stored}
    lost = {o for o in seen if o not in orders and not folded.get(o)}
    if lost:
        problems.append(f"{len(lost)} message(s) left the store's window without being folded")
    for message, d in zip(stored, dispositions, strict=True):
        times = folded.get(message.order, 0)
        if times > 1:
            problems.append(f"order {message.order} folded {times} times")
        if d is Disposition.ALREADY_FOLDED and times != 1:
            problems.append(f"order {message.order} counted as already folded but folded {times} times")
        if d is not Disposition.ALREADY_FOLDED and times:
            problems.append(f"order {message.order} was folded before and is now {d.name}")
        if d is Disposition.LEFT_OUT:
            problems.append(f"order {message.order} left out")
    seen.update(m.order for m, d in zip(stored, dispositions, strict=True) if d is not Disposition.ALREADY_FOLDED)

    # The history sent is the SENT messages, in order, where the request has them.
    sent = [m for m, d in zip(stored, dispositions, strict=True) if d is Disposition.SENT]
    if [m.role for m in prepared.messages] != [m.role for m in sent] or any(
        p.content not in (m.content, strip_think(m.content)) for p, m in zip(prepared.messages, sent, strict=True)
    ):
        problems.append("the history sent is not the stored messages marked sent")
    # The head message (memory snapshot, summary) sits between the system prompt and the history.
    start = 2 if prepared.summary_text or TAIL.memory.strip() else 1
    if messages[start : start + len(prepared.messages)] != [history_message(m) for m in prepared.messages]:
        problems.append("the request does not carry the prepared history in place")

    # The stored summary: exactly what the compactor produced, within a limit the request does not set.
    prior_body = split_marker(prior)[0]
    limit = stored_summary_tokens(fit.max_ctx)
    body = prior_body
    report = prepared.cut_report
    folded_now = [m for m, d in zip(stored, dispositions, strict=True) if d is Disposition.FOLDED]
    if report.folded_ids or report.deferred_ids:
        pending_body, anchors = split_marker(prepared.pending_summary)
        if compactor.reply is not None and compactor.reply.strip() and not report.compaction_fell_back:
            produced = clip_summary(compactor.reply.strip(), OPTIONS.max_summary_chars)[0]
        else:
            inputs = [HistoryMessage(m.role, strip_think(m.content)) if m.is_assistant else m for m in folded_now]
            shape = SummaryShape(COUNTER, limit_tokens=summary_bound_tokens(fit.max_ctx),
                                 target_ratio=plan.target_ratio if plan.target_ratio < 1.0 else 1.0)
            produced = deterministic_fold(prior_body, inputs, shape).body
        within = limit_summary_tokens(produced, COUNTER, limit)
        if within.tokens_dropped:  # cut below the limit with hysteresis, so the next folds append
            within = limit_summary_tokens(produced, COUNTER, summary_cut_tokens(limit, plan.target_ratio))
        if pending_body != within.text:
            problems.append("the stored summary is not what the compactor produced within the stored limit")
        if folded_now and (not anchors or anchors[0] != anchor_of(folded_now[-1])):
            problems.append("the fold marker does not name the last folded message")
        body = pending_body
    if prepared.summary_text and not (prepared.summary_text == body or (
        prepared.summary_text.startswith("…") and body.endswith(prepared.summary_text[1:]))):
        problems.append("the summary sent is neither the stored summary nor its newest suffix")

    # The cut report and the log line agree with the dispositions.
    def ids(kind: Disposition) -> list[str]:
        return [m.id for m, d in zip(stored, dispositions, strict=True) if d is kind]

    counts = {kind: dispositions.count(kind) for kind in Disposition}
    if (report.stored_messages, report.sent_verbatim, report.already_folded) != (
        len(stored), counts[Disposition.SENT], counts[Disposition.ALREADY_FOLDED]
    ) or report.sent_verbatim != len(prepared.messages):
        problems.append("the cut report's counts disagree with the dispositions")
    if (report.folded_ids, report.pruned_ids, report.deferred_ids) != (
        ids(Disposition.FOLDED), ids(Disposition.PRUNED), ids(Disposition.DEFERRED)
    ):
        problems.append("the cut report's ids disagree with the dispositions")
    if counts[Disposition.SENT] < len(stored):
        match = _WINDOW_LINE.match(log_lines[-1]) if log_lines else None
        expected = (len(stored), counts[Disposition.SENT], counts[Disposition.PRUNED],
                    counts[Disposition.FOLDED] + counts[Disposition.ALREADY_FOLDED], counts[Disposition.DEFERRED])
        got = tuple(int(g) if g else 0 for g in match.groups()) if match else None
        if got != expected:
            problems.append(f"the log line says {got}, the dispositions {expected}")
    elif log_lines:
        problems.append("a history window line although every stored message was sent")
    return problems


def run_plan(plan: SessionPlan, tally: Tally) -> None:
    """Run one plan in a fresh temporary folder (files are only written for persistent plans)."""
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run_session(plan, Path(folder), tally))
