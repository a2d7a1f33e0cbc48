"""CoreAI's `InMemoryAgentMemoryStoreEditModeTests`, ported: the session-only store (AgentMemoryPersistenceMode.SessionOnly).

Each runs on the store API, and the C# cases on a runtime started session-only, which serves this store to the
C# client: what a game in SessionOnly mode calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.stores.base import LoadStatus, TranscriptEntry, TranscriptKind
from pyruntime.stores.in_memory import InMemoryAgentMemoryStore
from tests.seed.conftest import Runtime, start_runtime
from tests.unity.conftest import wait

KEY = "role"


@pytest.fixture
def session_only_store(assemblies: Path, tmp_path: Path) -> Iterator[Any]:
    """The C# store of a runtime started session-only (`serve --session-only`): its data lives in the runtime."""
    from CoreAI.Ai import AgentMemoryPolicy

    runtime: Runtime = start_runtime(tmp_path / "data", session_only=True, no_model=True)  # stores only
    client = runtime.client(policy=AgentMemoryPolicy())
    try:
        yield client.CreateMemoryStore()
    finally:
        client.Dispose()
        runtime.stop()
    assert not (tmp_path / "data" / "CoreAI" / "AgentMemory").exists()  # session-only writes no save file


def test_save_and_load_clone_mutable_memory_state(session_only_store):
    """Ports InMemoryAgentMemoryStoreEditModeTests.SaveAndLoad_CloneMutableMemoryState.

    The C# state is mutable, as in CoreAI: the store keeps what was saved, whatever the caller does to its object
    or to a loaded copy afterwards. The Python state and its versions are immutable values, so the same holds by
    construction there.
    """
    from CoreAI.Ai import AgentMemoryState as CsState
    from CoreAI.Ai import AgentMemoryVersion

    version = AgentMemoryVersion()
    version.Version, version.ContentAfter = 1, "original"
    state = CsState()
    state.Memory = "original"
    state.Versions.Add(version)
    session_only_store.Save(KEY, state)
    state.Memory = "mutated caller"
    version.ContentAfter = "mutated caller version"

    found, first = session_only_store.TryLoad(KEY, None)
    assert found and first.Memory == "original" and first.Versions[0].ContentAfter == "original"
    first.Memory = "mutated loaded copy"
    first.Versions[0].ContentAfter = "mutated loaded version"
    found, second = session_only_store.TryLoad(KEY, None)
    assert found and second.Memory == "original" and second.Versions[0].ContentAfter == "original"

    python_state = AgentMemoryState(memory="original", versions=(MemoryVersion(1, 0, "write", "original", ""),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        python_state.versions[0].content_after = "mutated"  # type: ignore[misc]


def test_chat_and_transcript_are_bounded_chronological_and_cleared_together():
    """Ports InMemoryAgentMemoryStoreEditModeTests.ChatAndTranscript_AreBoundedChronological_AndClearedTogether.

    Departs: CoreAI keeps chat and transcript as two lists; ours is one transcript per key in which each chat
    message is a row too (contract, "Words": the transcript is the record of turns; §3.1: a row leaves only when
    it has left both windows). So the transcript window of 2 holds the newest two rows of either kind.
    """
    store = InMemoryAgentMemoryStore(chat_cap=2, transcript_cap=2)
    for i in (1, 2, 3):
        store.append_chat_message(KEY, "user", f"chat-{i}")
        store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.USER, "user", f"transcript-{i}")])

    assert [m.content for m in store.get_chat_history(KEY)] == ["chat-2", "chat-3"]
    assert [m.content for m in store.get_chat_history(KEY, 1)] == ["chat-3"]
    transcript = store.get_transcript(KEY)
    assert [e.content for e in transcript] == ["chat-3", "transcript-3"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        transcript[0].content = "mutated caller"  # type: ignore[misc]

    store.clear_chat_history(KEY)
    assert store.get_chat_history(KEY) == [] and store.get_transcript(KEY) == []


def test_clear_preserves_conversation_and_atomic_mutation_persists_memory(session_only_store):
    """Ports InMemoryAgentMemoryStoreEditModeTests.Clear_PreservesConversation_AndAtomicMutationPersistsMemory.

    Departs in the mutation's shape: `mutate(key, fn)` returns the state fn produced rather than a value of the
    caller's (contract §3, `Mutate(key, fn)`); the C# client mutates through the memory tool, whose cancelled
    call throws OperationCanceledException and changes nothing, as CoreAI's cancelled MutateAsync does.
    """
    from CoreAI.Ai import AgentMemoryState as CsState
    from CoreAI.Ai import MemoryToolCall
    from System.Threading import CancellationToken

    store = InMemoryAgentMemoryStore()
    store.append_chat_message(KEY, "user", "keep chat")
    store.append_transcript(KEY, [TranscriptEntry(TranscriptKind.TOOL_RESULT, "lookup", "keep transcript")])
    store.save(KEY, AgentMemoryState(memory="clear me"))
    store.clear(KEY)
    cleared = store.try_load(KEY)
    assert cleared.status is LoadStatus.NOT_FOUND and cleared.state is None
    assert store.get_chat_history(KEY)[0].content == "keep chat"
    assert "keep transcript" in [e.content for e in store.get_transcript(KEY)]
    mutated = store.mutate(KEY, lambda state: state.evolve(memory="atomic"))
    assert mutated.memory == "atomic" and store.try_load(KEY).state == mutated

    seed = CsState()
    seed.Memory = "atomic"
    session_only_store.Save(KEY, seed)
    with pytest.raises(Exception) as cancelled:
        wait(session_only_store.ExecuteMemoryToolAsync(KEY, MemoryToolCall.Write("never"), CancellationToken(True)))
    assert "OperationCanceled" in type(cancelled.value).__name__ or "TaskCanceled" in type(cancelled.value).__name__
    found, state = session_only_store.TryLoad(KEY, None)
    assert found and state.Memory == "atomic"
