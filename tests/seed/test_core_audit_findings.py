"""CoreAI's `CoreAuditFindingsEditModeTests`, memory findings (finding 4: a transient read failure must not wipe
role memory), ported. CoreAI checks them on a fake store whose load fails; here the failure is real: a memory
document on disk that cannot be read.
"""

from __future__ import annotations

import pytest

from pyruntime.errors import MemoryUnreadableError
from pyruntime.memory.state import AgentMemoryState
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.base import LoadStatus
from pyruntime.stores.file_store import FileConversationSummaryStore
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from tests.seed.conftest import ROLE, memory_path

UNREADABLE = b'{"memory":"the child likes dragons","versionsJson":"[{broken'


def test_mutate_async_load_failure_aborts_without_saving(root, new_store):
    """Ports CoreAuditFindingsEditModeTests.MutateAsync_LoadFailure_AbortsWithoutSaving."""
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_bytes(UNREADABLE)
    ran = []

    def mutation(state: AgentMemoryState) -> AgentMemoryState:
        ran.append(state)
        return state.evolve(memory="brand new")

    with pytest.raises(MemoryUnreadableError):
        new_store().mutate(ROLE, mutation)
    assert ran == []  # the mutation never saw an empty stand-in for the unread document
    assert memory_path(root).read_bytes() == UNREADABLE


def test_mutate_async_missing_document_still_starts_from_an_empty_state(root, new_store):
    """Ports CoreAuditFindingsEditModeTests.MutateAsync_MissingDocument_StillStartsFromAnEmptyState."""
    seen = []

    def mutation(state: AgentMemoryState) -> AgentMemoryState:
        seen.append(state)
        return state.evolve(memory="first fact")

    new_store().mutate(ROLE, mutation)
    assert seen == [AgentMemoryState()]
    assert new_store().try_load(ROLE).state == AgentMemoryState(memory="first fact")


def test_scoped_decorator_forwards_load_diagnostics(root, new_store, csharp_runtime, csharp_store):
    """Ports CoreAuditFindingsEditModeTests.ScopedDecorator_ForwardsLoadDiagnostics.

    Through the scoped view (a scope's key is hashed, contract §4), and through the C# client, whose TryLoad
    throws FailedPreconditionException for a document that exists but cannot be read.
    """
    from CoreAI.Ai import AgentMemoryScope as CsScope
    from CoreAI.Runtime import FailedPreconditionException

    scope = AgentMemoryScope("studio", "player1", None, None)
    scoped = ScopedAgentMemoryStore(new_store(), FileConversationSummaryStore(root), scope)
    memory_path(root, scoped.key(ROLE)).parent.mkdir(parents=True)
    memory_path(root, scoped.key(ROLE)).write_bytes(UNREADABLE)
    result = scoped.try_load(ROLE)
    assert result.status is LoadStatus.FAILED and result.state is None

    data = csharp_runtime.data_dir / "CoreAI"
    memory_path(data, scoped.key(ROLE)).parent.mkdir(parents=True)
    memory_path(data, scoped.key(ROLE)).write_bytes(UNREADABLE)
    cs_scope = CsScope("studio", "player1", None, None)
    with pytest.raises(FailedPreconditionException):
        csharp_store.ForScope(cs_scope).TryLoad(ROLE, None)
