"""Issue 9 through both transports: hostile input and saves get the right status, change nothing, and a stuck
lock holder fails only its own save. Requests are built as raw protos, so the server (not the client) judges them."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coreai.v1 import common_pb2, memory_store_pb2 as ms, orchestrator_pb2 as orch
from pyruntime.client import RuntimeCallError, RuntimeClient
from pyruntime.client._transports import MEMORY_STORE, ORCHESTRATOR
from pyruntime.scopes import MAX_ROLE_ID_BYTES, AgentMemoryScope
from pyruntime.service import RuntimeServices, StatusCode
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from pyruntime.stores import fileio
from pyruntime.stores.file_layout import file_stem
from tests.rpc.conftest import Runtime, files_snapshot, start_runtime

ALEX = common_pb2.AgentMemoryScope(user_id="alex")


def target(role: str, scope: common_pb2.AgentMemoryScope | None = None, actor: str = "") -> common_pb2.AgentTarget:
    return common_pb2.AgentTarget(role_id=role, scope=scope or common_pb2.AgentMemoryScope(), actor=actor)


def call(client: RuntimeClient, rpc: str, request, service: str = MEMORY_STORE):
    return client._transport.unary(service, rpc, request)


def status_of(client: RuntimeClient, rpc: str, request, service: str = MEMORY_STORE) -> tuple[StatusCode, str]:
    with pytest.raises(RuntimeCallError) as error:
        call(client, rpc, request, service)
    assert "Traceback" not in str(error.value)
    return error.value.code, str(error.value)


def write(client: RuntimeClient, role: str, content: str, scope=None) -> ms.MemoryToolResult:
    return call(client, "ApplyMemoryTool", ms.ApplyMemoryToolRequest(target=target(role, scope), action="write",
                                                                     content=content))


def memory_file(runtime: Runtime, role: str) -> Path:
    return runtime.memory_dir / (file_stem(role) + ".json")


# -- bad client input: INVALID_ARGUMENT, nothing written -------------------------------------------


def test_deeply_nested_tool_arguments_are_invalid_argument(runtime: Runtime, client: RuntimeClient) -> None:
    write(client, "Teacher", "kept")
    before = files_snapshot(runtime.data_dir)
    deep = '{"action": "append", "content": ' + "[" * 1000 + "]" * 1000 + "}"
    code, message = status_of(client, "ApplyMemoryTool",
                              ms.ApplyMemoryToolRequest(target=target("Teacher"), arguments_json=deep))
    assert code is StatusCode.INVALID_ARGUMENT and "nesting deeper than" in message
    assert files_snapshot(runtime.data_dir) == before


@pytest.mark.parametrize("role", ["..", ".", "a" * 237, "a" * 241, "x" * (MAX_ROLE_ID_BYTES + 1)])
@pytest.mark.parametrize("rpc,request_of", [
    ("ApplyMemoryTool", lambda t: ms.ApplyMemoryToolRequest(target=t, action="append", content="x")),
    ("ApplyMemoryTool", lambda t: ms.ApplyMemoryToolRequest(target=t, action="read")),
    ("AppendChatMessage", lambda t: ms.AppendChatMessageRequest(target=t, role="user", content="x")),
    ("LoadState", lambda t: ms.LoadStateRequest(target=t)),
    ("SaveSummary", lambda t: ms.SaveSummaryRequest(target=t, summary="x")),
], ids=["apply-append", "apply-read", "append-chat", "load-state", "save-summary"])
def test_role_ids_that_cannot_be_stored_are_invalid_argument_on_every_rpc(runtime: Runtime, client: RuntimeClient,
                                                                        role: str, rpc: str, request_of) -> None:
    for scope in (None, ALEX):
        code, message = status_of(client, rpc, request_of(target(role, scope)))
        assert code is StatusCode.INVALID_ARGUMENT and "role_id" in message
    assert files_snapshot(runtime.data_dir) == {}


def test_the_longest_role_id_is_stored(runtime: Runtime, client: RuntimeClient) -> None:
    role = "r" * MAX_ROLE_ID_BYTES
    assert write(client, role, "fits").success
    call(client, "AppendChatMessage", ms.AppendChatMessageRequest(target=target(role), role="user", content="x"))
    assert call(client, "LoadState", ms.LoadStateRequest(target=target(role))).state.memory == "fits"


def test_infinite_temperature_is_refused_by_configure_role(client: RuntimeClient) -> None:
    before = call(client, "GetRoleConfig", orch.GetRoleConfigRequest(role_id="Merchant"), ORCHESTRATOR)
    for value in (float("inf"), float("nan"), -1.0, 1e300):
        config = common_pb2.RoleMemoryConfig(role_id="Merchant", temperature=value)
        code, message = status_of(client, "ConfigureRole", orch.ConfigureRoleRequest(config=config), ORCHESTRATOR)
        assert code is StatusCode.INVALID_ARGUMENT and "temperature" in message
    assert call(client, "GetRoleConfig", orch.GetRoleConfigRequest(role_id="Merchant"), ORCHESTRATOR) == before


def test_a_json_array_for_a_message_is_invalid_argument_and_never_blanks_a_save(runtime: Runtime) -> None:
    with runtime.client("connect") as client:
        write(client, "Teacher", "precious")
    before = files_snapshot(runtime.data_dir)
    for body in ({"target": {"roleId": "Teacher"}, "state": []}, []):
        response = httpx.post(f"{runtime.handle.connect_url}/coreai.v1.MemoryStore/SaveState", json=body,
                              headers={"Authorization": f"Bearer {runtime.token}"}, timeout=30)
        assert response.status_code == 400 and response.json()["code"] == "invalid_argument"
        assert "must be a JSON object" in response.json()["message"]
    assert files_snapshot(runtime.data_dir) == before


# -- unreadable saves: FAILED_PRECONDITION (LoadState: FAILED), never rewritten --------------------


@pytest.mark.parametrize("document", [b'{"memory":"x","maxMemoryVersions":NaN}', b'{"memory":"x","maxMemoryVersions":Infinity}',
                                      b'{"memory":"x","systemPromptMemoryVersion":1e999}',
                                      b'{"memory":"x","systemPromptMemoryVersion":8589934592}'],
                         ids=["nan", "infinity", "1e999", "int-over-32-bits"])
def test_a_save_with_non_finite_or_huge_numbers_is_unreadable_everywhere(runtime: Runtime, client: RuntimeClient,
                                                                        document: bytes) -> None:
    path = memory_file(runtime, "Teacher")
    path.parent.mkdir(parents=True)
    path.write_bytes(document)
    loaded = call(client, "LoadState", ms.LoadStateRequest(target=target("Teacher")))
    assert loaded.status == ms.LOAD_STATUS_FAILED
    for request in (ms.ApplyMemoryToolRequest(target=target("Teacher"), action="append", content="y"),
                    ms.ApplyMemoryToolRequest(target=target("Teacher"), action="read")):
        code, _ = status_of(client, "ApplyMemoryTool", request)
        assert code is StatusCode.FAILED_PRECONDITION
    code, _ = status_of(client, "ListVersions", ms.ListVersionsRequest(target=target("Teacher")))
    assert code is StatusCode.FAILED_PRECONDITION
    assert path.read_bytes() == document


def test_a_folder_in_place_of_a_save_is_unreadable_not_unavailable(runtime: Runtime, client: RuntimeClient) -> None:
    memory_file(runtime, "Teacher").mkdir(parents=True)
    assert call(client, "LoadState", ms.LoadStateRequest(target=target("Teacher"))).status == ms.LOAD_STATUS_FAILED
    code, message = status_of(client, "ApplyMemoryTool",
                              ms.ApplyMemoryToolRequest(target=target("Teacher"), action="append", content="x"))
    assert code is StatusCode.FAILED_PRECONDITION and "folder" in message
    (runtime.memory_dir / "Teacher.history.jsonl").mkdir()
    code, _ = status_of(client, "GetChatHistory", ms.GetChatHistoryRequest(target=target("Teacher")))
    assert code is StatusCode.FAILED_PRECONDITION
    assert memory_file(runtime, "Teacher").is_dir()


def test_an_unreadable_summary_is_failed_precondition_not_none(runtime: Runtime, client: RuntimeClient) -> None:
    path = runtime.data_dir / "CoreAI" / "ConversationSummaries" / "Teacher.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00garbage")
    code, message = status_of(client, "LoadSummary", ms.LoadSummaryRequest(target=target("Teacher")))
    assert code is StatusCode.FAILED_PRECONDITION and "summary" in message
    assert path.read_bytes() == b"\x00garbage"


# -- disk full / read-only at the write call: UNAVAILABLE, previous version intact ----------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_disk_full_or_read_only_is_unavailable_and_keeps_the_previous_version(runtime: Runtime, client: RuntimeClient,
                                                                             monkeypatch, code: int) -> None:
    write(client, "Teacher", "v1")
    before = files_snapshot(runtime.data_dir)
    real = fileio._write_all

    def half_then_fail(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(code, "injected")

    monkeypatch.setattr(fileio, "_write_all", half_then_fail)
    status, message = status_of(client, "ApplyMemoryTool",
                                ms.ApplyMemoryToolRequest(target=target("Teacher"), action="append", content="v2"))
    assert status is StatusCode.UNAVAILABLE and "nothing was changed" in message
    status, _ = status_of(client, "AppendChatMessage",
                          ms.AppendChatMessageRequest(target=target("Teacher"), role="user", content="x", persist=True))
    assert status is StatusCode.UNAVAILABLE
    assert files_snapshot(runtime.data_dir) == before
    monkeypatch.undo()
    assert call(client, "LoadState", ms.LoadStateRequest(target=target("Teacher"))).state.memory == "v1"


# -- exports ---------------------------------------------------------------------------------------


def test_export_finds_every_role_of_the_scope_and_leaves_session_only_chat_out(runtime: Runtime,
                                                                              client: RuntimeClient) -> None:
    call(client, "AppendChatMessage", ms.AppendChatMessageRequest(target=target("BlacksmithNPC", ALEX), role="user",
                                                                  content="Likes axes", persist=True))
    call(client, "AppendChatMessage", ms.AppendChatMessageRequest(target=target("BlacksmithNPC", ALEX), role="user",
                                                                  content="session secret", persist=False))
    call(client, "SaveSummary", ms.SaveSummaryRequest(target=target("Guard", ALEX, "npc_3"), summary="s"))
    write(client, "Teacher", "other scope")
    snapshot = call(client, "ExportSnapshot", ms.ExportSnapshotRequest(scope=ALEX)).snapshot
    assert sorted((r.role_id, r.actor) for r in snapshot.roles) == [("BlacksmithNPC", ""), ("Guard", "npc_3")]
    assert "session secret" not in str(snapshot)
    imported = call(client, "ImportSnapshot", ms.ImportSnapshotRequest(
        snapshot=snapshot, target_scope=common_pb2.AgentMemoryScope(user_id="slot2")))
    assert imported.roles_imported == 2
    assert all(b"session secret" not in data for data in files_snapshot(runtime.data_dir).values())


# -- a stuck lock holder --------------------------------------------------------------------------

HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1]); lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def quick_lock_runtime(tmp_path: Path) -> Iterator[Runtime]:
    """A runtime whose stores give up on a held lock after 0.5 s."""
    stores = open_stores(AgentMemoryPersistenceMode.PERSISTENT, tmp_path / "data", lock_timeout=0.5)
    rt = start_runtime(tmp_path / "data", RuntimeServices.create(stores))
    yield rt
    rt.handle.stop(1.0)
    rt.services.close()


def test_a_stuck_lock_holder_fails_only_its_own_save(quick_lock_runtime: Runtime, transport: str) -> None:
    runtime = quick_lock_runtime
    store = runtime.services.memory_store.stores.memory
    with runtime.client(transport) as client:
        write(client, "Stuck", "before")
        with store._keys.locked(file_stem("Stuck")) as ks:
            lock_path = ks.lock_path
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            stuck: list[tuple[StatusCode, str]] = []

            def stuck_call() -> None:
                with runtime.client(transport) as own:
                    stuck.append(status_of(own, "ApplyMemoryTool", ms.ApplyMemoryToolRequest(
                        target=target("Stuck"), action="append", content="x")))

            threads = [threading.Thread(target=stuck_call) for _ in range(24)]  # more than the 16 workers
            for t in threads:
                t.start()
            for i in range(10):  # every other save still answers while the stuck one piles up
                assert write(client, f"Other{i}", "fine").success
            for t in threads:
                t.join(timeout=120)
            assert len(stuck) == 24 and {code for code, _ in stuck} == {StatusCode.UNAVAILABLE}
            assert any("locked by another process" in message for _, message in stuck)
        finally:
            holder.stdin.write("\n")
            holder.stdin.close()
            holder.wait(timeout=30)
        assert write(client, "Stuck", "after").success
