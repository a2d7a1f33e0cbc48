"""The prewarm: after a turn, the next turn's prefix is evaluated in the background.

Against the real tiny llama.cpp server: token counts only (never times). The same session runs with
the prewarm on and off; the turns must send and store the same bytes either way.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from pyruntime.history import CompactionKind
from pyruntime.memory import MemoryTool
from pyruntime.model.client.errors import ModelUnavailableError
from pyruntime.model.client.queue import Priority
from pyruntime.policy import AgentMemoryPolicy
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.turns import AiTaskRequest, TaskResult
from pyruntime.turns.between.prewarm import (
    PREWARM_MAX_TOKENS,
    in_own_slot,
    needs_prewarm,
    prompt_cache_has_room,
    worth_prewarming,
)
from tests.support.fixtures import start_llama_server
from tests.turns.conftest import make_orchestrator, run

PLAYER = AgentMemoryScope(user_id="player1")
WINDOW = 4  # compaction on every second turn past the window (hysteresis folds down to 2 messages)
HINTS = ["Good morning, smith!", "Have you heard news from the road?", "What would you charge for a sword?",
         "Tell me about this town.", "Do you remember my name?", "Any work for me?", "Will it rain?",
         "I will be back later."]


def _is_prewarm(body: dict[str, Any]) -> bool:
    return body.get("max_tokens") == PREWARM_MAX_TOKENS  # streamed like a turn (for its usage), one token


def _is_turn(body: dict[str, Any]) -> bool:
    return bool(body.get("stream")) and not _is_prewarm(body)  # the writer pass is not streamed


def _policy() -> AgentMemoryPolicy:
    policy = AgentMemoryPolicy()
    policy.configure_role("Smith", system_prompt="You are Smith, the village blacksmith. Answer briefly.",
                          max_chat_history_messages=WINDOW, with_chat_history=True, use_memory_tool=True,
                          max_output_tokens=8, temperature=0.0)
    return policy


def _session(url: str, *, prewarm: bool, turns: int = len(HINTS), scopes: tuple[AgentMemoryScope, ...] = (PLAYER,),
             **options: Any) -> dict[str, Any]:
    """One NPC's session, each turn after the previous turn's prewarm finished (the player read the reply);
    with several `scopes` (players), each hint is taken by each of them in turn."""
    stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
    tool = MemoryTool(stores.memory, stores.scoped(PLAYER).key("Smith"))
    for fact in ("The player's name is Alex.", "The player owes 30 gold.", "The player fears spiders."):
        assert tool.execute({"action": "append", "content": fact}).success
    orchestrator, client = make_orchestrator(url, stores, policy=_policy(), prewarm=prewarm, **options)

    async def go() -> list[TaskResult]:
        results = []
        try:
            for hint in HINTS[:turns]:
                for scope in scopes:
                    results.append(await orchestrator.run_task(
                        AiTaskRequest(hint, "Smith", scope=scope, forced_tool_mode="none", extra={"seed": 0})))
                    await orchestrator.prewarms.drain()
        finally:
            await client.aclose()
        return results

    results = run(go())
    assert all(r.ok for r in results), [(i, r.status, r.error) for i, r in enumerate(results) if not r.ok]
    scoped = stores.scoped(PLAYER)
    return {
        "results": results,
        "turn_bodies": [b for b in client.bodies if _is_turn(b)],
        "prewarm_bodies": [b for b in client.bodies if _is_prewarm(b)],
        "history": [(m.role, m.content) for m in scoped.get_chat_history("Smith")],
        "summary": scoped.load_summary("Smith"),
        "stats": orchestrator.prewarms.stats,
    }


@pytest.fixture(scope="module")
def sessions(tiny_server_url: str) -> dict[bool, dict[str, Any]]:
    """The same session with the prewarm on and off, one after the other on the session's tiny server."""
    return {flag: _session(tiny_server_url, prewarm=flag) for flag in (True, False)}


def test_the_turn_after_a_predicted_compaction_evaluates_only_its_new_tokens(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    compacting = [i for i, r in enumerate(on["results"])
                  if r.cut_report is not None and r.cut_report.compaction is not CompactionKind.NONE]
    assert len(compacting) >= 2, compacting  # the window is small enough to compact several times
    appending = [i for i in range(1, len(HINTS)) if i not in compacting]
    for i in compacting:
        warm, cold = on["results"][i].usage, off["results"][i].usage
        assert warm.prompt_tokens == cold.prompt_tokens  # the same request
        # Off: the new head and the whole history again. On: the prewarm evaluated those.
        assert warm.evaluated_prompt_tokens * 2 < cold.evaluated_prompt_tokens, (i, warm, cold)
        # At most what an append-only turn evaluates (the reply before it and the player's line).
        most_appended = max(on["results"][j].usage.evaluated_prompt_tokens for j in appending)
        assert warm.evaluated_prompt_tokens <= most_appended, (i, warm, most_appended)
    # One prewarm for each compaction predicted (the turns that only append were warm already).
    assert on["stats"].sent == len(on["prewarm_bodies"]) >= len(compacting)
    assert on["stats"].failed == 0
    # The work moved off the turns is counted where it went (benches add it to the runtime's total).
    moved = sum(off["results"][i].usage.evaluated_prompt_tokens - on["results"][i].usage.evaluated_prompt_tokens
                for i in compacting)
    assert on["stats"].evaluated_tokens >= moved // 2 > 0
    assert all(b["max_tokens"] == PREWARM_MAX_TOKENS and b["temperature"] == 0.0 for b in on["prewarm_bodies"])
    assert not off["prewarm_bodies"] and off["stats"].sent == 0


def test_a_prewarm_sends_the_next_turns_request_but_the_player_line(sessions: dict) -> None:
    on = sessions[True]
    for prewarm in on["prewarm_bodies"]:
        sent = prewarm["messages"]
        # The next turn sent exactly these messages, then its player's line (the tail was predicted right).
        assert any(b["messages"][:-1] == sent for b in on["turn_bodies"]), sent


def test_turns_send_and_store_the_same_bytes_with_the_prewarm_on_and_off(sessions: dict) -> None:
    on, off = sessions[True], sessions[False]
    assert len(on["turn_bodies"]) == len(off["turn_bodies"]) == len(HINTS)
    assert on["turn_bodies"] == off["turn_bodies"]
    assert on["history"] == off["history"] and on["summary"] == off["summary"] and on["summary"]
    assert [r.cut_report for r in on["results"]] == [r.cut_report for r in off["results"]]
    assert [r.text for r in on["results"]] == [r.text for r in off["results"]]


def test_a_failing_prewarm_changes_no_turn(tiny_server_url: str, caplog: pytest.LogCaptureFixture) -> None:
    stores = open_stores(AgentMemoryPersistenceMode.SESSION_ONLY, None)
    down = False

    def gate() -> None:  # what the watchdog answers while the model server restarts
        if down:
            raise ModelUnavailableError("the model server is restarting")

    orchestrator, client = make_orchestrator(tiny_server_url, stores, policy=_policy(), prewarm=True, gate=gate)

    async def go() -> list[TaskResult]:
        nonlocal down
        results = []
        try:
            for hint in HINTS[:WINDOW]:  # the last one predicts a compaction: its prewarm is due
                down = False
                results.append(await orchestrator.run_task(
                    AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none")))
                down = True  # gone before its prewarm reaches it
                await orchestrator.prewarms.drain()
        finally:
            await client.aclose()
        return results

    with caplog.at_level(logging.WARNING, logger="pyruntime.turns"):
        results = run(go())
    assert all(r.ok for r in results)
    assert orchestrator.prewarms.stats.failed >= 1 and orchestrator.prewarms.stats.sent == 0
    warnings = [r.getMessage() for r in caplog.records if "prewarm" in r.getMessage()]
    assert warnings and all(w == "prewarm failed (ModelUnavailableError)" for w in warnings)
    assert len(stores.scoped(PLAYER).get_chat_history("Smith")) == 2 * WINDOW  # every turn recorded
    assert not [b for b in client.bodies if _is_prewarm(b)]  # nothing reached the server


def test_a_turn_is_warm_already_when_its_request_starts_the_next_one() -> None:
    system, head, tail = ({"role": "system", "content": c} for c in ("s", "h", "t"))
    history = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    sent = [system, head, tail, history[0]]
    assert not needs_prewarm([*sent, history[1]], sent, displaced=False)  # only this turn's reply follows
    assert needs_prewarm([*sent, history[1]], sent, displaced=True)  # the writer pass's prompt replaced it
    assert needs_prewarm([system, {"role": "system", "content": "new head"}, *history, tail], sent, displaced=False)


def test_with_the_prompt_cache_a_prewarm_leaves_no_entry_behind(tiny_model_path: Path) -> None:
    # The prewarm's state (its prompt, the generation prompt, one token) is the next turn's prefix but for
    # those last tokens: the turn extends it in the same slot, nothing goes to the host cache for it.
    entries = {}
    for flag in (True, False):
        server = start_llama_server(tiny_model_path, prompt_cache_mb=64, slots=1)
        try:
            # With the server's status, as `build_orchestrator` wires it: the cache has room, so prewarms go out.
            session = _session(server.base_url, prewarm=flag, prompt_cache_status=server.status)
            entries[flag] = server.status()["prompt_cache_entries"]
        finally:
            server.stop()
        if flag:
            assert session["stats"].sent >= 2
    assert entries[True] == entries[False], entries


def _writer_session(url: str, *, prewarm: bool) -> tuple[list[TaskResult], list[dict[str, Any]], Any]:
    """Two turns with the memory writer pass after each; the next turn waits for both background requests."""
    orchestrator, client = make_orchestrator(url, policy=_policy(), prewarm=prewarm, memory_design="writer")

    async def go() -> list[TaskResult]:
        results = []
        try:
            for hint in ("My name is Alex and I love horses.", "What do you sell?"):
                results.append(await orchestrator.run_task(
                    AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none")))
                await orchestrator.memory_passes.drain()
                await orchestrator.prewarms.drain()
        finally:
            await client.aclose()
        return results

    results = run(go())
    assert all(r.ok for r in results), [(i, r.status, r.error) for i, r in enumerate(results) if not r.ok]
    return results, client.bodies, orchestrator.prewarms.stats


def test_after_a_writer_pass_the_prewarm_puts_the_conversation_back(tiny_model_path: Path) -> None:
    # With one slot and no host prompt cache the writer pass's request replaces the conversation in the
    # engine's KV cache: the prewarm, queued behind it, evaluates the conversation again before the player's
    # next line. (With slots, each keeps its own; with the host cache, the conversation comes back from it.)
    server = start_llama_server(tiny_model_path, slots=1, prompt_cache_mb=0)
    try:
        on, on_bodies, stats = _writer_session(server.base_url, prewarm=True)
        off, off_bodies, _ = _writer_session(server.base_url, prewarm=False)
    finally:
        server.stop()
    kinds = ["turn" if _is_turn(b) else "prewarm" if _is_prewarm(b) else "writer" for b in on_bodies]
    # One decision per statement, then the prewarm; after the question no writer call and nothing to warm.
    assert kinds == ["turn", "writer", "writer", "prewarm", "turn"], kinds
    assert stats.sent == 1
    assert on[1].usage.prompt_tokens == off[1].usage.prompt_tokens
    assert on[1].usage.evaluated_prompt_tokens * 2 < off[1].usage.evaluated_prompt_tokens, (on[1].usage, off[1].usage)
    assert [b for b in on_bodies if _is_turn(b)] == [b for b in off_bodies if _is_turn(b)]


def test_a_turn_that_comes_first_supersedes_its_prewarm(tiny_server_url: str) -> None:
    orchestrator, client = make_orchestrator(tiny_server_url, policy=_policy(), prewarm=True)
    request = [AiTaskRequest(hint, "Smith", scope=PLAYER, forced_tool_mode="none") for hint in HINTS[:4]]

    async def go() -> TaskResult:
        try:
            for r in request[:2]:
                await orchestrator.run_task(r)
                await orchestrator.prewarms.drain()
            await orchestrator.run_task(request[2])  # its prewarm (the next turn compacts) is due, not run yet
            async with orchestrator.queue.slot(Priority.PLAYER):  # the model is busy with another NPC's turn
                later = asyncio.create_task(orchestrator.run_task(request[3]))
                await asyncio.sleep(0.2)  # the player is faster than the prewarm: the next turn has started
            result = await later
            await orchestrator.prewarms.drain()
            return result
        finally:
            await client.aclose()

    result = run(go())
    assert result.ok and result.cut_report is not None and result.cut_report.compaction is not CompactionKind.NONE
    assert orchestrator.prewarms.stats.sent == 0 and orchestrator.prewarms.stats.skipped >= 1
    assert not [b for b in client.bodies if _is_prewarm(b)]  # the stale prewarm never reached the model


def test_a_prewarm_is_sent_only_while_the_prompt_cache_has_room_for_it() -> None:
    mb = 1 << 20
    status = {"prompt_cache_limit_bytes": 256 * mb, "prompt_cache_used_bytes": 60 * mb, "prompt_cache_entries": 4}
    assert prompt_cache_has_room(status) is True  # 4 NPCs of 15 MB: room for many more
    # 16 NPCs of 15 MB fill a 256 MB cache: a prewarm's state would evict the next NPC's (LRU, in rotation).
    assert prompt_cache_has_room({**status, "prompt_cache_used_bytes": 240 * mb, "prompt_cache_entries": 16}) is False
    assert prompt_cache_has_room({**status, "prompt_cache_used_bytes": 0, "prompt_cache_entries": 0}) is True
    assert prompt_cache_has_room({"prompt_cache_limit_bytes": 0}) is None  # no cache
    assert prompt_cache_has_room({}) is None
    assert worth_prewarming(True, ["npc-b", "npc-a"], "npc-a") and not worth_prewarming(False, ["npc-a"], "npc-a")
    # Without a cache only a dialogue gains: another conversation's turn would replace the prefix first.
    assert worth_prewarming(None, ["npc-a", "npc-a"], "npc-a")
    assert not worth_prewarming(None, ["npc-b", "npc-a"], "npc-a")


def test_without_a_prompt_cache_npcs_taking_turns_get_no_prewarm(tiny_server_url: str) -> None:
    # Two players with the same smith, turn about, on the session's tiny server (no prompt cache): each
    # turn replaces the other conversation in llama.cpp's one sequence, so a prewarm would be wasted work.
    session = _session(tiny_server_url, prewarm=True, scopes=(PLAYER, AgentMemoryScope(user_id="player2")))
    results = session["results"]
    assert any(r.cut_report.compaction is not CompactionKind.NONE for r in results)  # a prewarm would have been due
    assert session["stats"].sent == 0 and session["stats"].skipped >= len(results) - 1
    assert not session["prewarm_bodies"]


def test_a_conversation_in_its_own_slot_is_prewarmed_whatever_the_host_cache_holds() -> None:
    # Several slots: the prewarm goes to the conversation's slot, the host cache's room does not matter.
    assert in_own_slot(4, ["npc-b", "npc-a"], "npc-a") and in_own_slot(2, ["npc-a", "npc-a"], "npc-a")
    # More conversations speaking than slots, or one slot: the host cache's rule decides (worth_prewarming).
    assert not in_own_slot(2, ["npc-b", "npc-c"], "npc-a") and not in_own_slot(1, ["npc-a"], "npc-a")
