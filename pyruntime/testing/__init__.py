"""Test doubles shipped with the package: in-process models for testing NPC logic without a model.

    from pyruntime.testing import ScriptedModel, ScriptedCall
    model = ScriptedModel([ScriptedCall("memory", {"action": "append", "content": "Likes axes"}), "Noted."])
    orchestrator = AiOrchestrator(policy, stores, model)

See docs/testing.md ("Testing your NPC logic without a model").
"""

from __future__ import annotations

from pyruntime.testing.models import ChatRequest, FunctionModel, InProcessModel, Reply, ReplyFunction, ScriptedModel
from pyruntime.testing.scripted import Answer, Script, ScriptedCall, ScriptedError, scripted_answer

__all__ = [
    "Answer",
    "ChatRequest",
    "FunctionModel",
    "InProcessModel",
    "Reply",
    "ReplyFunction",
    "Script",
    "ScriptedCall",
    "ScriptedError",
    "ScriptedModel",
    "scripted_answer",
]
