"""The tool loop's model rounds (contract §7, docs/contract.md): one streamed model call after another.

`ToolRounds.run` takes the turn (`TurnInput`), its offer (`TurnOffer`) and the attempt's request (`TurnPlan`) and
returns the `RoundsOutcome`: it sends the request, streams the visible text of each round as it decodes (in
structured mode, the `reply` field of the JSON), runs the round's tool calls (turns/rounds/rules.py holds
the rules: which tools are offered, how a call runs, when the loop ends) and replays the calls and their
results to the model, until a reply settles the turn. Each round holds the model through the request
queue at player priority; the turn's timeout is paused while it waits there (unless it includes the
queue). A context overflow propagates to the orchestrator, which retries the attempt with less history. What the
rounds streamed so far is kept in the turn's `TurnProgress` (rounds/progress.py), which outlives the attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyruntime.model.client.errors import ModelError
from pyruntime.model.client.queue import ModelRequestQueue, Priority, SlotGrant
from pyruntime.model.client.seam import ModelClient
from pyruntime.model.client.types import ChatCompletionAccumulator, TextDelta, ToolCall
from pyruntime.turns.events import TextDeltaEvent, ToolCallEvent, ToolResultEvent, TurnStatus
from pyruntime.turns.planning.counting import RequestTokens
from pyruntime.turns.request import FORCED_TOOL_REQUIRED
from pyruntime.turns.rounds.modes import (
    ReplyExtractor,
    ToolCallMode,
    native_tool_choice,
    parse_structured_reply,
    structured_schema,
)
from pyruntime.turns.rounds.progress import TurnProgress
from pyruntime.turns.rounds.registry import ToolContext
from pyruntime.turns.rounds.rules import CallOutcome, ExecutedCall, LoopGuard, ToolExecutor, reply_settles_round
from pyruntime.turns.settings import TurnSettings
from pyruntime.turns.turn import Emit, RoundsOutcome, TurnInput, TurnOffer, TurnPlan

log = logging.getLogger("pyruntime.turns")

ROUND_SEPARATOR = "\n\n"  # between the visible text of two model rounds
STRUCTURED_RESULTS_HEADER = "Tool results:"
CLOSING_NOTE = "You cannot use tools any more in this turn: answer the player now, in words."


def closing_messages(mode: ToolCallMode, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of the closing round: native mode says it with `tool_choice`; structured mode tells the model in
    its last user message (the tool results), as no tool call schema does."""
    if mode is ToolCallMode.NATIVE:
        return messages
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        return messages[:-1] + [{**last, "content": f"{last['content']}\n\n{CLOSING_NOTE}"}]
    return messages + [{"role": "user", "content": CLOSING_NOTE}]


@dataclass(frozen=True)
class RoundReply:
    """What one model call gave: the visible text, the tool calls, the assistant message to replay."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    raw: str
    error: str | None = None


class ToolRounds:
    """Runs the model rounds of turns against one model; see the module docstring."""

    def __init__(self, client: ModelClient, queue: ModelRequestQueue, counter: RequestTokens,
                 settings: TurnSettings) -> None:
        """`counter` counts a round's prompt: each tool round makes it longer, the tool allowance takes what is left."""
        self.client = client  # `AiOrchestrator.client` keeps it current
        self.queue = queue
        self.counter = counter
        self.settings = settings

    @staticmethod
    def begin(turn: TurnInput, offer: TurnOffer) -> TurnProgress:
        """A turn's progress before its first round: its tools ready to run, its loop's limits from the role."""
        request = turn.request
        context = ToolContext(request.role_id, request.scope, request.actor, request.trace_id)
        return TurnProgress(ToolExecutor(offer.offered, context),
                            LoopGuard(turn.config.effective_max_tool_call_roundtrips), forced=offer.forced)

    @contextlib.asynccontextmanager
    async def _model_slot(self, progress: TurnProgress, deadline: asyncio.Timeout | None
                          ) -> AsyncIterator[SlotGrant]:
        """Hold the model for one round; the turn's timeout is paused while it waits (unless it includes the queue)."""
        loop = asyncio.get_running_loop()
        pause = not self.settings.timeout_includes_queue and deadline is not None and deadline.when() is not None
        remaining = 0.0
        if pause:
            assert deadline is not None
            when = deadline.when()
            assert when is not None
            remaining = when - loop.time()
            deadline.reschedule(None)
        try:
            if progress.queue_owner is None:
                progress.queue_owner = self.queue.new_owner()
            async with self.queue.slot(Priority.PLAYER, progress.queue_owner) as grant:
                if pause:
                    assert deadline is not None
                    deadline.reschedule(loop.time() + remaining)
                    pause = False
                self.client.check_available()  # the model may have gone down while this turn waited
                yield grant
        finally:
            if pause and deadline is not None:
                deadline.reschedule(loop.time() + remaining)

    async def run(self, turn: TurnInput, offer: TurnOffer, plan: TurnPlan, progress: TurnProgress, emit: Emit,
                  deadline: asyncio.Timeout | None = None) -> RoundsOutcome:
        """Model rounds until the reply settles the turn or the loop ends (the outcome's status says which)."""
        base, guard, executor = plan.messages, progress.guard, progress.executor
        while True:
            reply = await self._model_round(turn, offer, plan, progress, base + progress.loop_messages, emit, deadline)
            if reply.error is not None and not reply.text and not reply.tool_calls:
                # A structured reply that is not valid JSON: tell the model, count a failing round.
                progress.loop_messages += [
                    {"role": "assistant", "content": reply.raw},
                    {"role": "user", "content": f"{STRUCTURED_RESULTS_HEADER}\nerror: your reply was not a valid "
                     f"JSON reply object ({reply.error}). Answer again in the required format."},
                ]
                guard.record_round([ExecutedCall("", "", "", CallOutcome(False, reply.error, reply.error))])
                if guard.too_many_failures():
                    return await self._end_loop(turn, offer, plan, progress, guard.failures_message(), emit, deadline)
                continue
            if not reply.tool_calls or not offer.offered:
                return progress.outcome(TurnStatus.OK)
            if guard.limit_reached():
                return await self._end_loop(turn, offer, plan, progress, guard.limit_message(), emit, deadline)
            executed = []
            for call in reply.tool_calls[: self.settings.max_calls_per_round]:
                name = executor.resolve(call.name, log_repair=False)
                shown = name.name if name is not None else call.name
                event = ToolCallEvent(call.id, shown, call.arguments)
                progress.tool_calls.append(event)
                await emit(event)
                done = await executor.run_call(call)
                executed.append(done)
                result = ToolResultEvent(done.call_id, done.name, done.outcome.success, done.outcome.content)
                progress.tool_results.append(result)
                await emit(result)
            progress.rounds.append(executed)
            guard.record_round(executed)
            progress.loop_messages += self._round_messages(turn.mode, reply, executed)
            if any(c.outcome.success for c in executed):
                progress.forced = None  # a forcing mode holds until a tool call succeeds
            if reply_settles_round(turn.mode, reply.text, executed):
                return progress.outcome(TurnStatus.OK)
            if guard.too_many_failures():
                return await self._end_loop(turn, offer, plan, progress, guard.failures_message(), emit, deadline)

    async def _end_loop(self, turn: TurnInput, offer: TurnOffer, plan: TurnPlan, progress: TurnProgress,
                        message: str, emit: Emit, deadline: asyncio.Timeout | None) -> RoundsOutcome:
        """End the loop: `message` says why (the turn's error). A turn with nothing said yet gets a closing round
        without tools, so the player hears the model's words; the message is the text only when that says nothing."""
        log.info("tool loop ended after %d round(s)", len(progress.rounds))
        if not progress.said().strip():
            messages = closing_messages(turn.mode, plan.messages + progress.loop_messages)
            try:
                await self._model_round(turn, offer, plan, progress, messages, emit, deadline, closing=True)
            except ModelError as exc:  # the loop's message still answers; the type only (a detail may quote the prompt)
                log.info("closing round failed with %s", type(exc).__name__)
        if not progress.said().strip():
            progress.round_has_text = False
            await self._emit_text(progress, message, emit)
        return progress.outcome(TurnStatus.TOOL_LOOP_ENDED, message)

    @staticmethod
    def _round_messages(
        mode: ToolCallMode, reply: RoundReply, executed: Sequence[ExecutedCall]
    ) -> list[dict[str, Any]]:
        """The assistant turn and the tool results as the next request replays them."""
        if mode is ToolCallMode.NATIVE:
            calls = [
                {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                for c in executed
            ]
            return [{"role": "assistant", "content": reply.text, "tool_calls": calls}] + [
                {"role": "tool", "tool_call_id": c.call_id, "content": c.outcome.content} for c in executed
            ]
        results = [
            json.dumps({"name": c.name, "success": c.outcome.success, "result": c.outcome.content}, ensure_ascii=False)
            for c in executed
        ]
        return [
            {"role": "assistant", "content": reply.raw},
            {"role": "user", "content": STRUCTURED_RESULTS_HEADER + "\n" + "\n".join(results)},
        ]

    @staticmethod
    async def _emit_text(progress: TurnProgress, piece: str, emit: Emit) -> None:
        if not piece:
            return
        if not progress.round_has_text and progress.text:
            progress.text.append(ROUND_SEPARATOR)
            await emit(TextDeltaEvent(ROUND_SEPARATOR))
        progress.round_has_text = True
        progress.text.append(piece)
        await emit(TextDeltaEvent(piece))

    async def _model_round(self, turn: TurnInput, offer: TurnOffer, plan: TurnPlan, progress: TurnProgress,
                           messages: list[dict[str, Any]], emit: Emit, deadline: asyncio.Timeout | None, *,
                           closing: bool = False) -> RoundReply:
        """One streamed model call; text is emitted as it decodes (the `reply` field in structured mode).

        `closing`: the round after the loop ended, in which no tool may be called (native: `tool_choice` none;
        structured: a reply-only schema) and the reply has the visible cap alone."""
        request = turn.request
        forced = progress.forced
        offered_defs = list(offer.offered_defs)
        max_tokens = offer.max_tokens(turn)
        kwargs: dict[str, Any] = {
            "temperature": request.temperature if request.temperature is not None else turn.config.temperature,
            "max_tokens": max_tokens,
            "extra": request.extra or None,
        }
        structured = turn.mode is ToolCallMode.STRUCTURED and bool(offered_defs)
        if structured and closing:
            kwargs["response_format"] = {"type": "json_object", "schema": structured_schema([])}
        elif structured:
            only = forced if forced not in (None, FORCED_TOOL_REQUIRED) else None
            schema = structured_schema(offered_defs, require_call=forced is not None, only=only,
                                       max_calls=self.settings.max_calls_per_round)
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif offered_defs:
            # The calls replayed in the messages need their tools' definitions, also when none may be called.
            kwargs["tools"] = offered_defs
            kwargs["tool_choice"] = "none" if closing else native_tool_choice(
                [d["function"]["name"] for d in offered_defs], forced)
        if closing:
            kwargs["max_tokens"] = turn.output_cap()
        elif offer.tool_allowance:
            # The allowance takes only the room left: each tool round makes the next prompt longer.
            room = plan.context_tokens - self.counter.request(turn.role_id, messages, kwargs.get("tools"))
            kwargs["max_tokens"] = max(turn.output_cap(), min(max_tokens, room))
        extractor = ReplyExtractor() if structured else None
        accumulator = ChatCompletionAccumulator()
        progress.round_has_text = False
        # With tools the server's max_tokens includes the tool allowance: the visible reply is capped
        # here, by counting streamed pieces of it (one per token from llama.cpp). Stopping early
        # closes the stream, which stops the generation; the calls, streamed first, stay whole.
        cap = turn.output_cap() if offer.tool_allowance and not closing else None
        visible = 0
        capped = False
        cut = True  # until the stream ended by itself: a timeout, cancel or failure cuts it
        try:
            async with self._model_slot(progress, deadline) as grant:
                progress.model_calls += 1
                # The conversation keeps its slot of the hosted engine (its KV cache stays where this round finds it).
                async with self.client.stream_chat(messages, conversation=turn.conversation, **kwargs) as stream:
                    async for delta in stream:
                        accumulator.add(delta)
                        if isinstance(delta, TextDelta):
                            piece = extractor.feed(delta.text) if extractor is not None else delta.text
                            await self._emit_text(progress, piece, emit)
                            visible += bool(piece)
                            if cap is not None and visible >= cap:
                                capped = True
                                break
                if accumulator.has_tool_calls or (extractor is not None and extractor.has_tool_calls):
                    grant.expect_more()  # the next round follows the tools: keep this turn's prefix in the cache
            cut = capped
        finally:
            _count_usage(progress, accumulator, cut)
        completion = accumulator.result()
        if capped:
            log.info("reply reached the output cap of %d tokens; generation stopped", cap)
        if extractor is None:
            return RoundReply(completion.text, completion.tool_calls, completion.text)
        if capped:
            calls_json = extractor.tool_calls_json or "[]"
            parsed = parse_structured_reply(completion.text, call_id_prefix=f"call_{len(progress.rounds) + 1}",
                                            tool_calls_json=calls_json)
            raw = '{"tool_calls": ' + calls_json + ', "reply": ' + json.dumps(extractor.text, ensure_ascii=False) + "}"
            return RoundReply(extractor.text, parsed.tool_calls, raw)
        parsed = parse_structured_reply(completion.text, call_id_prefix=f"call_{len(progress.rounds) + 1}",
                                        tool_calls_json=extractor.tool_calls_json)
        return RoundReply(extractor.text, parsed.tool_calls, completion.text, parsed.error)


def _count_usage(progress: TurnProgress, accumulator: ChatCompletionAccumulator, cut: bool) -> None:
    """Add one model call's usage to the turn; a cut stream (capped, timed out, cancelled, failed) never got its
    final usage chunk, so the pieces it streamed (one per token from llama.cpp) are its completion tokens."""
    usage = accumulator.usage
    if usage is not None:
        progress.prompt_tokens += usage.prompt_tokens
        progress.cached_prompt_tokens += usage.cached_tokens
    completion = usage.completion_tokens if usage is not None else 0
    progress.completion_tokens += completion or (accumulator.pieces if cut else 0)

