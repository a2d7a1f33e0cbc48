"""When a memory write may land: never while a turn of its conversation is running.

The writer pass decides after the reply, behind player turns in the model queue, so the player's
next line often starts a turn before the write of the line before it has landed. Landing in the
middle of that turn would put the edit after the turn planned its prompt: the turn would answer
without it and nothing would say the edit came later. So a turn holds its conversation for its
whole run (shared: several turns of one conversation may run at once), and a write lands only
while no turn of its conversation runs (exclusive). A waiting write goes first: a turn that
arrives while a write waits starts after the write landed (a file write, milliseconds), so its
prompt carries the edit and a write is never held back for longer than the turns already running.

Nobody waits on the gate while holding the model: the pass leaves the model queue before it asks
for its conversation (turns/writer/passes.py), so a turn waiting for the model never blocks a write
that blocks it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field


@dataclass
class _Conversation:
    users: int = 0  # turns and writes holding or waiting for it: the entry goes when none is left
    turns: int = 0
    writing: bool = False
    writers_waiting: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class ConversationGate:
    """Per conversation key: turns share it, memory writes take it alone (waiting writes first)."""

    def __init__(self) -> None:
        """No conversation held."""
        self._conversations: dict[str, _Conversation] = {}

    @contextlib.contextmanager
    def _using(self, key: str) -> Iterator[_Conversation]:
        state = self._conversations.get(key)
        if state is None:
            state = self._conversations[key] = _Conversation()
        state.users += 1
        try:
            yield state
        finally:
            state.users -= 1
            if not state.users:
                del self._conversations[key]  # bounded: only conversations in use keep an entry

    def turns_running(self, key: str) -> int:
        """Turns of the conversation holding it now."""
        state = self._conversations.get(key)
        return state.turns if state else 0

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """Hold the conversation for one turn: waits while a write lands or waits to land."""
        with self._using(key) as state:
            async with state.changed:
                await state.changed.wait_for(lambda: not state.writing and not state.writers_waiting)
                state.turns += 1
            try:
                yield
            finally:
                # Shielded: a cancelled turn must still let the writes of its conversation land.
                await asyncio.shield(self._leave(state, turn=True))

    @contextlib.asynccontextmanager
    async def write(self, key: str) -> AsyncIterator[None]:
        """Hold the conversation alone for one memory write: waits until no turn of it runs."""
        with self._using(key) as state:
            async with state.changed:
                state.writers_waiting += 1
                try:
                    await state.changed.wait_for(lambda: not state.turns and not state.writing)
                finally:
                    state.writers_waiting -= 1
                    state.changed.notify_all()  # a cancelled waiter must not hold turns back
                state.writing = True
            try:
                yield
            finally:
                await asyncio.shield(self._leave(state, turn=False))

    @staticmethod
    async def _leave(state: _Conversation, *, turn: bool) -> None:
        async with state.changed:
            if turn:
                state.turns -= 1
            else:
                state.writing = False
            state.changed.notify_all()
