"""Test doubles shipped with the package: in-process models for testing NPC logic without a model.

    from pyruntime.testing import ScriptedModel, ScriptedCall
    model = ScriptedModel([ScriptedCall("memory", {"action": "append", "content": "Likes axes"}), "Noted."])
    orchestrator = AiOrchestrator(policy, stores, model)

`RecordingModel` records every request a turn sends (and answers like the others, or through another client).

See docs/testing.md ("Testing your NPC logic without a model").
"""

from __future__ import annotations

from pyruntime.testing.models import ChatRequest, FunctionModel, InProcessModel, Reply, ReplyFunction, ScriptedModel
from pyruntime.testing.recording import Answering, RecordingModel
from pyruntime.testing.scripted import Answer, Script, ScriptedCall, ScriptedError, scripted_answer

__all__ = [
    "Answer",
    "Answering",
    "ChatRequest",
    "FunctionModel",
    "InProcessModel",
    "RecordingModel",
    "Reply",
    "ReplyFunction",
    "Script",
    "ScriptedCall",
    "ScriptedError",
    "ScriptedModel",
    "scripted_answer",
]
