"""CoreAI's `FileAgentMemoryStoreEditModeTests`, ported: the file store on a real temporary data folder.

Each test names the CoreAI test it ports. CoreAI's tests run the C# store in the editor's process; here the
store API runs on real files, and where the behaviour is the C# API's (its async twins, its exceptions) the C#
client of a runtime serving the same folder runs it. Where we deliberately do something else, the test pins
our behaviour and its docstring cites the contract line (docs/seed-tests.md lists them all).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pyruntime.errors import InvalidArgumentError, MemoryUnreadableError, PersistenceError
from pyruntime.memory.state import AgentMemoryState, MemoryVersion
from pyruntime.memory.tool import MemoryTool
from pyruntime.scopes import EMPTY_SCOPE
from pyruntime.stores.base import LoadStatus, TranscriptEntry, TranscriptKind
from pyruntime.stores.file_store import FileAgentMemoryStore, FileConversationSummaryStore, TrimEvent
from pyruntime.stores.scoped import ScopedAgentMemoryStore
from tests.seed.conftest import ROLE, StoreFactory, history_lines, history_path, loaded_memory, memory_path
from tests.unity.conftest import wait

STORE_LOGGER = "pyruntime.stores"
WAIT_S = 30.0


def contents(messages: list[Any]) -> list[str]:
    return [m.content for m in messages]


def tool_row(name: str, content: str, call_id: str | None = None) -> TranscriptEntry:
    return TranscriptEntry(TranscriptKind.TOOL_RESULT, name, content, call_id)


def failing_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk refuses to make anything durable (EIO on every fsync): the write cannot be acknowledged."""

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "simulated disk failure")

    monkeypatch.setattr(os, "fsync", fsync)


# -- the C# API's async twins never wait for the caller's context ----------------------------------------------


def _async_operation(store: Any, kind: str) -> Any:
    from CoreAI.Ai import AgentMemoryState as CsState
    from CoreAI.Ai import MemoryToolCall

    if kind == "load":
        return store.TryLoadAsync(ROLE)
    if kind == "save":
        saved = CsState()
        saved.Memory = "saved"
        return store.SaveAsync(ROLE, saved)
    if kind == "mutate":
        return store.ExecuteMemoryToolAsync(ROLE, MemoryToolCall.Append("mutated"))
    if kind == "clear":
        return store.ClearAsync(ROLE)
    if kind == "clear history":
        return store.ClearChatHistoryAsync(ROLE)
    if kind == "append chat":
        return store.AppendChatMessageAsync(ROLE, "user", "new turn")
    # The C# IAgentMemoryStore follows the design note's interface, which has no transcript append (the runtime's
    # turns record tool rows); the read twin stands in for it.
    return store.GetChatHistoryAsync(ROLE)


def _synchronous_access(store: Any) -> None:
    from CoreAI.Ai import AgentMemoryState as CsState

    store.TryLoad(ROLE, None)
    store.GetChatHistory(ROLE)
    store.Save(ROLE, CsState())
    store.AppendChatMessage(ROLE, "user", "sync")
    store.ClearChatHistory(ROLE)
    store.Clear(ROLE)


@pytest.mark.parametrize("kind", ["load", "save", "mutate", "clear", "clear history", "append chat",
                                  "append transcript"])
def test_async_store_operation_releases_locks_without_pumping_caller_context(kind, csharp_runtime, csharp_store):
    """Ports FileAgentMemoryStoreEditModeTests.AsyncStoreOperation_ReleasesLocksWithoutPumpingCallerContext.

    Departs in one case: the C# `IAgentMemoryStore` is the design note's interface, which has no transcript
    append (the runtime's turns record transcript rows; contract §3), so "append transcript" runs the read twin.
    A game starts an async store call on a thread whose SynchronizationContext is not pumped (Unity's main thread
    inside a long frame) while another call holds the save; once that lets go, synchronous calls from elsewhere
    must not wait for the caller's context. The runtime holds the save for a mutation that blocks until released.
    """
    from CoreAI.Ai import AgentMemoryState as CsState
    from CoreAI.Tests import HeldSynchronizationContext
    from System import Func
    from System.Threading.Tasks import Task

    seed = CsState()
    seed.Memory = "seed"
    csharp_store.Save(ROLE, seed)
    runtime_store = csharp_runtime.handle.runtime.stores.memory
    entered, release = threading.Event(), threading.Event()

    def hold(state: AgentMemoryState) -> None:
        entered.set()
        assert release.wait(WAIT_S), "the test did not release the first mutation"

    blocker = ThreadPoolExecutor(1)
    held_save = blocker.submit(runtime_store.mutate, ROLE, hold)
    context = HeldSynchronizationContext()
    operation = None
    try:
        assert entered.wait(WAIT_S)
        operation = context.Start(Func[Task](lambda: _async_operation(csharp_store, kind)))
        release.set()
        held_save.result(WAIT_S)
        # The operation either finished without the context, or its continuation waits in the unpumped queue.
        deadline = time.monotonic() + WAIT_S
        while not (operation.IsCompleted or context.Posted) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert operation.IsCompleted or context.Posted
        synchronous = blocker.submit(_synchronous_access, csharp_store)
        synchronous.result(WAIT_S)  # raises TimeoutError if storage waited for the held context
    finally:
        release.set()
        context.ReleaseCallbacks()
        if operation is not None:
            wait(operation)
        blocker.shutdown(wait=True)


def test_async_history_trim_marshals_callback_to_caller_after_releasing_storage_locks(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.AsyncHistoryTrim_MarshalsCallbackToCallerAfterReleasingStorageLocks.

    Departs in one point: the trim callback runs on the thread whose append caused the trim, not on a captured
    SynchronizationContext (Python has none; contract §3.1 "Trimming is visible": callbacks run after the key's
    lock is released, in order, once each). What CoreAI checks holds: the callback may read the same key, and
    while it runs (paused here) the key is unlocked for everyone else.
    """
    events: list[TrimEvent] = []
    in_callback, resume = threading.Event(), threading.Event()
    seen_in_callback: list[list[str]] = []
    callback_threads: list[int] = []

    def on_trim(event: TrimEvent) -> None:
        callback_threads.append(threading.get_ident())
        seen_in_callback.append(contents(store.get_chat_history(ROLE)))  # re-entering the store is safe
        events.append(event)
        in_callback.set()
        assert resume.wait(WAIT_S)

    store = new_store(1, 1, on_trim=on_trim)
    store.append_chat_message(ROLE, "user", "before")

    def append_after() -> int:
        store.append_chat_message(ROLE, "user", "after")
        return threading.get_ident()

    with ThreadPoolExecutor(2) as pool:
        append = pool.submit(append_after)
        try:
            assert in_callback.wait(WAIT_S)
            read = pool.submit(store.get_chat_history, ROLE)
            assert contents(read.result(WAIT_S)) == ["after"]  # the storage is unlocked while the callback waits
        finally:
            resume.set()
        appending_thread = append.result(WAIT_S)
    assert callback_threads == [appending_thread]
    assert seen_in_callback == [["after"]]
    assert len(events) == 1 and events[0].key == ROLE and events[0].chat_dropped == 1


# -- peers on one folder ---------------------------------------------------------------------------------------


def test_peer_stores_concurrent_appends_and_rewrite_preserve_every_committed_message(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.PeerStores_ConcurrentAppendsAndRewrite_PreserveEveryCommittedMessage."""
    history_path(root).parent.mkdir(parents=True)
    history_path(root).write_text("broken-line\n", encoding="utf-8")
    first, second = new_store(), new_store()
    first.get_chat_history(ROLE)
    second.get_chat_history(ROLE)
    with ThreadPoolExecutor(8) as pool:
        writes = [pool.submit((first if i % 2 == 0 else second).append_chat_message, ROLE, "user", f"message-{i}")
                  for i in range(32)]
        for write in writes:
            write.result(WAIT_S)
    expected = sorted(f"message-{i}" for i in range(32))
    assert sorted(contents(new_store().get_chat_history(ROLE))) == expected
    assert sorted(contents(first.get_chat_history(ROLE))) == expected
    assert sorted(contents(second.get_chat_history(ROLE))) == expected


def test_peer_store_append_and_clear_invalidate_cached_history_and_session_only_rows(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.PeerStore_AppendAndClear_InvalidateCachedHistoryAndSessionOnlyRows.

    Two store instances on one save folder: a session-only message of one and a persistent message the other
    appends later come back in append order, and a clear from either removes the session-only rows both show.
    """
    first, second = new_store(), new_store()
    first.append_chat_message(ROLE, "user", "durable")
    second.get_chat_history(ROLE)
    second.append_chat_message(ROLE, "user", "local only", persist=False)
    first.append_chat_message(ROLE, "user", "peer update")
    assert contents(second.get_chat_history(ROLE)) == ["durable", "local only", "peer update"]
    orders = [m.order for m in second.get_chat_history(ROLE)]
    assert orders == sorted(orders) and len(set(orders)) == 3  # the fold marker's anchors stay unique

    first.clear_chat_history(ROLE)
    assert second.get_chat_history(ROLE) == []
    assert second.get_transcript(ROLE) == []
    second.append_chat_message(ROLE, "user", "after clear")
    assert contents(new_store().get_chat_history(ROLE)) == ["after clear"]
    assert contents(second.get_chat_history(ROLE)) == ["after clear"]


def test_failed_confirmed_append_does_not_change_cached_history_or_leak_into_later_rewrite(root, new_store,
                                                                                          monkeypatch):
    """Ports FileAgentMemoryStoreEditModeTests.FailedConfirmedAppend_DoesNotChangeCachedHistoryOrLeakIntoLaterRewrite.

    CoreAI locks the file with FileShare.None (a Windows share violation); here the disk refuses the fsync, the
    same refusal seen from the store: the append raises and changes nothing.
    """
    store = new_store(2, 3)
    store.append_chat_message(ROLE, "user", "before")
    store.append_chat_message(ROLE, "user", "second")
    with monkeypatch.context() as broken_disk:
        failing_fsync(broken_disk)
        with pytest.raises(PersistenceError):
            store.append_chat_message(ROLE, "user", "failed")
        assert contents(store.get_chat_history(ROLE)) == ["before", "second"]
    store.append_chat_message(ROLE, "user", "after")
    assert contents(new_store(2, 3).get_chat_history(ROLE)) == ["second", "after"]
    assert "failed" not in history_path(root).read_text(encoding="utf-8")


def test_failed_best_effort_append_is_recovered_without_overwriting_peer_commits(new_store, monkeypatch):
    """Ports FileAgentMemoryStoreEditModeTests.FailedBestEffortAppend_IsRecoveredWithoutOverwritingPeerCommits.

    Departs: CoreAI's synchronous append swallows the failure and retries the message on the next write; ours
    raises and keeps nothing (contract §1 "Failures change nothing": a write that did not become durable is
    reported as a failure), so the caller decides to retry. Peers' commits are never overwritten either way.
    """
    first, second = new_store(), new_store()
    first.append_chat_message(ROLE, "user", "before")
    with monkeypatch.context() as broken_disk:
        failing_fsync(broken_disk)
        with pytest.raises(PersistenceError):
            first.append_chat_message(ROLE, "user", "retry this")
    second.append_chat_message(ROLE, "user", "peer")
    first.append_chat_message(ROLE, "user", "after")
    assert contents(new_store().get_chat_history(ROLE)) == ["before", "peer", "after"]


def test_reopened_history_continues_saved_order_and_preserves_legacy_prefix(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.ReopenedHistory_ContinuesSavedOrderAndPreservesLegacyPrefix."""
    history_path(root).parent.mkdir(parents=True)
    history_path(root).write_text(
        '{"k":0,"r":"user","c":"legacy first","m":true}\n'
        '{"k":0,"r":"user","c":"legacy second","m":true}\n'
        '{"k":0,"r":"user","c":"saved","m":true,"o":1000}\n', encoding="utf-8")
    first, peer = new_store(), new_store()
    first.append_chat_message(ROLE, "user", "local", persist=False)
    peer.append_chat_message(ROLE, "user", "peer")
    assert contents(first.get_chat_history(ROLE)) == ["legacy first", "legacy second", "saved", "local", "peer"]
    assert "local" not in history_path(root).read_text(encoding="utf-8")


def test_clear_after_partial_legacy_migration_does_not_resurrect_legacy_history(root, new_store, monkeypatch):
    """Ports FileAgentMemoryStoreEditModeTests.ClearAfterPartialLegacyMigration_DoesNotResurrectLegacyHistory.

    CoreAI blocks the document's temporary file; here the rename of the rewritten `<stem>.json` fails, the same
    boundary: the conversation already moved to the history file, the legacy document still carries it.
    """
    legacy = {"lastSystemPrompt": "", "memory": "keep memory",
              "chatHistoryJson": json.dumps({"Items": [{"Role": "user", "Content": "old conversation",
                                                        "Timestamp": 1_700_000_000}]})}
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_text(json.dumps(legacy), encoding="utf-8")
    store = new_store()
    real_replace = os.replace

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(dst).endswith(f"{ROLE}.json"):
            raise OSError(errno.EIO, "simulated disk failure")
        real_replace(src, dst, *args, **kwargs)

    with monkeypatch.context() as broken_disk:
        broken_disk.setattr(os, "replace", replace)
        with pytest.raises(PersistenceError):
            store.get_chat_history(ROLE)
    assert history_path(root).exists()

    store.clear_chat_history(ROLE)
    assert new_store().get_chat_history(ROLE) == []
    assert loaded_memory(new_store()).memory == "keep memory"


# -- a corrupted or unread memory document ---------------------------------------------------------------------

NOT_JSON = "{ definitely not json"


def write_unreadable_document(root: Path) -> None:
    memory_path(root).parent.mkdir(parents=True, exist_ok=True)
    memory_path(root).write_text(NOT_JSON, encoding="utf-8")


def test_unreadable_memory_document_is_reported_as_failed_not_as_missing(root, new_store, csharp_runtime,
                                                                        csharp_store):
    """Ports FileAgentMemoryStoreEditModeTests.UnreadableMemoryDocument_IsReportedAsFailed_NotAsMissing.

    The C# TryLoad, whose bool cannot say "failed", throws FailedPreconditionException instead of answering false.
    """
    from CoreAI.Runtime import FailedPreconditionException

    write_unreadable_document(root)
    result = new_store().try_load(ROLE)
    assert result.status is LoadStatus.FAILED and result.state is None and result.reason

    write_unreadable_document(csharp_runtime.data_dir / "CoreAI")
    with pytest.raises(FailedPreconditionException):
        csharp_store.TryLoad(ROLE, None)


def test_mutate_unreadable_document_aborts_and_leaves_the_file_untouched(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.MutateAsync_UnreadableDocument_AbortsAndLeavesTheFileUntouched.

    Departs in one point: the error does not carry the role id (CoreAI's `thrown.RoleId`): errors and logs name no
    key (contract §3.1 "Logs never carry role ids, user ids, keys or content"); the caller knows which key it asked
    for.
    """
    corrupt = '{ "memory": "the child likes dragons", "versionsJson": "[{broken'
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_text(corrupt, encoding="utf-8")
    with pytest.raises(MemoryUnreadableError) as raised:
        new_store().mutate(ROLE, lambda state: state.evolve(memory="brand new"))
    assert ROLE not in str(raised.value)
    assert memory_path(root).read_text(encoding="utf-8") == corrupt


def test_scoped_decorator_over_the_real_file_store_forwards_real_load_diagnostics(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.ScopedDecorator_OverTheRealFileStore_ForwardsRealLoadDiagnostics."""
    write_unreadable_document(root)
    scoped = ScopedAgentMemoryStore(new_store(), FileConversationSummaryStore(root), EMPTY_SCOPE)
    assert scoped.try_load(ROLE).status is LoadStatus.FAILED
    with pytest.raises(MemoryUnreadableError):
        scoped.mutate(ROLE, lambda state: state)


def test_save_after_unreadable_document_heals_the_role(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Save_AfterUnreadableDocument_HealsTheRole."""
    write_unreadable_document(root)
    new_store().save(ROLE, AgentMemoryState(memory="recovered"))
    result = new_store().try_load(ROLE)
    assert result.status is LoadStatus.LOADED and result.state is not None and result.state.memory == "recovered"


def test_append_chat_message_with_unreadable_memory_document_still_persists_the_conversation(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.AppendChatMessage_WithUnreadableMemoryDocument_StillPersistsTheConversation."""
    write_unreadable_document(root)
    new_store().append_chat_message(ROLE, "user", "still here")
    assert contents(new_store().get_chat_history(ROLE)) == ["still here"]


def test_memory_tool_write_that_did_not_reach_disk_is_reported_as_failure(root, new_store, cli, tmp_path):
    """Ports FileAgentMemoryStoreEditModeTests.MemoryTool_WriteThatDidNotReachDisk_IsReportedAsFailure.

    A folder named like the memory file makes the write fail deterministically; the CLI reports it the same way.
    """
    memory_path(root).mkdir(parents=True)
    result = MemoryTool(new_store(), ROLE).execute({"action": "write", "content": "the child likes dragons"})
    assert not result.success and "DONE" not in result.to_json()

    run = cli("memory", "write", "--data-dir", tmp_path, "--role", ROLE, "--content", "the child likes dragons")
    assert run.rc != 0 and "DONE" not in run.out
    assert memory_path(root).is_dir()


def test_memory_tool_read_unreadable_document_does_not_pretend_memory_is_empty(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.MemoryTool_Read_UnreadableDocument_DoesNotPretendMemoryIsEmpty."""
    write_unreadable_document(root)
    result = MemoryTool(new_store(), ROLE).execute({"action": "read"})
    assert not result.success
    assert "empty" not in result.to_json().lower()


def test_memory_tool_append_succeeds_only_after_the_document_is_on_disk(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.MemoryTool_Append_Succeeds_OnlyAfterTheDocumentIsOnDisk."""
    result = MemoryTool(new_store(), ROLE).execute({"action": "append", "content": "likes dragons"})
    assert result.success
    assert loaded_memory(new_store()).memory == "likes dragons"


def test_torn_history_line_is_skipped_and_repaired_on_the_next_write(root, new_store, caplog):
    """Ports FileAgentMemoryStoreEditModeTests.TornHistoryLine_IsSkipped_AndRepairedOnTheNextWrite.

    Beyond CoreAI, the damaged file is first kept aside in `Quarantine/` (contract §3.1 "Atomic rewrites").
    """
    new_store().append_chat_message(ROLE, "user", "first")
    with history_path(root).open("a", encoding="utf-8") as f:
        f.write('{"k":0,"r":"user","c":"torn by an interrupted sy')
    store = new_store()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        before_repair = store.get_chat_history(ROLE)
    store.append_chat_message(ROLE, "assistant", "second")

    assert contents(before_repair) == ["first"]
    assert "unreadable line" in caplog.text
    lines = history_lines(root)
    assert len(lines) == 2 and not any("torn by" in line for line in lines)
    assert contents(new_store().get_chat_history(ROLE)) == ["first", "second"]


# -- trimming is visible and configurable ----------------------------------------------------------------------


def test_trim_is_visible_through_event_and_log(new_store, caplog):
    """Ports FileAgentMemoryStoreEditModeTests.Trim_IsVisible_ThroughEventAndLog."""
    events: list[TrimEvent] = []
    store = new_store(2, 3, on_trim=events.append)
    with caplog.at_level(logging.INFO, logger=STORE_LOGGER):
        for i in (1, 2, 3):
            store.append_chat_message(ROLE, "user", f"turn {i}")
    assert len(events) == 1
    assert (events[0].chat_dropped, events[0].chat_kept, events[0].chat_cap) == (1, 2, 2)
    assert (events[0].transcript_dropped, events[0].transcript_cap) == (0, 3)
    assert "reached its cap" in caplog.text and "turn" not in caplog.text and ROLE not in caplog.text
    assert (store.chat_cap, store.transcript_cap) == (2, 3)


def test_trim_logs_the_first_drop_even_for_session_only_history(new_store, caplog):
    """Ports FileAgentMemoryStoreEditModeTests.Trim_LogsTheFirstDrop_EvenForSessionOnlyHistory."""
    events: list[TrimEvent] = []
    store = new_store(1, 5, on_trim=events.append)
    with caplog.at_level(logging.INFO, logger=STORE_LOGGER):
        store.append_chat_message(ROLE, "user", "turn 1", persist=False)
        store.append_chat_message(ROLE, "user", "turn 2", persist=False)
    assert "reached its cap" in caplog.text
    assert len(events) == 1 and events[0].session_only and events[0].chat_dropped == 1


# -- the cost is one line per message ---------------------------------------------------------------------------


def test_append_chat_message_appends_one_line_and_does_not_touch_the_memory_document(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.AppendChatMessage_AppendsOneLine_AndDoesNotTouchTheMemoryDocument."""
    store = new_store()
    for i in range(20):
        store.append_chat_message(ROLE, "user" if i % 2 == 0 else "assistant", f"turn {i}")
    assert not memory_path(root).exists()
    assert len(history_lines(root)) == 20
    assert history_path(root).read_text(encoding="utf-8").count("turn 7") == 1


def test_history_file_is_compacted_only_once_stale_head_exceeds_slack(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.HistoryFile_IsCompactedOnlyOnceStaleHeadExceedsSlack.

    CoreAI's `CompactionSlack` is our `rewrite_threshold`; the file is rewritten once the stale rows exceed it.
    """
    store = new_store(2, 4)
    slack = store.rewrite_threshold
    for i in range(4 + slack):
        store.append_chat_message(ROLE, "user", f"turn {i}")
    assert len(history_lines(root)) > 4  # the stale head stays until compaction; readers never see it
    assert len(store.get_chat_history(ROLE)) == 2
    assert len(store.get_transcript(ROLE)) == 4

    store.append_chat_message(ROLE, "user", "the one that compacts")
    assert len(history_lines(root)) == 4
    assert len(new_store(2, 4).get_transcript(ROLE)) == 4


# -- the v1 format: the conversation inside the memory document ------------------------------------------------


def v1_document(**fields: Any) -> str:
    """A CoreAI v1 `<role>.json` as `JsonUtility.ToJson(persisted, true)` writes it (4-space indents)."""
    document = {"lastSystemPrompt": "", "memory": "", "chatHistoryJson": "", "transcriptEntriesJson": "",
                "versionsJson": "", "systemPromptMemorySnapshot": "", "systemPromptMemoryVersion": 0,
                "maxMemoryVersions": 0, **fields}
    return json.dumps(document, indent=4, ensure_ascii=False)


def chat_wrapper(*messages: tuple[str, str, int]) -> str:
    """`chatHistoryJson`: JsonUtility's `{"Items":[ChatMessage...]}` (compact)."""
    items = [{"Role": role, "Content": content, "Timestamp": ts} for role, content, ts in messages]
    return json.dumps({"Items": items}, separators=(",", ":"), ensure_ascii=False)


def transcript_list(*entries: tuple[int, str, str, str, int]) -> str:
    """`transcriptEntriesJson`: Newtonsoft's indented `List<ConversationEntry>` (Kind as a number)."""
    rows = [{"Kind": kind, "Key": key, "Content": content, "CallId": call_id, "Timestamp": ts}
            for kind, key, content, call_id, ts in entries]
    return json.dumps(rows, indent=2, ensure_ascii=False).replace("\n", "\r\n")


def test_legacy_v1_document_is_migrated_without_losing_chat_transcript_or_memory(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.LegacyV1Document_IsMigrated_WithoutLosingChatTranscriptOrMemory.

    CoreAI's transcript names the speaker or the tool in `Key`: migrated rows keep those names and come back
    once each, in order.
    """
    ms = 1_700_000_000_123
    document = v1_document(
        memory="PLAYER_QUEST:rescue_dog", lastSystemPrompt="npc",
        chatHistoryJson=chat_wrapper(("user", "hello", ms), ("assistant", "hi", ms + 1000)),
        transcriptEntriesJson=transcript_list((0, "user", "hello", "", ms), (3, "lookup", "tool row", "c1", 0),
                                              (1, "assistant", "hi", "", ms + 1000)),
        versionsJson=json.dumps([{"Version": 1, "Timestamp": 0, "Action": "write",
                                  "ContentAfter": "PLAYER_QUEST:rescue_dog", "Note": ""}]),
        maxMemoryVersions=30)
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_text(document, encoding="utf-8")

    store = new_store()
    chat = store.get_chat_history(ROLE)
    transcript = store.get_transcript(ROLE)
    assert [(m.role, m.content) for m in chat] == [("user", "hello"), ("assistant", "hi")]
    assert chat[0].timestamp == ms // 1000  # milliseconds of the v1 format become seconds
    assert [(e.kind, e.name, e.content, e.call_id) for e in transcript] == [
        (TranscriptKind.USER, "user", "hello", None),
        (TranscriptKind.TOOL_RESULT, "lookup", "tool row", "c1"),
        (TranscriptKind.ASSISTANT, "assistant", "hi", None),
    ]
    state = loaded_memory(store)
    assert state.memory == "PLAYER_QUEST:rescue_dog" and len(state.versions) == 1

    assert history_path(root).exists()
    rewritten = json.loads(memory_path(root).read_text(encoding="utf-8"))
    assert rewritten["chatHistoryJson"] == "" and rewritten["transcriptEntriesJson"] == ""
    reloaded = new_store()
    assert len(reloaded.get_chat_history(ROLE)) == 2 and len(reloaded.get_transcript(ROLE)) == 3


def test_legacy_v1_document_chat_only_without_transcript_becomes_chat_lines(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.LegacyV1Document_ChatOnly_WithoutTranscript_BecomesChatLines."""
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_text(v1_document(chatHistoryJson=chat_wrapper(
        ("user", "old one", 1_700_000_000), ("assistant", "old two", 1_700_000_001))), encoding="utf-8")
    store = new_store()
    assert contents(store.get_chat_history(ROLE)) == ["old one", "old two"]
    assert contents(store.get_transcript(ROLE)) == ["old one", "old two"]


def test_save_on_legacy_v1_document_migrates_the_conversation_before_rewriting(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Save_OnLegacyV1Document_MigratesTheConversationBeforeRewriting."""
    memory_path(root).parent.mkdir(parents=True)
    memory_path(root).write_text(v1_document(memory="old memory",
                                             chatHistoryJson=chat_wrapper(("user", "must survive", 1))),
                                 encoding="utf-8")
    new_store().save(ROLE, AgentMemoryState(memory="new memory"))
    reloaded = new_store()
    assert contents(reloaded.get_chat_history(ROLE)) == ["must survive"]
    assert loaded_memory(reloaded).memory == "new memory"


# -- persist=False means this process only ---------------------------------------------------------------------


def test_session_only_append_never_reaches_disk_even_through_later_persisted_writes_and_compaction(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.SessionOnlyAppend_NeverReachesDisk_EvenThroughLaterPersistedWritesAndCompaction."""
    store = new_store(3, 3)
    store.append_chat_message(ROLE, "user", "secret", persist=False)
    store.append_chat_message(ROLE, "assistant", "public 1")
    for i in range(store.rewrite_threshold + 8):
        store.append_chat_message(ROLE, "assistant", f"public {i + 2}")
    store.append_chat_message(ROLE, "user", "secret 2", persist=False)
    store.append_chat_message(ROLE, "assistant", "public last")

    assert "secret" not in history_path(root).read_text(encoding="utf-8")
    assert "secret 2" in contents(store.get_chat_history(ROLE))
    assert not any(c.startswith("secret") for c in contents(new_store(3, 3).get_chat_history(ROLE)))


def test_session_only_append_without_any_persisted_write_creates_no_files(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.SessionOnlyAppend_WithoutAnyPersistedWrite_CreatesNoFiles.

    No save file is created; the key's lock and order counter live in `.locks/`, away from the data folders
    (contract §3.1 "Appending a message ...").
    """
    store = new_store()
    store.append_chat_message(ROLE, "user", "session only", persist=False)
    store.append_transcript(ROLE, [tool_row("lookup", "session only row")], persist=False)
    assert len(store.get_chat_history(ROLE)) == 1
    data_files = [p for p in root.rglob("*") if p.is_file() and ".locks" not in p.relative_to(root).parts]
    assert data_files == []


# -- timestamps, durability ------------------------------------------------------------------------------------


def test_chat_timestamps_are_unix_seconds_like_the_chat_message_constructor(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.ChatTimestamps_AreUnixSeconds_LikeTheChatMessageConstructor."""
    before = int(time.time())
    new_store().append_chat_message(ROLE, "user", "when")
    after = int(time.time())
    (message,) = new_store().get_chat_history(ROLE)
    (row,) = new_store().get_transcript(ROLE)
    assert before <= message.timestamp <= after
    assert row.timestamp == message.timestamp


def test_async_writes_return_only_after_the_write_is_durable_and_flush_confirms(csharp_runtime, csharp_store):
    """Ports FileAgentMemoryStoreEditModeTests.AsyncWrites_ReturnOnlyAfterTheWriteIsDurable_AndFlushConfirms.

    Departs: there is no FlushAsync, since every write is durable before its call returns (contract §1, "is
    durable (on disk, for a persistent store) before its result is returned"); a fresh store on the runtime's
    folder (another process) reads both writes as soon as the async twins complete.
    """
    from CoreAI.Ai import AgentMemoryState as CsState

    wait(csharp_store.AppendChatMessageAsync(ROLE, "user", "durable", True))
    state = CsState()
    state.Memory = "durable memory"
    wait(csharp_store.SaveAsync(ROLE, state))
    other_process = FileAgentMemoryStore(csharp_runtime.data_dir / "CoreAI")
    assert contents(other_process.get_chat_history(ROLE)) == ["durable"]
    assert loaded_memory(other_process).memory == "durable memory"


def test_save_async_write_failure_throws_instead_of_logging_success(csharp_runtime, csharp_store):
    """Ports FileAgentMemoryStoreEditModeTests.SaveAsync_WriteFailure_Throws_InsteadOfLoggingSuccess."""
    from CoreAI.Ai import AgentMemoryState as CsState
    from CoreAI.Runtime import CoreAIRuntimeException

    memory_path(csharp_runtime.data_dir / "CoreAI").mkdir(parents=True)
    state = CsState()
    state.Memory = "lost?"
    with pytest.raises(CoreAIRuntimeException):
        wait(csharp_store.SaveAsync(ROLE, state))


# -- Clear and ClearChatHistory with separate files -------------------------------------------------------------


def test_clear_chat_history_on_disk_preserves_memory_tool_field(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.ClearChatHistory_OnDisk_Preserves_MemoryTool_Field."""
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="PLAYER_QUEST:rescue_dog", last_system_prompt="npc"))
    store.append_chat_message(ROLE, "user", "Hello merchant")
    store.append_chat_message(ROLE, "assistant", "Welcome.")
    store.clear_chat_history(ROLE)

    assert "PLAYER_QUEST:rescue_dog" in loaded_memory(store).memory
    assert store.get_chat_history(ROLE) == []
    other = new_store()
    assert "PLAYER_QUEST:rescue_dog" in loaded_memory(other).memory
    assert other.get_chat_history(ROLE) == []
    assert not history_path(root).exists()


def test_clear_chat_history_same_store_instance_get_chat_history_is_safe(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.ClearChatHistory_SameStoreInstance_GetChatHistory_IsSafe."""
    store = new_store()
    store.append_chat_message(ROLE, "user", "one")
    store.clear_chat_history(ROLE)
    assert store.get_chat_history(ROLE) == []


def test_memory_tool_clear_on_disk_preserves_history_transcripts_and_versions(new_store, cli, tmp_path):
    """Ports FileAgentMemoryStoreEditModeTests.MemoryTool_Clear_OnDisk_Preserves_History_Transcripts_And_Versions.

    The model's clear runs here through the CLI (`coreai-runtime memory clear`), as a developer would run it.
    """
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="will_clear", last_system_prompt="s",
                                      versions=(MemoryVersion(1, 1_700_000_000, "write", "will_clear", "n"),)))
    store.append_chat_message(ROLE, "user", "line1")
    store.append_transcript(ROLE, [tool_row("lookup", "tool transcript")])

    run = cli("memory", "clear", "--data-dir", tmp_path, "--role", ROLE)
    assert run.rc == 0 and run.json()["Success"] is True
    reloaded = new_store()
    state = loaded_memory(reloaded)
    assert state.memory == "" and len(state.versions) >= 2
    assert contents(reloaded.get_chat_history(ROLE)) == ["line1"]
    assert "tool transcript" in contents(reloaded.get_transcript(ROLE))


def test_clear_without_persisted_conversation_removes_the_role_key(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Clear_WithoutPersistedConversation_RemovesTheRoleKey."""
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="only_memory", last_system_prompt="s",
                                      versions=(MemoryVersion(1, 1_700_000_000, "write", "only_memory", "n"),)))
    store.clear(ROLE)
    assert new_store().try_load(ROLE).status is LoadStatus.NOT_FOUND


def test_clear_after_chat_history_cleared_removes_the_role_key(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Clear_AfterChatHistoryCleared_RemovesTheRoleKey."""
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="only_memory"))
    store.append_chat_message(ROLE, "user", "temp")
    store.clear_chat_history(ROLE)
    store.clear(ROLE)
    assert new_store().try_load(ROLE).status is LoadStatus.NOT_FOUND


def test_clear_with_persisted_conversation_removes_the_memory_document_and_keeps_the_conversation(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Clear_WithPersistedConversation_RemovesTheMemoryDocument_AndKeepsTheConversation."""
    store = new_store()
    store.save(ROLE, AgentMemoryState(memory="clear_directly", system_prompt_memory_snapshot="clear_directly",
                                      system_prompt_memory_version=4,
                                      versions=(MemoryVersion(1, 1_700_000_000, "write", "clear_directly", "n"),)))
    store.append_chat_message(ROLE, "user", "preserved")
    store.clear(ROLE)
    reloaded = new_store()
    assert reloaded.try_load(ROLE).status is LoadStatus.NOT_FOUND
    assert contents(reloaded.get_chat_history(ROLE)) == ["preserved"]


def test_clear_unreadable_memory_document_restores_a_writable_role(root, new_store, caplog):
    """Ports FileAgentMemoryStoreEditModeTests.Clear_UnreadableMemoryDocument_RestoresAWritableRole."""
    write_unreadable_document(root)
    store = new_store()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        store.clear(ROLE)
    assert store.try_load(ROLE).status is LoadStatus.NOT_FOUND
    assert "unreadable memory document" in caplog.text
    store.mutate(ROLE, lambda state: state.evolve(memory="after clear"))
    assert loaded_memory(new_store()).memory == "after clear"


def test_clear_chat_history_when_history_file_delete_fails_keeps_history_readable(root, new_store, monkeypatch):
    """Ports FileAgentMemoryStoreEditModeTests.ClearChatHistory_WhenHistoryFileDeleteFails_KeepsHistoryReadable.

    CoreAI runs this on Windows only (a delete of a file opened with FileShare.None); here the delete is refused
    on every platform. Departs: CoreAI's void ClearChatHistory logs the failure, ours raises it (contract §1
    "Failures change nothing") - and, as in CoreAI, a clear that did not happen leaves reads seeing the turns.
    """
    store = new_store()
    store.append_chat_message(ROLE, "user", "keep-me")
    store.append_chat_message(ROLE, "user", "only in this process", persist=False)
    real_unlink = os.unlink

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(".history.jsonl"):
            raise OSError(errno.EIO, "simulated disk failure")
        real_unlink(path, *args, **kwargs)

    with monkeypatch.context() as broken_disk:
        broken_disk.setattr(os, "unlink", unlink)
        with pytest.raises(PersistenceError):
            store.clear_chat_history(ROLE)
        assert contents(store.get_chat_history(ROLE)) == ["keep-me", "only in this process"]
    store.clear_chat_history(ROLE)
    assert store.get_chat_history(ROLE) == []
    assert not history_path(root).exists()


@pytest.mark.parametrize("key", ["", "   ", None])
def test_append_chat_message_empty_or_null_role_id_writes_no_files(root, new_store, key):
    """Ports FileAgentMemoryStoreEditModeTests.AppendChatMessage_EmptyOrNullRoleId_WritesNoFiles.

    Departs: CoreAI ignores the call; ours refuses it with a clear error and writes nothing (contract §4, "a
    store call with a blank role is an error and writes nothing").
    """
    store = new_store()
    with pytest.raises(InvalidArgumentError):
        store.append_chat_message(key, "user", "orphan")
    assert not root.exists() or [p for p in root.rglob("*") if p.is_file()] == []


# -- ceilings, round-trips, concurrency ------------------------------------------------------------------------


def test_default_write_backstop_retains_history_beyond_role_window_defaults(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.DefaultWriteBackstop_RetainsHistoryBeyondRoleWindowDefaults."""
    store = new_store()
    for i in range(130):
        store.append_chat_message(ROLE, "user", f"chat_{i}")
    reloaded = FileAgentMemoryStore(store.root)
    assert len(reloaded.get_chat_history(ROLE)) == 130
    assert len(reloaded.get_transcript(ROLE)) >= 130


def test_append_writes_trim_history_and_transcripts_to_configured_caps(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.AppendWrites_TrimHistoryAndTranscripts_ToConfiguredCaps."""
    store = new_store(2, 3)
    for i in range(5):
        store.append_chat_message(ROLE, "user", f"chat_{i}")
    for i in range(5):
        store.append_transcript(ROLE, [tool_row("tool", f"transcript_{i}")])
    reloaded = new_store(2, 3)
    assert contents(reloaded.get_chat_history(ROLE)) == ["chat_3", "chat_4"]
    assert contents(reloaded.get_transcript(ROLE)) == ["transcript_2", "transcript_3", "transcript_4"]


def test_transcript_cap_does_not_evict_the_chat_window(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.TranscriptCap_DoesNotEvictTheChatWindow."""
    store = new_store(2, 3)
    store.append_chat_message(ROLE, "user", "chat_a")
    store.append_chat_message(ROLE, "assistant", "chat_b")
    for i in range(6):
        store.append_transcript(ROLE, [tool_row("tool", f"tool_{i}")])
    assert contents(new_store(2, 3).get_chat_history(ROLE)) == ["chat_a", "chat_b"]
    assert contents(new_store(2, 3).get_transcript(ROLE)) == ["tool_3", "tool_4", "tool_5"]


def test_save_async_then_try_load_async_round_trips_written_data(csharp_store):
    """Ports FileAgentMemoryStoreEditModeTests.SaveAsync_Then_TryLoadAsync_RoundTrips_WrittenData."""
    from CoreAI.Ai import AgentMemoryState as CsState

    state = CsState()
    state.Memory, state.LastSystemPrompt = "ASYNC_FACT:dragon_slain", "npc"
    wait(csharp_store.SaveAsync(ROLE, state))
    loaded = wait(csharp_store.TryLoadAsync(ROLE))
    assert loaded is not None and (loaded.Memory, loaded.LastSystemPrompt) == ("ASYNC_FACT:dragon_slain", "npc")
    found, sync_loaded = csharp_store.TryLoad(ROLE, None)
    assert found and sync_loaded.Memory == "ASYNC_FACT:dragon_slain"


def test_save_then_load_round_trips_memory_versions_and_snapshot(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.Save_Then_Load_RoundTrips_MemoryVersions_And_Snapshot."""
    state = AgentMemoryState(
        memory="v2-content", last_system_prompt="npc", system_prompt_memory_snapshot="v1-content",
        system_prompt_memory_version=1,
        versions=(MemoryVersion(1, 1_700_000_000, "write", "v1-content", "chars 0->10 (+10)"),
                  MemoryVersion(2, 1_700_000_001, "write", "v2-content", "chars 10->10 (+0)")))
    new_store().save(ROLE, state)
    loaded = loaded_memory(new_store())
    assert [v.content_after for v in loaded.versions] == ["v1-content", "v2-content"]
    assert (loaded.system_prompt_memory_snapshot, loaded.system_prompt_memory_version) == ("v1-content", 1)


def test_save_async_concurrent_writes_final_file_is_valid_json_of_one_write(root, new_store):
    """Ports FileAgentMemoryStoreEditModeTests.SaveAsync_ConcurrentWrites_FinalFileIsValidJsonOfOneWrite."""
    store = new_store()
    values = [f"memory_payload_{i}" for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        for done in [pool.submit(store.save, ROLE, AgentMemoryState(memory=v, last_system_prompt="p_" + v))
                     for v in values]:
            done.result(WAIT_S)
    folder = memory_path(root).parent
    assert sorted(p.name for p in folder.iterdir()) == [f"{ROLE}.json"]  # no temporary file left behind
    probe = json.loads(memory_path(root).read_text(encoding="utf-8"))
    assert probe["memory"] in values
    assert probe["lastSystemPrompt"] == "p_" + probe["memory"]  # both from one, untorn write


def test_append_chat_message_async_concurrent_appends_all_messages_survive(new_store):
    """Ports FileAgentMemoryStoreEditModeTests.AppendChatMessageAsync_ConcurrentAppends_AllMessagesSurvive."""
    store = new_store()
    with ThreadPoolExecutor(8) as pool:
        for done in [pool.submit(store.append_chat_message, ROLE, "user", f"msg_{i}") for i in range(16)]:
            done.result(WAIT_S)
    assert sorted(contents(new_store().get_chat_history(ROLE))) == sorted(f"msg_{i}" for i in range(16))
