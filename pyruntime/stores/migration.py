"""Move every save from one persistent store to another (files <-> PostgreSQL) through scope snapshots.

Every save of the source is exported first, through its identity index (one snapshot per scope);
only when all exports succeeded is anything imported, so a source with a save it cannot attribute
to a role and actor (written before the index existed) fails the migration with nothing written.
The target must hold no saves yet: a migration never merges into, or overwrites, another game's data.
Rows get new order numbers in the target (still increasing, in the same sequence), as any import does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope
from pyruntime.stores.file_layout import AGENT_MEMORY_DIR, SUMMARIES_DIR, file_stem
from pyruntime.stores.identity_index import Identity, IdentityIndex
from pyruntime.stores.persistence import StoreBundle
from pyruntime.stores.snapshot import (
    ScopeSnapshot,
    UnattributedSavesError,
    export_scope_snapshot,
    import_scope_snapshot,
)


@dataclass(frozen=True)
class MigrationResult:
    """What was moved."""

    scopes: int
    roles: int


def _index(bundle: StoreBundle) -> IdentityIndex:
    index = getattr(bundle.memory, "identities", None)
    if not isinstance(index, IdentityIndex):
        raise InvalidArgumentError("these stores keep no identity index, so their saves cannot be listed")
    return index


def saves_held(bundle: StoreBundle) -> int:
    """How many saves (indexed identities, plus saves the index cannot attribute) the stores hold."""
    index = _index(bundle)
    known = index.identities()
    unknown = index.stored_stems((AGENT_MEMORY_DIR, SUMMARIES_DIR)) - {file_stem(k) for k in known}
    return len(known) + len(unknown)


def export_all(source: StoreBundle) -> list[ScopeSnapshot]:
    """One snapshot per scope holding saves (identities with no data left out); raises before returning any
    when a save cannot be attributed."""
    index = _index(source)
    known = index.identities()
    # The empty scope's export checks bare and actor saves the index does not know; scoped ones are checked here.
    unknown = index.stored_stems((AGENT_MEMORY_DIR, SUMMARIES_DIR)) - {file_stem(k) for k in known}
    scoped_unknown = [s for s in unknown if s.startswith("scope-v1-")]
    if scoped_unknown:
        raise UnattributedSavesError(
            f"{len(scoped_unknown)} scoped save(s) cannot be attributed to a role and actor (written before the "
            "identity index existed); nothing was migrated. Export them by name first (that indexes them)")
    snapshots = [export_scope_snapshot(source, EMPTY_SCOPE, None, actors=None)]
    by_scope: dict[tuple[str, str, str, str], tuple[AgentMemoryScope, list[Identity]]] = {}
    for identity in known.values():
        if not identity.scope.is_empty:
            by_scope.setdefault(identity.scope.parts(), (identity.scope, []))[1].append(identity)
    for parts in sorted(by_scope, key=lambda p: tuple(x or "" for x in p)):
        scope, identities = by_scope[parts]
        roles = []
        for identity in sorted(identities, key=lambda i: (i.role_id, i.actor or "")):
            roles += export_scope_snapshot(source, scope, [identity.role_id], actors=[identity.actor]).roles
        snapshots.append(ScopeSnapshot(scope=scope, roles=roles, exported_at=snapshots[0].exported_at))
    return [s for s in snapshots if s.roles]


def migrate_saves(source: StoreBundle, target: StoreBundle,
                  progress: Callable[[int, int], None] | None = None) -> MigrationResult:
    """Copy every save of source into target (which must hold none); returns what was moved."""
    held = saves_held(target)
    if held:
        raise InvalidArgumentError(
            f"the target already holds {held} save(s); migrate into an empty data folder or database")
    snapshots = export_all(source)
    for done, snapshot in enumerate(snapshots, 1):
        import_scope_snapshot(target, snapshot)
        if progress is not None:
            progress(done, len(snapshots))
    return MigrationResult(scopes=len(snapshots), roles=sum(len(s.roles) for s in snapshots))
