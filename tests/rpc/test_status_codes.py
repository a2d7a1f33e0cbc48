"""Every status code through both transports: the right code, a message naming the problem, nothing changed."""

from __future__ import annotations

import pytest

from coreai.v1 import common_pb2
from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client import (
    RuntimeCallError,
    RuntimeClient,
    RuntimeInvalidArgumentError,
    RuntimeLimitExceededError,
    RuntimeMemoryUnreadableError,
    RuntimeNotFoundError,
    RuntimeUnavailableError,
    UnauthenticatedError,
)
from pyruntime.client._transports import ORCHESTRATOR
from pyruntime.errors import InvalidArgumentError, LimitExceededError, MemoryUnreadableError, NotFoundError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.policy import RoleMemoryConfig
from pyruntime.scopes import AgentMemoryScope, storage_key
from pyruntime.service import StatusCode
from pyruntime.stores import LoadStatus, RoleSnapshot, ScopeSnapshot
from tests.rpc.conftest import Runtime, files_snapshot

SCOPE = AgentMemoryScope(user_id="u1")


def seed(client: RuntimeClient) -> None:
    """One document with two versions, a chat message and a summary."""
    client.apply_memory_tool("Teacher", {"action": "write", "content": "one"}, scope=SCOPE)
    client.apply_memory_tool("Teacher", {"action": "append", "content": "two"}, scope=SCOPE)
    client.append_chat_message("Teacher", "user", "hi", scope=SCOPE)
    client.save_summary("Teacher", "sum", scope=SCOPE)


@pytest.mark.parametrize("call", [
    pytest.param(lambda c: c.apply_memory_tool(" ", {"action": "read"}), id="blank-role"),
    pytest.param(lambda c: c.append_chat_message("", "user", "x"), id="blank-role-chat"),
    pytest.param(lambda c: c.load_state("Teacher", scope=AgentMemoryScope(user_id="a\nb")), id="control-char-scope"),
    pytest.param(lambda c: c.load_state("Teacher", scope=AgentMemoryScope(session_id="s" * 300)), id="long-scope"),
    pytest.param(lambda c: c.apply_memory_tool("Teacher", '{"action": "write", '), id="malformed-json-args"),
    pytest.param(lambda c: c.apply_memory_tool("Teacher", {"action": "explode"}), id="unknown-action"),
    pytest.param(lambda c: c.apply_memory_tool("Teacher", {"action": "write", "conent": "x"}), id="unknown-arg"),
    pytest.param(lambda c: c.apply_memory_tool("Teacher", {}), id="no-action"),
    pytest.param(lambda c: c.get_chat_history("Teacher", -1, scope=SCOPE), id="negative-window"),
    pytest.param(lambda c: c.append_chat_message("Teacher", " ", "x", scope=SCOPE), id="blank-chat-role"),
    pytest.param(lambda c: c.save_state("Teacher", AgentMemoryState(versions=(MemoryVersion(0, 1, "w", "", ""),)),
                                        scope=SCOPE), id="malformed-state"),
    pytest.param(lambda c: c.import_snapshot(ScopeSnapshot(SCOPE, [RoleSnapshot(" ", None, None)], 1)),
                 id="malformed-snapshot"),
    pytest.param(lambda c: c.import_snapshot(ScopeSnapshot(SCOPE, [], 1, format_version=9)), id="snapshot-version"),
    # Built as a raw proto: the client's own RoleMemoryConfig already refuses a role id this long.
    pytest.param(lambda c: c._transport.unary(ORCHESTRATOR, "ConfigureRole", orch.ConfigureRoleRequest(
        config=common_pb2.RoleMemoryConfig(role_id="x" * 300))), id="long-role-config"),
])
def test_bad_input_is_invalid_argument_and_changes_nothing(runtime: Runtime, client: RuntimeClient, call) -> None:
    seed(client)
    before = files_snapshot(runtime.data_dir)
    with pytest.raises(RuntimeInvalidArgumentError) as error:
        call(client)
    assert isinstance(error.value, InvalidArgumentError) and error.value.code is StatusCode.INVALID_ARGUMENT
    assert str(error.value) and "Traceback" not in str(error.value)
    assert files_snapshot(runtime.data_dir) == before


def test_unknown_version_is_not_found(runtime: Runtime, client: RuntimeClient) -> None:
    seed(client)
    before = files_snapshot(runtime.data_dir)
    with pytest.raises(RuntimeNotFoundError, match="version 9 is not retained"):
        client.revert_memory("Teacher", 9, scope=SCOPE)
    with pytest.raises(NotFoundError, match=r"version\(s\) 7 not retained"):
        client.diff_versions("Teacher", 1, 7, scope=SCOPE)
    with pytest.raises(RuntimeNotFoundError, match="no memory document"):
        client.revert_memory("Nobody", 1, scope=SCOPE)
    assert files_snapshot(runtime.data_dir) == before


def test_unreadable_document_is_failed_precondition_and_never_overwritten(runtime: Runtime,
                                                                         client: RuntimeClient) -> None:
    seed(client)
    document = runtime.memory_dir / f"{storage_key('Teacher', SCOPE)}.json"
    document.write_bytes(b"{ not json")
    for call in (lambda: client.apply_memory_tool("Teacher", {"action": "append", "content": "x"}, scope=SCOPE),
                 lambda: client.apply_memory_tool("Teacher", {"action": "read"}, scope=SCOPE),
                 lambda: client.list_versions("Teacher", scope=SCOPE),
                 lambda: client.revert_memory("Teacher", 1, scope=SCOPE),
                 lambda: client.export_snapshot(SCOPE, role_ids=["Teacher"])):
        with pytest.raises(RuntimeMemoryUnreadableError) as error:
            call()
        assert isinstance(error.value, MemoryUnreadableError) and "be read" in str(error.value)
    assert document.read_bytes() == b"{ not json"
    # LoadState reports it as the contract's Failed, and SaveState heals it.
    assert client.load_state("Teacher", scope=SCOPE).status is LoadStatus.FAILED
    client.save_state("Teacher", AgentMemoryState(memory="healed"), scope=SCOPE)
    assert client.apply_memory_tool("Teacher", {"action": "read"}, scope=SCOPE).memory == "healed"


def test_max_memory_chars_is_resource_exhausted(runtime: Runtime, client: RuntimeClient) -> None:
    seed(client)
    before = files_snapshot(runtime.data_dir)
    with pytest.raises(RuntimeLimitExceededError, match=r"over the limit of 16000 chars \(MaxMemoryChars\)") as error:
        client.apply_memory_tool("Teacher", {"action": "append", "content": "x" * 16001}, scope=SCOPE)
    assert isinstance(error.value, LimitExceededError) and error.value.code is StatusCode.RESOURCE_EXHAUSTED
    assert files_snapshot(runtime.data_dir) == before


def test_request_over_the_size_limit_is_resource_exhausted(runtime: Runtime, client: RuntimeClient) -> None:
    before = files_snapshot(runtime.data_dir)
    with pytest.raises(RuntimeLimitExceededError):
        client.save_summary("Teacher", "y" * (5 * 1024 * 1024), scope=SCOPE)
    assert files_snapshot(runtime.data_dir) == before


def test_wrong_or_missing_token_is_unauthenticated(runtime: Runtime, transport: str) -> None:
    for token in ("wrong-token-0123456789", " "):
        with runtime.client(transport, token=token) as intruder:
            with pytest.raises(UnauthenticatedError, match="bearer token") as error:
                intruder.apply_memory_tool("Teacher", {"action": "write", "content": "pwned"}, scope=SCOPE)
            assert error.value.code is StatusCode.UNAUTHENTICATED
            with pytest.raises(UnauthenticatedError):
                list(intruder.stream_task("hi"))
    assert files_snapshot(runtime.data_dir) == {}


def test_turns_without_a_model_are_unavailable(client: RuntimeClient) -> None:
    with pytest.raises(RuntimeUnavailableError, match="no model is configured"):
        client.run_task("hello", role_id="AINpc")
    with pytest.raises(RuntimeUnavailableError, match="no model is configured"):
        list(client.stream_task("hello"))
    # Bad turn input is refused before the model question comes up.
    with pytest.raises(RuntimeInvalidArgumentError, match="timeout_ms"):
        client.run_task("hello", timeout_ms=-5)


def test_every_failure_is_a_runtime_call_error(client: RuntimeClient) -> None:
    with pytest.raises(RuntimeCallError):
        client.diff_versions("Teacher", 1, 2, scope=SCOPE)
