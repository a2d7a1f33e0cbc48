"""Issue 9 through both transports: hostile input and saves get the right status, change nothing, and a stuck
lock holder fails only its own save. Requests are built as raw protos, so the server (not the client) judges them."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coreai.v1 import common_pb2
from coreai.v1 import memory_store_pb2 as ms
from coreai.v1 import orchestrator_pb2 as orch
from pyruntime.client import RuntimeCallError, RuntimeClient
from pyruntime.client._transports import MEMORY_STORE, ORCHESTRATOR
from pyruntime.errors import DISK_FULL_MESSAGE
from pyruntime.scopes import MAX_ROLE_ID_BYTES, AgentMemoryScope
from pyruntime.service import StatusCode
from pyruntime.stores import AgentMemoryPersistenceMode, fileio, open_stores
from pyruntime.stores.file_layout import file_stem
from tests.rpc.conftest import Runtime, files_snapshot, start_runtime
from tests.support.hostile_files import make_outside, outside_state, plant

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


@pytest.mark.parametrize("role", ["..", ".", "a" * 237, "a" * 241, "x" * (MAX_ROLE_ID_BYTES + 1),
                                  # Issue 22: look-alikes of other ids (zero-width, bidi override and isolate,
                                  # a no-break space, a decomposed accent)
                                  "Teacher\u200b", "\u202eGuard", "Guard\u2066x", "Old\u00a0Guard", "Cafe\u0301"])
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


def test_a_full_disk_says_the_same_on_every_path(runtime: Runtime, client: RuntimeClient, monkeypatch) -> None:
    # Issue 22 item 8: the memory tool said "PersistenceError", a chat append "No space left on device".
    write(client, "Teacher", "v1")
    call(client, "SaveSummary", ms.SaveSummaryRequest(target=target("Teacher"), summary="s"))
    snapshot = call(client, "ExportSnapshot", ms.ExportSnapshotRequest(role_ids=["Teacher"])).snapshot
    before = files_snapshot(runtime.data_dir)
    real = fileio._write_all

    def disk_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio, "_write_all", disk_full)
    calls = [
        ("ApplyMemoryTool", ms.ApplyMemoryToolRequest(target=target("Teacher"), action="append", content="v2")),
        ("RevertMemory", ms.RevertMemoryRequest(target=target("Teacher"), version=1)),
        ("SaveState", ms.SaveStateRequest(target=target("Teacher"), state=common_pb2.AgentMemoryState(memory="v3"))),
        ("AppendChatMessage", ms.AppendChatMessageRequest(target=target("Teacher"), role="user", content="x",
                                                          persist=True)),
        ("SaveSummary", ms.SaveSummaryRequest(target=target("Teacher"), summary="new")),
        ("ImportSnapshot", ms.ImportSnapshotRequest(snapshot=snapshot, target_scope=ALEX)),
    ]
    for rpc, request in calls:
        assert status_of(client, rpc, request) == (StatusCode.UNAVAILABLE, DISK_FULL_MESSAGE), rpc
    assert files_snapshot(runtime.data_dir) == before


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
    rt = start_runtime(tmp_path / "data", stores=stores)
    yield rt
    rt.handle.stop(1.0)


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


# -- issue 22: links, FIFOs, devices and oversized files in the data folder ------------------------

@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the data folder whose files no call may read or write."""
    folder = make_outside(tmp_path)
    (folder / "victim.history.jsonl").write_bytes(b'{"k":0,"r":"user","c":"outside secret","t":1,"m":true}\n')
    return folder


def hostile(path: Path, kind: str, outside: Path) -> None:
    """A hostile entry where a save belongs; a history links to a history."""
    plant(path, kind, outside, link_to="victim.history.jsonl" if path.name.endswith(".jsonl") else "victim.json")


HOSTILE_KINDS = ["link", "dangling-link", "fifo", "device", "oversized"]
SAVE_DEADLINE_S = 20  # a call blocked on a FIFO never answers; every refusal answers at once


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_hostile_save_gets_a_clear_status_and_nothing_outside_is_touched(runtime: Runtime, transport: str,
                                                                          outside: Path, kind: str) -> None:
    hostile(memory_file(runtime, "Teacher"), kind, outside)
    hostile(runtime.memory_dir / "Teacher.history.jsonl", kind, outside)
    hostile(runtime.data_dir / "CoreAI" / "ConversationSummaries" / "Teacher.json", kind, outside)
    before = outside_state(outside)
    with RuntimeClient(runtime.url(transport), token=runtime.token, timeout=SAVE_DEADLINE_S) as client:
        loaded = call(client, "LoadState", ms.LoadStateRequest(target=target("Teacher")))
        assert loaded.status == ms.LOAD_STATUS_FAILED and "outside secret" not in loaded.reason
        assert {"link": "link", "dangling-link": "link", "fifo": "FIFO", "oversized": "over its limit"}.get(
            kind, "") in loaded.reason
        for rpc, request in [
            ("ApplyMemoryTool", ms.ApplyMemoryToolRequest(target=target("Teacher"), action="append", content="x")),
            ("ApplyMemoryTool", ms.ApplyMemoryToolRequest(target=target("Teacher"), action="read")),
            ("GetChatHistory", ms.GetChatHistoryRequest(target=target("Teacher"))),
            ("GetTranscript", ms.GetTranscriptRequest(target=target("Teacher"))),
            ("AppendChatMessage", ms.AppendChatMessageRequest(target=target("Teacher"), role="user", content="row",
                                                              persist=True)),
            ("LoadSummary", ms.LoadSummaryRequest(target=target("Teacher"))),
            ("ExportSnapshot", ms.ExportSnapshotRequest(role_ids=["Teacher"])),
        ]:
            code, message = status_of(client, rpc, request)
            assert code is StatusCode.FAILED_PRECONDITION, (rpc, code, message)
            assert "outside secret" not in message and str(outside) not in message
        assert write(client, "Other", "fine").success  # every other save answers
        # Clearing removes the entries themselves (never what they point at); then the save works again.
        call(client, "ClearChatHistory", ms.ClearChatHistoryRequest(target=target("Teacher")))
        call(client, "ClearMemory", ms.ClearMemoryRequest(target=target("Teacher")))
        assert write(client, "Teacher", "fresh").success
        call(client, "AppendChatMessage", ms.AppendChatMessageRequest(target=target("Teacher"), role="user",
                                                                      content="again", persist=True))
    assert outside_state(outside) == before
    assert not (outside / "created-by-runtime").exists()


def test_fifos_probed_once_each_leave_every_worker_to_the_other_saves(runtime: Runtime, transport: str) -> None:
    # Issue 22 item 3: 16-18 FIFOs named like saves, each probed once, used to take every one of the 16 workers.
    runtime.memory_dir.mkdir(parents=True)
    for i in range(18):
        os.mkfifo(runtime.memory_dir / f"Npc{i}.json")
        os.mkfifo(runtime.memory_dir / f"Npc{i}.history.jsonl")
    with RuntimeClient(runtime.url(transport), token=runtime.token, timeout=SAVE_DEADLINE_S) as client:
        results: list[object] = []

        def probe(i: int) -> None:
            with RuntimeClient(runtime.url(transport), token=runtime.token, timeout=SAVE_DEADLINE_S) as own:
                results.append(call(own, "LoadState", ms.LoadStateRequest(target=target(f"Npc{i}"))).status)
                results.append(status_of(own, "GetChatHistory", ms.GetChatHistoryRequest(target=target(f"Npc{i}")))[0])

        threads = [threading.Thread(target=probe, args=(i,)) for i in range(18)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=2 * SAVE_DEADLINE_S)
        assert sorted(map(int, results)) == sorted([ms.LOAD_STATUS_FAILED] * 18 + [StatusCode.FAILED_PRECONDITION] * 18)
        for i in range(10):
            assert write(client, f"Other{i}", "fine").success
            assert call(client, "LoadState", ms.LoadStateRequest(target=target(f"Other{i}"))).state.memory == "fine"


def test_a_history_with_unreadable_lines_is_kept_aside_and_the_client_is_told(runtime: Runtime,
                                                                             client: RuntimeClient) -> None:
    path = runtime.memory_dir / "Teacher.history.jsonl"
    path.parent.mkdir(parents=True)
    original = (b'{"k":0,"r":"user","c":"I am Alex","t":1,"o":1,"m":true}\n' + b"\x00\xffnot a row\n"
                + b'{"k":1,"r":"assistant","c":"Hi Alex","t":2,"o":2,"m":true}\n')
    path.write_bytes(original)
    history = call(client, "GetChatHistory", ms.GetChatHistoryRequest(target=target("Teacher")))
    assert [m.content for m in history.messages] == ["I am Alex", "Hi Alex"]
    assert history.HasField("integrity") and history.integrity.unreadable_lines == 1
    appended = call(client, "AppendChatMessage", ms.AppendChatMessageRequest(target=target("Teacher"), role="user",
                                                                             content="new", persist=True))
    kept = appended.integrity.quarantine_file
    assert kept.startswith("Quarantine/") and (runtime.data_dir / "CoreAI" / kept).read_bytes() == original
    transcript = call(client, "GetTranscript", ms.GetTranscriptRequest(target=target("Teacher")))
    assert [e.content for e in transcript.entries] == ["I am Alex", "Hi Alex", "new"]
    assert transcript.integrity.quarantine_file == kept and transcript.integrity.unreadable_lines == 0
    clean = call(client, "GetChatHistory", ms.GetChatHistoryRequest(target=target("Other")))
    assert not clean.HasField("integrity")
