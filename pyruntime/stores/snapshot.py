"""Scope snapshots: all data of one scope for save slots and cloud saves (`coreai.v1.ScopeSnapshot`).

The conversions of its parts to `coreai.v1` messages are `proto_convert.py`'s.
"""

from __future__ import annotations

import contextvars
import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor

from coreai.v1 import memory_store_pb2
from pyruntime.errors import InvalidArgumentError, LimitExceededError, MemoryUnreadableError
from pyruntime.jsonlimits import check_json_depth, check_json_shape, refuse_repeated_keys
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.scopes import ANONYMOUS_ACTOR, AgentMemoryScope, normalize_role_id, storage_key
from pyruntime.stores import fileio
from pyruntime.stores.base import ChecksImports, LoadStatus, TranscriptEntry, TranscriptKind, chat_kind
from pyruntime.stores.file_layout import AGENT_MEMORY_DIR, SUMMARIES_DIR, file_stem
from pyruntime.stores.identity_index import IdentityIndex, is_hashed_stem
from pyruntime.stores.persistence import StoreBundle
from pyruntime.stores.proto_convert import (
    TRANSCRIPT_KIND_VALUES,
    entry_from_proto,
    entry_to_proto,
    scope_from_proto,
    scope_to_proto,
    state_from_proto,
    state_to_proto,
)
from pyruntime.stores.scoped import ScopedAgentMemoryStore

# The conversions to coreai.v1 messages are proto_convert.py's; re-exported here, where callers always found them.
__all__ = [
    "SNAPSHOT_FORMAT_VERSION", "RoleSnapshot", "ScopeSnapshot", "UnattributedSavesError", "entry_from_proto",
    "entry_to_proto", "export_scope_snapshot", "import_scope_snapshot", "scope_from_proto", "scope_to_proto",
    "state_from_proto", "state_to_proto", "validate_scope_snapshot",
]

SNAPSHOT_FORMAT_VERSION = 1
_REPLACED_STEM = re.compile(r"_[0-9a-f]{8}$")
IMPORT_WORKERS = 8


@dataclass
class RoleSnapshot:
    """Everything one identity (role + actor) has in one scope."""

    role_id: str
    actor: str | None
    state: AgentMemoryState | None
    history: list[TranscriptEntry] = field(default_factory=list)
    summary: str | None = None


@dataclass
class ScopeSnapshot:
    """All exported identities of one scope; serialises to the proto3 JSON of `coreai.v1.ScopeSnapshot`."""

    scope: AgentMemoryScope
    roles: list[RoleSnapshot]
    exported_at: int
    format_version: int = SNAPSHOT_FORMAT_VERSION

    def to_proto(self) -> memory_store_pb2.ScopeSnapshot:
        """The `coreai.v1.ScopeSnapshot` message."""
        message = memory_store_pb2.ScopeSnapshot(format_version=self.format_version, exported_at=self.exported_at)
        message.scope.CopyFrom(scope_to_proto(self.scope))
        for role in self.roles:
            out = message.roles.add(role_id=role.role_id, actor=role.actor or "")
            if role.state is not None:
                out.state.CopyFrom(state_to_proto(role.state))
            out.history.extend(entry_to_proto(e) for e in role.history)
            if role.summary is not None:
                out.summary = role.summary
        return message

    @classmethod
    def from_proto(cls, message: memory_store_pb2.ScopeSnapshot) -> ScopeSnapshot:
        """The snapshot held by a `coreai.v1.ScopeSnapshot` message."""
        roles = [
            RoleSnapshot(
                role_id=r.role_id,
                actor=r.actor or None,
                state=state_from_proto(r.state) if r.HasField("state") else None,
                history=[entry_from_proto(e) for e in r.history],
                summary=r.summary if r.HasField("summary") else None,
            )
            for r in message.roles
        ]
        return cls(scope_from_proto(message.scope), roles, message.exported_at, message.format_version)

    def to_dict(self) -> dict[str, Any]:
        """Proto3 JSON: camelCase names, int64 as strings, enums as names, defaults omitted."""
        return json_format.MessageToDict(self.to_proto())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScopeSnapshot:
        """Parse proto3 JSON; anything that is not a valid ScopeSnapshot is an InvalidArgumentError."""
        if not isinstance(data, dict):
            raise InvalidArgumentError("snapshot must be a JSON object")
        check_json_shape(data, cast(Descriptor, memory_store_pb2.ScopeSnapshot.DESCRIPTOR), "snapshot")
        try:
            message = json_format.ParseDict(data, memory_store_pb2.ScopeSnapshot())
        except json_format.ParseError as exc:
            raise InvalidArgumentError(f"snapshot is not a valid coreai.v1.ScopeSnapshot: {exc}") from exc
        return cls.from_proto(message)

    def to_json(self) -> str:
        """The proto3 JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ScopeSnapshot:
        """Parse proto3 JSON text; an object that repeats a key is refused (which one would win is a guess)."""
        if isinstance(text, (str, bytes)):
            check_json_depth(text, "snapshot")
        try:
            data = json.loads(text, object_pairs_hook=refuse_repeated_keys)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"snapshot is not valid JSON: {exc}") from exc
        return cls.from_dict(data)


# -- export / import -------------------------------------------------------


def _actor_id(actor: str | None) -> str | None:
    # "local" and blank are the anonymous actor: recorded as no actor.
    value = (actor or "").strip()
    return None if not value or value == ANONYMOUS_ACTOR else value


def _history(view: ScopedAgentMemoryStore, role_id: str) -> list[TranscriptEntry]:
    """Persisted transcript rows plus chat messages still in the chat window that left the transcript window.

    Rows appended with persist=False (session-only chat) are never exported: they exist in this process only.
    """
    rows = view.get_transcript(role_id, persisted_only=True)
    seen = {(r.order, r.name, r.content, r.timestamp) for r in rows if r.is_chat_message}
    older = [
        TranscriptEntry(kind=chat_kind(m.role), name=m.role, content=m.content, timestamp=m.timestamp,
                        order=m.order, is_chat_message=True)
        for m in view.get_chat_history(role_id, persisted_only=True)
        if (m.order, m.role, m.content, m.timestamp) not in seen
    ]
    return older + rows


class UnattributedSavesError(MemoryUnreadableError):
    """An export of every save of a scope found saves it cannot attribute to a role and actor."""


def _same_scope(a: AgentMemoryScope, b: AgentMemoryScope) -> bool:
    return a.parts() == b.parts()


def _indexed_identities(
    bundle: StoreBundle,
    scope: AgentMemoryScope,
    actors: Sequence[str | None] | None,
    candidate_roles: Sequence[str],
) -> list[tuple[str, str | None]]:
    """(role, actor) of every save of scope the identity index knows, after attributing what it can.

    A save the index does not know (written before it existed) is attributed when it is a candidate
    role (the policy's) with one of the actors, or a bare role file of the empty scope; any other
    save that could belong to scope raises UnattributedSavesError with their number.
    """
    index = getattr(bundle.memory, "identities", None)
    if not isinstance(index, IdentityIndex):
        raise InvalidArgumentError("these stores keep no identity index: name the roles to export")
    wanted_actors = None if actors is None else {_actor_id(a) for a in actors}
    known = index.identities()
    found: dict[str, tuple[str, str | None]] = {}
    for key, identity in known.items():
        if _same_scope(identity.scope, scope) and (wanted_actors is None or identity.actor in wanted_actors):
            found[key] = (identity.role_id, identity.actor)
    known_stems = {file_stem(key) for key in known}
    unknown = index.stored_stems((AGENT_MEMORY_DIR, SUMMARIES_DIR)) - known_stems
    if unknown:
        guess_actors = [None] if wanted_actors is None else sorted(wanted_actors, key=lambda a: a or "")
        for role in candidate_roles:
            for actor in guess_actors:
                key = storage_key(role, scope, actor)
                stem = file_stem(key)
                if stem in unknown:
                    unknown.discard(stem)
                    found[key] = (normalize_role_id(role), actor)
        if scope.is_empty and (wanted_actors is None or None in wanted_actors):
            for stem in [s for s in unknown if not is_hashed_stem(s)]:
                if _REPLACED_STEM.search(stem):
                    continue  # `<role with _ for bad characters>_<fnv8>`: the role id itself is lost
                try:
                    if file_stem(stem) == stem:  # a role id without replaced characters is its own stem
                        found[stem] = (normalize_role_id(stem), None)
                        unknown.discard(stem)
                except InvalidArgumentError:
                    pass
        # Hashed stems may be this scope's; bare stems belong to the empty scope only.
        unattributed = [s for s in unknown if is_hashed_stem(s) or scope.is_empty]
        if scope.is_empty:
            unattributed = [s for s in unattributed if not s.startswith("scope-v1-")]
        if unattributed:
            raise UnattributedSavesError(
                f"{len(unattributed)} save(s) in the data folder cannot be attributed to a role and actor (written "
                "before the identity index existed), so an export of every save of this scope would be incomplete; "
                "nothing was exported. Name the roles (and actors) to export: that also indexes them")
    return sorted(found.values(), key=lambda ra: (ra[0], ra[1] or ""))


def export_scope_snapshot(
    bundle: StoreBundle,
    scope: AgentMemoryScope,
    role_ids: Sequence[str] | None,
    actors: Sequence[str | None] | None = (None,),
    clock: Callable[[], float] = time.time,
    candidate_roles: Sequence[str] = (),
) -> ScopeSnapshot:
    """Snapshot of scope: the named roles x actors, or (role_ids None) every save the scope has.

    role_ids None finds the saves through the identity index (actors None: every actor; else only
    those); a save it cannot attribute fails the export (UnattributedSavesError, FAILED_PRECONDITION)
    rather than leaving it out. Identities with no data are left out. An unreadable memory document
    raises MemoryUnreadableError rather than being exported as absent. Every exported identity is
    recorded in the index.
    """
    if isinstance(role_ids, str) or isinstance(actors, str):
        raise InvalidArgumentError("role_ids and actors must be sequences, not a single string")
    if role_ids is None:
        pairs = _indexed_identities(bundle, scope, actors, candidate_roles)
    else:
        pairs = [(normalize_role_id(r), _actor_id(a)) for r in role_ids for a in (actors or (None,))]
    roles: list[RoleSnapshot] = []
    seen_keys: set[str] = set()
    for role, actor in pairs:
        actor_id = _actor_id(actor)
        view = bundle.scoped(scope, actor_id)
        key = view.key(role)
        if key in seen_keys:
            continue
        seen_keys.add(key)
        loaded = view.try_load(role)
        if loaded.status is LoadStatus.FAILED:
            raise MemoryUnreadableError(f"a memory document of the exported scope cannot be read ({loaded.reason}); "
                                        "nothing exported")
        state = loaded.state if loaded.status is LoadStatus.LOADED else None
        history = _history(view, role)
        summary = view.load_summary(role, persisted_only=True)  # a session-only summary stays in memory
        if state is None and not history and summary is None:
            continue
        index = getattr(bundle.memory, "identities", None)
        if isinstance(index, IdentityIndex):
            index.record(key)  # noted by view.key(): a named (or guessed) save is found next time
        roles.append(RoleSnapshot(role, actor_id, state, history, summary))
    return ScopeSnapshot(scope=scope, roles=roles, exported_at=int(clock()))


def validate_scope_snapshot(snapshot: ScopeSnapshot, target_scope: AgentMemoryScope | None = None) -> None:
    """Raise InvalidArgumentError naming the first problem; a valid snapshot passes silently."""
    if not isinstance(snapshot, ScopeSnapshot):
        raise InvalidArgumentError("snapshot must be a ScopeSnapshot")
    if snapshot.format_version != SNAPSHOT_FORMAT_VERSION:
        raise InvalidArgumentError(
            f"unsupported snapshot format_version {snapshot.format_version!r} (expected {SNAPSHOT_FORMAT_VERSION})")
    scope = target_scope if target_scope is not None else snapshot.scope
    if not isinstance(scope, AgentMemoryScope):
        raise InvalidArgumentError("snapshot scope must be an AgentMemoryScope")
    if not isinstance(snapshot.exported_at, int) or snapshot.exported_at < 0:
        raise InvalidArgumentError("snapshot exported_at must be a non-negative integer")
    keys: set[str] = set()
    for index, role in enumerate(snapshot.roles):
        where = f"roles[{index}]"
        if not isinstance(role, RoleSnapshot):
            raise InvalidArgumentError(f"{where} must be a RoleSnapshot")
        if not isinstance(role.role_id, str) or not role.role_id.strip():
            raise InvalidArgumentError(f"{where}.role_id is required and must not be blank")
        if role.actor is not None and not isinstance(role.actor, str):
            raise InvalidArgumentError(f"{where}.actor must be a string")
        key = storage_key(role.role_id, scope, _actor_id(role.actor))
        if key in keys:
            raise InvalidArgumentError(f"{where} repeats an identity (same role and actor) of an earlier role")
        keys.add(key)
        if role.state is not None:
            _validate_state(role.state, f"{where}.state")
        if not isinstance(role.history, list):
            raise InvalidArgumentError(f"{where}.history must be a list")
        for row_index, row in enumerate(role.history):
            _validate_entry(row, f"{where}.history[{row_index}]")
        if role.summary is not None and not isinstance(role.summary, str):
            raise InvalidArgumentError(f"{where}.summary must be a string")


def _validate_state(state: object, where: str) -> None:
    if not isinstance(state, AgentMemoryState):
        raise InvalidArgumentError(f"{where} must be an AgentMemoryState")
    for name in ("memory", "last_system_prompt", "system_prompt_memory_snapshot"):
        if not isinstance(getattr(state, name), str):
            raise InvalidArgumentError(f"{where}.{name} must be a string")
    if not isinstance(state.system_prompt_memory_version, int) or state.system_prompt_memory_version < 0:
        raise InvalidArgumentError(f"{where}.system_prompt_memory_version must be a non-negative integer")
    if not isinstance(state.max_memory_versions, int):
        raise InvalidArgumentError(f"{where}.max_memory_versions must be an integer")
    numbers: set[int] = set()
    for index, version in enumerate(state.versions):
        vwhere = f"{where}.versions[{index}]"
        if not isinstance(version, MemoryVersion):
            raise InvalidArgumentError(f"{vwhere} must be a MemoryVersion")
        if not isinstance(version.version, int) or version.version < 1:
            raise InvalidArgumentError(f"{vwhere}.version must be a positive integer")
        if version.version in numbers:
            raise InvalidArgumentError(f"{vwhere}.version {version.version} is repeated")
        numbers.add(version.version)
        if not isinstance(version.timestamp, int) or version.timestamp < 0:
            raise InvalidArgumentError(f"{vwhere}.timestamp must be a non-negative integer")
        for name in ("action", "content_after", "note"):
            if not isinstance(getattr(version, name), str):
                raise InvalidArgumentError(f"{vwhere}.{name} must be a string")


def _validate_entry(row: object, where: str) -> None:
    if not isinstance(row, TranscriptEntry):
        raise InvalidArgumentError(f"{where} must be a TranscriptEntry")
    if isinstance(row.kind, bool) or row.kind not in TRANSCRIPT_KIND_VALUES:
        raise InvalidArgumentError(f"{where}.kind {row.kind!r} is not a TranscriptKind (0-3)")
    if not isinstance(row.name, str) or not isinstance(row.content, str):
        raise InvalidArgumentError(f"{where}.name and content must be strings")
    if row.call_id is not None and not isinstance(row.call_id, str):
        raise InvalidArgumentError(f"{where}.call_id must be a string")
    if not isinstance(row.timestamp, int) or row.timestamp < 0:
        raise InvalidArgumentError(f"{where}.timestamp must be a non-negative integer")
    if not isinstance(row.is_chat_message, bool):
        raise InvalidArgumentError(f"{where}.is_chat_message must be a boolean")


def _check_every_role(bundle: StoreBundle, scope: AgentMemoryScope, roles: Sequence[RoleSnapshot]) -> None:
    """What each role's writes would refuse (a file over its limit, an id colliding in case), before the first
    write: a role refused halfway would leave the roles before it imported."""
    stores = [s for s in (bundle.memory, bundle.summaries) if isinstance(s, ChecksImports)]
    if not stores:
        return
    for index, role in enumerate(roles):
        key = bundle.scoped(scope, _actor_id(role.actor)).key(role.role_id)
        try:
            for store in stores:
                store.check_import(key, role.state, role.history, role.summary)
        except LimitExceededError as exc:
            raise LimitExceededError(f"roles[{index}]: {exc}; no role was imported") from None
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"roles[{index}]: {exc}; no role was imported") from None


def import_scope_snapshot(
    bundle: StoreBundle,
    snapshot: ScopeSnapshot,
    target_scope: AgentMemoryScope | None = None,
) -> int:
    """Replace each snapshot identity's memory, history and summary in target_scope (default: its own).

    The whole snapshot is validated, and every role checked against the stores' limits, before anything is
    written. Returns the number of roles imported.
    """
    validate_scope_snapshot(snapshot, target_scope)
    scope = target_scope if target_scope is not None else snapshot.scope
    _check_every_role(bundle, scope, snapshot.roles)

    def import_role(role: RoleSnapshot) -> None:
        view = bundle.scoped(scope, _actor_id(role.actor))
        if role.state is not None:
            view.save(role.role_id, role.state)
        else:
            view.clear(role.role_id)
        view.clear_chat_history(role.role_id)  # also clears the summary
        if role.history:
            view.append_transcript(role.role_id, [replace(r, kind=TranscriptKind(r.kind)) for r in role.history])
        if role.summary is not None:
            view.save_summary(role.role_id, role.summary)

    if len(snapshot.roles) <= 1:
        for role in snapshot.roles:
            import_role(role)
        return len(snapshot.roles)
    # Thousands of roles: each role's files are its own (own keys, own locks), so they are written in
    # parallel (fsync waits overlap) and each folder is fsynced once at the end.
    with fileio.batched_directory_sync():
        context = contextvars.copy_context()
        workers = min(IMPORT_WORKERS, len(snapshot.roles))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="coreai-import") as pool:
            futures = [pool.submit(context.copy().run, import_role, role) for role in snapshot.roles]
            for future in futures:
                future.result()  # the first failure is raised (after the others finished)
    return len(snapshot.roles)
