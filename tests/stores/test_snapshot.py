"""Scope snapshots: export, import into another scope, validation, proto3 JSON (coreai.v1.ScopeSnapshot)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from coreai.v1 import common_pb2, memory_store_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores.base import TranscriptEntry, TranscriptKind
from pyruntime.stores.persistence import AgentMemoryPersistenceMode, StoreBundle, open_stores
from pyruntime.stores.snapshot import (
    RoleSnapshot,
    ScopeSnapshot,
    export_scope_snapshot,
    import_scope_snapshot,
)

SLOT_1 = AgentMemoryScope("studio", "alice", "slot1", "")
SLOT_2 = AgentMemoryScope("studio", "alice", "slot2", "")
STATE = AgentMemoryState(
    memory="likes swords\nhates bows",
    last_system_prompt="You are a blacksmith.",
    system_prompt_memory_snapshot="likes swords",
    system_prompt_memory_version=1,
    max_memory_versions=10,
    versions=(
        MemoryVersion(1, 1_700_000_000, "write", "likes swords", "chars 0->12 (+12)"),
        MemoryVersion(2, 1_700_000_050, "append", "likes swords\nhates bows", "chars 12->23 (+11)"),
    ),
)
HISTORY = [
    TranscriptEntry(TranscriptKind.USER, "user", "forge me a sword", timestamp=1_700_000_010, is_chat_message=True),
    TranscriptEntry(TranscriptKind.TOOL_CALL, "memory", '{"action":"append"}', call_id="call_1",
                    timestamp=1_700_000_011),
    TranscriptEntry(TranscriptKind.TOOL_RESULT, "memory", '{"Success":true}', call_id="call_1",
                    timestamp=1_700_000_012),
    TranscriptEntry(TranscriptKind.ASSISTANT, "assistant", "Here it is.", timestamp=1_700_000_013,
                    is_chat_message=True),
]


def _open(kind: object, tmp_path: Path, request: pytest.FixtureRequest, **caps: Any) -> StoreBundle:
    """Stores of one kind: a persistence mode (memory or files), or "postgres" (a fresh database)."""
    if kind == "postgres":
        bundle = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, **caps,
                             database_url=request.getfixturevalue("postgres_url"))
        request.addfinalizer(bundle.close)
        return bundle
    assert isinstance(kind, AgentMemoryPersistenceMode)
    return open_stores(kind, tmp_path / "game", **caps)


STORE_KINDS = [AgentMemoryPersistenceMode.SESSION_ONLY, AgentMemoryPersistenceMode.PERSISTENT, "postgres"]


@pytest.fixture(params=STORE_KINDS)
def bundle(request: pytest.FixtureRequest, tmp_path: Path) -> StoreBundle:
    return _open(request.param, tmp_path, request)


def _fill(bundle: StoreBundle, scope: AgentMemoryScope) -> None:
    smith = bundle.scoped(scope)
    smith.save("BlacksmithNPC", STATE)
    smith.append_transcript("BlacksmithNPC", HISTORY)
    smith.save_summary("BlacksmithNPC", "Previous conversation summary:\n- user: hello")
    npc = bundle.scoped(scope, "npc_7")
    npc.append_chat_message("Merchant", "user", "how much?")
    npc.append_chat_message("Merchant", "assistant", "10 gold")


def _without_order(rows: list[TranscriptEntry]) -> list[TranscriptEntry]:
    # The target store numbers rows itself; everything else must survive.
    return [dataclasses.replace(r, order=0) for r in rows]


def _identity_view(bundle: StoreBundle, scope: AgentMemoryScope) -> dict:
    out = {}
    for role, actor in (("BlacksmithNPC", None), ("Merchant", "npc_7"), ("Merchant", None)):
        view = bundle.scoped(scope, actor)
        out[(role, actor)] = (view.try_load(role).state, _without_order(view.get_transcript(role)),
                              [(m.role, m.content, m.timestamp) for m in view.get_chat_history(role)],
                              view.load_summary(role))
    return out


def test_export_names_identities_with_data_only(bundle):
    _fill(bundle, SLOT_1)
    snap = export_scope_snapshot(bundle, SLOT_1, ["BlacksmithNPC", "Merchant", "Unused"], [None, "npc_7"],
                                 clock=lambda: 1_700_000_999.7)
    assert snap.exported_at == 1_700_000_999 and snap.format_version == 1 and snap.scope == SLOT_1
    assert [(r.role_id, r.actor) for r in snap.roles] == [("BlacksmithNPC", None), ("Merchant", "npc_7")]
    smith, merchant = snap.roles
    assert smith.state == STATE
    assert _without_order(smith.history) == HISTORY
    assert smith.summary == "Previous conversation summary:\n- user: hello"
    assert merchant.state is None and merchant.summary is None
    assert [(r.kind, r.name, r.content, r.is_chat_message) for r in merchant.history] == [
        (TranscriptKind.USER, "user", "how much?", True), (TranscriptKind.ASSISTANT, "assistant", "10 gold", True),
    ]


def test_export_then_import_into_another_scope_reproduces_everything(bundle):
    _fill(bundle, SLOT_1)
    snap = export_scope_snapshot(bundle, SLOT_1, ["BlacksmithNPC", "Merchant"], [None, "npc_7"])
    assert import_scope_snapshot(bundle, snap, target_scope=SLOT_2) == 2
    assert _identity_view(bundle, SLOT_2) == _identity_view(bundle, SLOT_1)
    assert _identity_view(bundle, SLOT_2)[("BlacksmithNPC", None)][0].versions == STATE.versions


def test_import_survives_json_and_replaces_what_the_target_had(bundle):
    _fill(bundle, SLOT_1)
    stale = bundle.scoped(SLOT_2)
    stale.save("BlacksmithNPC", AgentMemoryState(memory="stale"))
    stale.append_chat_message("BlacksmithNPC", "user", "stale message")
    stale.save_summary("Merchant", "stale summary")  # Merchant/no actor is not in the snapshot: untouched
    stale_npc = bundle.scoped(SLOT_2, "npc_7")
    stale_npc.save("Merchant", AgentMemoryState(memory="stale npc memory"))
    stale_npc.save_summary("Merchant", "stale npc summary")
    text = export_scope_snapshot(bundle, SLOT_1, ["BlacksmithNPC", "Merchant"], [None, "npc_7"]).to_json()
    import_scope_snapshot(bundle, ScopeSnapshot.from_json(text), target_scope=SLOT_2)
    view = _identity_view(bundle, SLOT_2)
    assert view[("BlacksmithNPC", None)] == _identity_view(bundle, SLOT_1)[("BlacksmithNPC", None)]
    assert view[("Merchant", "npc_7")][0] is None  # the snapshot had no memory: replaced by none
    assert view[("Merchant", "npc_7")][3] is None
    assert view[("Merchant", None)][3] == "stale summary"


def test_import_into_its_own_scope_by_default(bundle):
    snap = ScopeSnapshot(SLOT_1, [RoleSnapshot("Teacher", None, STATE, [], "s")], exported_at=1)
    assert import_scope_snapshot(bundle, snap) == 1
    assert bundle.scoped(SLOT_1).try_load("Teacher").state == STATE


def _valid_role() -> RoleSnapshot:
    return RoleSnapshot("Teacher", None, STATE, list(HISTORY), "summary")


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (lambda s: dataclasses.replace(s, format_version=2), "format_version 2"),
        (lambda s: s.roles.append(RoleSnapshot("  ", None, STATE, [], None)), r"roles\[1\].role_id"),
        (lambda s: s.roles.append(_valid_role()), r"roles\[1\] repeats an identity"),
        (lambda s: s.roles.append(RoleSnapshot("Teacher", "local", None, [], None)), r"roles\[1\] repeats"),
        # a hostile snapshot: a kind and a summary of the wrong type
        (lambda s: s.roles.append(RoleSnapshot("B", None, None, [dataclasses.replace(HISTORY[0], kind=7)],  # type: ignore[arg-type]
                                               None)), r"roles\[1\].history\[0\].kind"),
        (lambda s: s.roles.append(RoleSnapshot("B", None, None, [dataclasses.replace(HISTORY[0], timestamp=-1)],
                                               None)), r"roles\[1\].history\[0\].timestamp"),
        (lambda s: s.roles.append(RoleSnapshot("B", None, STATE.evolve(versions=STATE.versions[:1] * 2), [], None)),
         r"roles\[1\].state.versions\[1\].version 1 is repeated"),
        (lambda s: s.roles.append(RoleSnapshot("B", None, STATE.evolve(memory=None), [], None)),
         r"roles\[1\].state.memory must be a string"),
        (lambda s: s.roles.append(RoleSnapshot("B", None, None, [], 42)), r"roles\[1\].summary"),  # type: ignore[arg-type]
    ],
)
def test_malformed_snapshot_raises_and_writes_nothing(bundle, tmp_path, broken, message):
    snap = ScopeSnapshot(SLOT_2, [_valid_role()], exported_at=1)
    snap = broken(snap) or snap
    with pytest.raises(InvalidArgumentError, match=message):
        import_scope_snapshot(bundle, snap)
    game = tmp_path / "game"  # checked before the reads below, which may create lock files
    assert not game.exists() or [p for p in game.rglob("*") if p.is_file()] == []
    view = bundle.scoped(SLOT_2)
    assert view.try_load("Teacher").state is None  # the valid first role was not written either
    assert view.get_transcript("Teacher") == [] and view.load_summary("Teacher") is None


@pytest.mark.parametrize(
    "data",
    [
        {"formatVersion": 1, "roles": [{"roleId": "a", "history": [{"kind": "TRANSCRIPT_KIND_NOPE"}]}]},
        {"formatVersion": 1, "unknownField": 3},
        {"formatVersion": "one"},
        {"roles": {"roleId": "a"}},
        ["not", "an", "object"],
    ],
)
def test_from_dict_rejects_what_is_not_a_scope_snapshot(data):
    with pytest.raises(InvalidArgumentError, match="snapshot"):
        ScopeSnapshot.from_dict(data)


def test_from_json_rejects_broken_json():
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        ScopeSnapshot.from_json('{"formatVersion": 1')


def _sample() -> ScopeSnapshot:
    return ScopeSnapshot(
        scope=AgentMemoryScope("studio", "alice", "slot1", None),
        roles=[
            RoleSnapshot("BlacksmithNPC", None, STATE, list(HISTORY), "sum"),
            RoleSnapshot("Merchant", "npc_7", None, [dataclasses.replace(HISTORY[0], order=9)], None),
            RoleSnapshot("Empty", None, AgentMemoryState(), [], ""),
            RoleSnapshot("Bare", None, AgentMemoryState(max_memory_versions=0), [], None),
        ],
        exported_at=1_700_000_999,
    )


def test_to_dict_is_the_proto3_json_shape():
    data = _sample().to_dict()
    assert data["formatVersion"] == 1 and data["exportedAt"] == "1700000999"  # int64 as a string
    assert data["scope"] == {"tenantId": "studio", "userId": "alice", "sessionId": "slot1"}
    smith, merchant, empty, bare = data["roles"]
    assert smith["roleId"] == "BlacksmithNPC" and "actor" not in smith
    assert smith["state"]["lastSystemPrompt"] == "You are a blacksmith."
    assert smith["state"]["systemPromptMemoryVersion"] == 1 and smith["state"]["maxMemoryVersions"] == 10
    assert smith["state"]["versions"][0] == {"version": 1, "timestamp": "1700000000", "action": "write",
                                             "contentAfter": "likes swords", "note": "chars 0->12 (+12)"}
    assert smith["history"][0] == {"name": "user", "content": "forge me a sword", "timestamp": "1700000010",
                                   "isChatMessage": True}  # kind USER is proto3's default, so omitted
    assert smith["history"][1] == {"kind": "TRANSCRIPT_KIND_TOOL_CALL", "name": "memory",
                                   "content": '{"action":"append"}', "callId": "call_1", "timestamp": "1700000011"}
    assert smith["summary"] == "sum"
    assert merchant["actor"] == "npc_7" and "state" not in merchant and "summary" not in merchant
    assert merchant["history"][0]["order"] == "9"
    # Present-but-default stays present; the default state still carries max_memory_versions 30.
    assert empty == {"roleId": "Empty", "state": {"maxMemoryVersions": 30}, "summary": ""}
    assert bare == {"roleId": "Bare", "state": {}}


def test_proto3_json_round_trip_through_the_generated_message():
    snap = _sample()
    message = json_format.ParseDict(snap.to_dict(), memory_store_pb2.ScopeSnapshot())
    assert json_format.MessageToDict(message) == snap.to_dict()
    assert message.roles[0].history[2].kind == common_pb2.TRANSCRIPT_KIND_TOOL_RESULT
    assert message.roles[2].HasField("summary") and not message.roles[1].HasField("summary")
    assert ScopeSnapshot.from_dict(json_format.MessageToDict(message)) == snap
    assert ScopeSnapshot.from_json(snap.to_json()) == snap
    assert json.loads(snap.to_json()) == snap.to_dict()


def test_from_dict_accepts_every_proto3_json_spelling():
    # Parsers must accept original field names, numeric enums and int64 as numbers.
    snap = ScopeSnapshot.from_dict({
        "format_version": 1,
        "exported_at": 5,
        "roles": [{"role_id": "R", "history": [{"kind": 2, "call_id": "c", "timestamp": 7}]}],
    })
    assert snap.exported_at == 5 and snap.scope == AgentMemoryScope()
    assert snap.roles[0].history[0] == TranscriptEntry(TranscriptKind.TOOL_CALL, "", "", call_id="c", timestamp=7)


@pytest.mark.parametrize("mode", STORE_KINDS)
def test_export_keeps_chat_that_left_the_transcript_window(tmp_path, mode, request):
    bundle = _open(mode, tmp_path, request, chat_cap=5, transcript_cap=4)
    view = bundle.scoped(SLOT_1)
    for i in range(3):
        view.append_chat_message("Teacher", "user", f"m{i}")
    view.append_transcript("Teacher", [TranscriptEntry(TranscriptKind.TOOL_RESULT, "t", f"r{i}") for i in range(10)])
    (role,) = export_scope_snapshot(bundle, SLOT_1, ["Teacher"]).roles
    assert [r.content for r in role.history] == ["m0", "m1", "m2", "r6", "r7", "r8", "r9"]
    orders = [r.order for r in role.history]
    assert orders == sorted(orders)
