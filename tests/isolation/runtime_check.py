"""The runtime isolation check: conversations that carry canaries, a model server that records what the runtime
sends it, and the rule every recorded request must keep.

Each conversation (a player's scope, an NPC role, an NPC instance as actor) has a canary of its own in every line the
player says and every memory write; each player has one in all their lines, each NPC role one in its system prompt
(ConfigureRole). A request the runtime sends the model must carry the canary of exactly one conversation, and only
that conversation's player and NPC canaries: whatever the runtime keeps per scope (role configs, histories and
their windows, summaries and staged folds, prewarms, memory writes, slot states) would show up in a request of the
wrong conversation as a foreign canary.

The recording server (`RecordingModel`, an OpenAI-compatible endpoint given as `--llm-url`) answers like a model that
repeats what it is told: replies, summaries and memory writes carry the canaries of the request, so a mix-up is
carried forward into later requests where it is seen. `EngineRecorder` records the same at the hosted llama-server
(under the runtime's own engine client), with the slot actions, for the slot provenance rule.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from pyruntime.memory import MEMORY_TOOL_NAME
from pyruntime.model.client.slots import conversation_id
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.testing.scripted import Answer, ScriptedCall, request_facts, scripted_answer
from pyruntime.turns.writer.prompt import WRITER_SYSTEM


@dataclass(frozen=True)
class Conversation:
    """One player's talk with one NPC instance, and its canaries."""

    player: str
    npc: str
    actor: str | None
    canary: str
    player_canary: str
    npc_canary: str

    @property
    def scope(self) -> AgentMemoryScope:
        """The player's scope (one tenant, one session)."""
        return AgentMemoryScope(tenant_id="realm", user_id=self.player, session_id="s1")

    @property
    def key(self) -> str:
        """Its storage key."""
        return storage_key(self.npc, self.scope, self.actor)

    @property
    def name(self) -> str:
        """Player, NPC and instance, for findings."""
        return f"{self.player}/{self.npc}{'#' + self.actor if self.actor else ''}"

    def line(self, number: int) -> str:
        """The player's line `number`: both of the player's canaries, and a statement (the writer pass reads it)."""
        return f"Turn {number}. My name is {self.canary}, remember {self.player_canary} please."


@dataclass
class Cast:
    """Every conversation, and which canary belongs to whom."""

    conversations: list[Conversation]
    npc_personas: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, seed: int, players: Sequence[str], npcs: Sequence[tuple[str, Sequence[str | None]]]) -> Cast:
        """Players x NPC instances (role, actors), with random canaries (seeded)."""
        rng = random.Random(seed)

        def tag(kind: str) -> str:
            return f"{kind}{rng.randrange(16 ** 8):08x}z"

        npc_canary = {role: tag("npc") for role, _ in npcs}
        made = []
        for player in players:
            player_canary = tag("plr")
            for role, actors in npcs:
                for actor in actors:
                    made.append(Conversation(player, role, actor, tag("cnv"), player_canary, npc_canary[role]))
        personas = {role: f"You are {role}, known as {npc_canary[role]}. Answer briefly." for role, _ in npcs}
        return cls(made, personas)

    def conversation_of(self, canary: str) -> Conversation:
        """The conversation a conversation canary belongs to."""
        return next(c for c in self.conversations if c.canary == canary)

    def by_digest(self) -> dict[str, Conversation]:
        """Conversations by the digest the engine names them with."""
        return {conversation_id(c.key): c for c in self.conversations}

    def canaries_in(self, text: str) -> tuple[set[str], set[str], set[str]]:
        """(conversation, player, NPC) canaries found in `text`."""
        conversations = {c.canary for c in self.conversations if c.canary in text}
        players = {c.player_canary for c in self.conversations if c.player_canary in text}
        npcs = {c.npc_canary for c in self.conversations if c.npc_canary in text}
        return conversations, players, npcs

    def finding(self, label: str, body: Mapping[str, Any]) -> str | None:
        """Why a request breaks the rule (None when it keeps it)."""
        text = json.dumps(body.get("messages", []), ensure_ascii=False)
        conversations, players, npcs = self.canaries_in(text)
        if len(conversations) != 1:
            names = sorted(self.conversation_of(c).name for c in conversations)
            return f"{label} carries the canaries of {len(conversations)} conversations {names}"
        owner = self.conversation_of(next(iter(conversations)))
        foreign = sorted((players - {owner.player_canary}) | (npcs - {owner.npc_canary}))
        if foreign:
            return f"{label} of {owner.name} carries foreign player or NPC canaries {foreign}"
        return None


class RecordingModel:
    """What answers as `--llm-url`: records each request and answers like a model that repeats what it is told."""

    def __init__(self, cast: Cast) -> None:
        self.cast = cast
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def answer(self, body: Mapping[str, Any]) -> Answer:
        """The reply to one request (the `Script.answer` the scripted model server calls)."""
        with self._lock:
            self.bodies.append(dict(body))
        facts = request_facts(body)
        conversations, players, _ = self.cast.canaries_in(json.dumps(body.get("messages", [])))
        said = " ".join(sorted(conversations | players))
        if facts.compaction:
            return scripted_answer(f"Summary: the player said {said}.")
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        offered = MEMORY_TOOL_NAME in tools or (facts.structured and MEMORY_TOOL_NAME in facts.system)
        if not facts.after_tools and offered and "remember" in facts.hint:
            call = ScriptedCall(MEMORY_TOOL_NAME, {"action": "append", "content": f"Fact: {said}"})
            return scripted_answer("", (call,), structured=facts.structured)
        return scripted_answer(f"Noted, {said}.", structured=facts.structured)

    def findings(self) -> list[str]:
        """Every recorded request that breaks the rule."""
        with self._lock:
            bodies = list(self.bodies)
        return [f for i, b in enumerate(bodies) if (f := self.cast.finding(f"request {i}", b)) is not None]


class EngineRecorder:
    """Under the runtime's engine client: records chat requests and slot actions, and checks slot provenance.

    A request of a named conversation must find its slot empty, holding its own state, or be sent with
    `cache_prompt: false`; the memory writer's and summarizer's requests share one slot and may reuse each other's
    (their prompts start alike; docs/design/engine.md) but never a named conversation's state.
    """

    def __init__(self, cast: Cast) -> None:
        self.cast = cast
        self.bodies: list[dict[str, Any]] = []
        self.findings: list[str] = []
        self.slot_actions: dict[str, int] = {}
        self._held: dict[int, str] = {}  # slot -> whose state: a conversation name, "shared" (writer/summarizer)
        self._by_digest = cast.by_digest()

    async def __call__(self, request: aiohttp.ClientRequest,
                       handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        """A client middleware under the runtime's engine client."""
        raw = await request.body.as_bytes() if request.body else b""
        body: dict[str, Any] = json.loads(raw) if raw else {}
        path = request.url.path
        if path.endswith("/chat/completions") and "id_slot" in body:
            self._request(body)
        response = await handler(request)
        if path.startswith("/slots/") and response.status == 200:
            self._slot_action(int(path.rsplit("/", 1)[1]), request.url.query.get("action", ""), body)
        return response

    def _request(self, body: dict[str, Any]) -> None:
        label = f"engine request {len(self.bodies)}"
        self.bodies.append(body)
        problem = self.cast.finding(label, body)
        if problem is not None:
            self.findings.append(problem)
            return
        slot = int(body["id_slot"])
        messages = body.get("messages") or [{}]
        shared = WRITER_SYSTEM in str(messages[0].get("content", "")) or request_facts(body).compaction
        conversations, _, _ = self.cast.canaries_in(json.dumps(messages, ensure_ascii=False))
        owner = "shared" if shared else self.cast.conversation_of(next(iter(conversations))).name
        held = self._held.get(slot)
        if held not in (None, owner) and body.get("cache_prompt", True) is not False:
            self.findings.append(f"{label} of {owner} was sent to slot {slot}, which held {held}'s state, "
                                 "without starting it afresh")
        self._held[slot] = owner

    def _slot_action(self, slot: int, action: str, body: dict[str, Any]) -> None:
        self.slot_actions[action] = self.slot_actions.get(action, 0) + 1
        if action == "erase":
            self._held.pop(slot, None)
        elif action == "restore":
            digest = str(body.get("filename", "")).split(".", 1)[0]
            owner = self._by_digest.get(digest)
            self._held[slot] = owner.name if owner is not None else "shared"

    def restored(self, holders: Mapping[int, str]) -> None:
        """The engine restarted and restored these slots (slot -> digest) from disk."""
        self._held = {s: (self._by_digest[d].name if d in self._by_digest else "shared") for s, d in holders.items()}
