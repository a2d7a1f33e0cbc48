"""The conversation id a load balancer keeps each conversation on one runtime by, and which calls carry it.

Pure: the id of (role, scope, actor) and the id each client request names. That both transports put it on
the wire, and that nginx keeps a conversation on one runtime by it, is tested with the real balancer
(tests/rpc/test_scale_out.py); the C# client's ids are checked against these in tests/unity.
"""

from __future__ import annotations

import hashlib

import pytest

from coreai.v1 import memory_store_pb2 as ms
from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client import _messages as m
from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import AgentMemoryScope, conversation_id, storage_key

ALEX = AgentMemoryScope("studio", "alex", "slot1", None)


def test_the_id_is_the_sha256_of_the_storage_key_and_holds_no_id_in_clear():
    key = storage_key("Innkeeper", ALEX, "guard_7")
    assert conversation_id("Innkeeper", ALEX, "guard_7") == hashlib.sha256(key.encode()).hexdigest()
    assert conversation_id("Innkeeper") == hashlib.sha256(b"Innkeeper").hexdigest()
    for value in ("Innkeeper", "studio", "alex", "slot1", "guard_7"):
        assert value not in conversation_id("Innkeeper", ALEX, "guard_7")


def test_golden_ids_pinned_for_the_csharp_client():
    # The C# client computes the same ids (tests/unity checks it against these): a change here moves every
    # conversation of a running deployment to another runtime.
    assert conversation_id("Innkeeper", ALEX) == (
        "74406719aa5b0d45b6d7b15592cbdac51652fd7d83769b966bc281dba4a5b637")


def test_one_conversation_per_role_scope_and_actor():
    ids = {conversation_id("Innkeeper", ALEX), conversation_id("Smith", ALEX),
           conversation_id("Innkeeper", AgentMemoryScope("studio", "sam", "slot1")),
           conversation_id("Innkeeper", ALEX, "guard_7"), conversation_id("Innkeeper")}
    assert len(ids) == 5
    assert conversation_id(" Innkeeper ", ALEX, "local") == conversation_id("Innkeeper", ALEX)  # the same save


def test_a_bad_role_has_no_id():
    with pytest.raises(InvalidArgumentError):
        conversation_id("  ", ALEX)


def test_store_calls_name_their_target_and_turns_default_to_creator():
    load = ms.LoadStateRequest(target=m.target("Innkeeper", ALEX, None))
    assert m.affinity(load) == conversation_id("Innkeeper", ALEX)
    turn = m.task_request("hello", "", ALEX, None, {})
    assert m.affinity(turn, "Creator") == conversation_id("Creator", ALEX)
    assert m.affinity(ms.LoadStateRequest(target=m.target("", ALEX, None))) == ""  # refused by any runtime alike
    assert m.affinity(ms.ExportSnapshotRequest()) == ""  # names no one conversation: any runtime
    assert m.affinity(orch.HealthRequest()) == ""
    assert m.conversation_affinity("Innkeeper", ALEX, "guard_7") == conversation_id("Innkeeper", ALEX, "guard_7")
