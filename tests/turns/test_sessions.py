"""Earlier sessions (pure): which roles leave them out, what is left out, where a session began."""

from __future__ import annotations

import pytest

from pyruntime.history.cut_report import CutReport
from pyruntime.history.messages import HistoryMessage
from pyruntime.history.pipeline import PreparedHistory
from pyruntime.policy import RoleMemoryConfig
from pyruntime.turns.planning.sessions import SessionStarts, leaves_out_earlier_sessions, without_earlier_sessions


@pytest.mark.parametrize(("memory", "send", "memory_last", "left_out"), [
    (True, None, True, True),  # a small model with memory on: the memory carries the earlier sessions
    (True, None, False, False),  # a capable model (cache-stable layout): its whole history, as configured
    (False, None, True, False),  # memory off: the history is all it has
    (True, True, True, False),  # the role asks for its whole saved history
    (False, False, False, True),  # the role asks to leave them out
])
def test_which_roles_leave_earlier_sessions_out(memory: bool, send: bool | None, memory_last: bool,
                                                left_out: bool) -> None:
    config = RoleMemoryConfig("Npc", use_memory_tool=memory, send_earlier_sessions=send)
    assert leaves_out_earlier_sessions(config, memory_last=memory_last) is left_out


def test_only_messages_stored_before_the_session_are_left_out_and_reported() -> None:
    messages = [HistoryMessage("user", "old", order=3), HistoryMessage("assistant", "old reply", order=4),
                HistoryMessage("user", "legacy", order=0), HistoryMessage("user", "new", order=5)]
    prepared = PreparedHistory(messages, "", CutReport(stored_messages=4, sent_verbatim=4), None, (), 10)
    kept = without_earlier_sessions(prepared, 4)
    assert [m.content for m in kept.messages] == ["new"]
    assert kept.cut_report.sent_verbatim == 1
    assert kept.cut_report.earlier_session_ids == [m.id for m in messages[:3]]
    assert without_earlier_sessions(kept, 4) is kept  # nothing earlier left: unchanged


def test_a_session_begins_once_per_conversation_and_the_record_is_bounded() -> None:
    starts = SessionStarts(capacity=2)
    assert starts.get("a") is None and starts.begin("a", 7) == 7 and starts.get("a") == 7
    starts.begin("b", 0)
    starts.get("a")  # used: "b" is now the oldest
    starts.begin("c", 2)
    assert starts.get("b") is None and starts.get("a") == 7 and starts.get("c") == 2
